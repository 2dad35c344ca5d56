import { describe, expect, it } from 'vitest';
import { resolveSettings, type SettingDef } from '../../src/cli/settings.ts';
import { parseWatchSpec } from '../../src/discover/watch-spec.ts';
import { ConfigSyncError } from '../../src/errors.ts';

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
