// Which targets a Pod's annotations leave out, each named with the annotation that did.
import { describe, expect, it } from 'vitest';
import { SELECT_ALL, selectTargets } from '../../src/discover/selection.ts';
import type { Target } from '../../src/discover/targets.ts';

const source = (kind: 'ConfigMap' | 'Secret', name: string) => ({
  ref: { kind, name },
  optional: false,
  defaultMode: 0o644,
});
const volume = (name: string, mountPath: string, sources: ReturnType<typeof source>[]): Target => ({
  type: 'volume',
  container: 'app',
  volume: name,
  mountPath,
  sources,
});
const config = volume('config', '/etc/app', [source('ConfigMap', 'app-config')]);
const cache = volume('cache', '/var/cache/app', [source('ConfigMap', 'cache-seed')]);
const projected = volume('all', '/etc/all', [source('ConfigMap', 'shared-ca'), source('Secret', 'tls')]);
const secretEnv: Target = {
  type: 'env',
  container: 'app',
  ref: { kind: 'Secret', name: 'db' },
  keys: ['password'],
  optional: false,
};
const configEnv: Target = { ...secretEnv, ref: { kind: 'ConfigMap', name: 'flags' }, keys: 'all' };
const all = [config, cache, projected, secretEnv, configEnv];

describe('selectTargets', () => {
  it('keeps every target when the annotations say nothing', () => {
    expect(selectTargets(all, SELECT_ALL)).toEqual({ targets: all, excluded: [], unmatched: [] });
  });

  it('leaves out a volume by its name, and a target that reads a named source', () => {
    const selected = selectTargets(all, {
      ignore: [
        { kind: 'volume', name: 'cache' },
        { kind: 'ConfigMap', name: 'flags' },
      ],
      secretEnv: 'restart',
    });
    expect(selected.targets).toEqual([config, projected, secretEnv]);
    expect(selected.excluded).toEqual([
      'container app: volume cache at /var/cache/app: not checked, config-sync.io/ignore names volume/cache',
      'container app: env from ConfigMap flags: not checked, config-sync.io/ignore names configmap/flags',
    ]);
  });

  it('leaves a projected volume out whole when one of its sources is named, and says so', () => {
    const selected = selectTargets(all, { ignore: [{ kind: 'Secret', name: 'tls' }], secretEnv: 'restart' });
    expect(selected.targets).not.toContain(projected);
    expect(selected.excluded).toEqual([
      'container app: volume all at /etc/all: not checked, config-sync.io/ignore names secret/tls (the volume projects other sources too; a volume is checked whole or not at all)',
    ]);
  });

  it('leaves out Secrets read as environment variables with secret-env ignore, and only those', () => {
    const selected = selectTargets(all, { ignore: [], secretEnv: 'ignore' });
    expect(selected.targets).toEqual([config, cache, projected, configEnv]);
    expect(selected.excluded).toEqual([
      'container app: env from Secret db: not checked, config-sync.io/secret-env is ignore',
    ]);
  });

  it('names the entries that match nothing (a typo, most likely)', () => {
    const selected = selectTargets(all, {
      ignore: [
        { kind: 'volume', name: 'cahce' },
        { kind: 'Secret', name: 'db' },
      ],
      secretEnv: 'restart',
    });
    expect(selected.targets).toEqual([config, cache, projected, configEnv]);
    expect(selected.unmatched).toEqual([
      'config-sync.io/ignore names volume/cahce, which no checked container mounts: check the name',
    ]);
  });
});
