import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { configFileSetting, resolveSettings, type SettingDef } from '../../src/config/settings.ts';
import { parseWatchSpec } from '../../src/discover/watch-spec.ts';
import { ConfigSyncError } from '../../src/errors.ts';
import { tempDir } from '../cluster/temp-dir.ts';

const defs: SettingDef[] = [
  { name: 'namespace', short: 'n', env: 'CONFIG_SYNC_NAMESPACE', type: 'string', description: '' },
  { name: 'grace', env: 'CONFIG_SYNC_GRACE', type: 'string', default: '90s', description: '' },
  { name: 'fix', env: 'CONFIG_SYNC_FIX', type: 'boolean', description: '' },
  { name: 'watch', env: 'CONFIG_SYNC_WATCH', type: 'list', description: '' },
];

describe('resolveSettings: flag > env > default, with the origin kept', () => {
  it.each([
    [['-n', 'flag-ns'], { CONFIG_SYNC_NAMESPACE: 'env-ns' }, { value: 'flag-ns', source: '--namespace' }],
    [[], { CONFIG_SYNC_NAMESPACE: 'env-ns' }, { value: 'env-ns', source: 'CONFIG_SYNC_NAMESPACE' }],
    [[], {}, undefined],
  ])('%j with %j', (args, env, expected) => {
    expect(resolveSettings('doctor', defs, args, env).get('namespace')).toEqual(expected);
  });

  it('falls back to the default and says so', () => {
    expect(resolveSettings('doctor', defs, [], {}).get('grace')).toEqual({ value: '90s', source: 'default' });
  });

  it('reads booleans and comma lists from the environment', () => {
    const s = resolveSettings('doctor', defs, [], {
      CONFIG_SYNC_FIX: 'true',
      CONFIG_SYNC_WATCH: 'configmap/a, secret/b',
    });
    expect(s.boolean('fix')).toBe(true);
    expect(s.list('watch')).toEqual(['configmap/a', 'secret/b']);
  });

  it('repeats list flags', () => {
    expect(resolveSettings('doctor', defs, ['--watch', 'x', '--watch', 'y'], {}).list('watch')).toEqual([
      'x',
      'y',
    ]);
  });

  it.each([
    [['--bogus'], {}, "doctor: Unknown option '--bogus'"],
    [['stray'], {}, 'doctor: Unexpected argument'],
    [[], { CONFIG_SYNC_FIX: 'maybe' }, 'doctor: CONFIG_SYNC_FIX=maybe is not a boolean'],
  ])('%j %j is a usage error', (args, env, message) => {
    const run = () => resolveSettings('doctor', defs, args, env);
    expect(run).toThrow(ConfigSyncError);
    expect(run).toThrow(message);
  });
});

describe('parseWatchSpec', () => {
  it.each([
    ['configmap/app-config', { ref: { kind: 'ConfigMap', name: 'app-config' } }],
    ['/etc/app=configmap/app-config', { path: '/etc/app', ref: { kind: 'ConfigMap', name: 'app-config' } }],
    ['/etc/app/app.yaml=secret/db', { path: '/etc/app/app.yaml', ref: { kind: 'Secret', name: 'db' } }],
  ])('%s', (raw, expected) => {
    expect(parseWatchSpec(raw)).toEqual(expected);
  });

  it.each([
    ['deployment/web', '"deployment" is not configmap or secret'],
    ['configmap/Bad_Name', '"Bad_Name" is not a valid object name'],
    ['configmap/a/b', 'is not a valid object name'],
    ['etc/app=configmap/a', 'must be absolute'],
  ])('rejects %s', (raw, why) => {
    expect(() => parseWatchSpec(raw)).toThrow(why);
  });
});

describe('the config file layer', () => {
  const withConfig = [configFileSetting, ...defs];
  const file = (text: string) => {
    const f = path.join(tempDir('cfg-'), 'config-sync.yaml');
    fs.writeFileSync(f, text);
    return f;
  };

  it('sits between the environment and the default, and says which file', () => {
    const f = file('grace: 2m\nnamespace: file-ns\nwatch: [configmap/a]\nfix: true\n');
    const s = resolveSettings('agent', withConfig, ['--config', f], { CONFIG_SYNC_NAMESPACE: 'env-ns' });
    expect(s.get('grace')).toEqual({ value: '2m', source: `config file ${f}` });
    expect(s.get('namespace')).toEqual({ value: 'env-ns', source: 'CONFIG_SYNC_NAMESPACE' });
    expect(s.list('watch')).toEqual(['configmap/a']);
    expect(s.boolean('fix')).toBe(true);
    expect(
      resolveSettings('agent', withConfig, ['--grace', '5s'], { CONFIG_SYNC_CONFIG: f }).get('grace')?.source,
    ).toBe('--grace');
  });

  it.each([
    ['nope: 1\n', 'unknown setting "nope" for agent'],
    ['fix: "yes"\n', '"fix" must be a boolean'],
    ['- a\n- b\n', 'is not a map of settings'],
    ['grace: [1\n', 'config file'],
  ])('%j is an error that names the file and the key', (text, message) => {
    const f = file(text);
    const run = () => resolveSettings('agent', withConfig, ['--config', f], {});
    expect(run).toThrow(message);
    expect(run).toThrow(f);
  });

  it('a missing file is an error, not an empty config', () => {
    expect(() => resolveSettings('agent', withConfig, ['--config', '/nonexistent/c.yaml'], {})).toThrow(
      'no such file',
    );
  });
});
