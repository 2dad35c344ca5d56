// A ConfigMap or Secret that says "never restart for me" (config-sync.io/restart=never): read
// from the object, and held against the drifted targets whose drift comes only from it.
import { describe, expect, it } from 'vitest';
import type { SourceRef, Target } from '../../src/discover/targets.ts';
import { neverRestartTargets } from '../../src/heal/never-restart.ts';
import { expectVolume } from '../../src/verify/expected.ts';
import { refKey, type SourceState, snapshotConfigMap, snapshotSecret } from '../../src/verify/source.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const cm = (name: string, data: Record<string, string>, restart?: string): SourceState => ({
  state: 'present',
  snapshot: snapshotConfigMap({
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      ...(restart === undefined ? {} : { annotations: { 'config-sync.io/restart': restart } }),
    },
    data,
  }),
});
const states = new Map<string, SourceState>([
  ['ConfigMap/shared-ca', cm('shared-ca', { 'ca.crt': 'x' }, 'never')],
  ['ConfigMap/app', cm('app', { 'app.yaml': 'y' })],
  [
    'Secret/token',
    {
      state: 'present',
      snapshot: snapshotSecret({
        metadata: {
          name: 'token',
          uid: 'u',
          resourceVersion: '2',
          annotations: { 'config-sync.io/restart': 'never' },
        },
        data: { t: Buffer.from('z').toString('base64') },
      }),
    },
  ],
]);
const lookup = (ref: SourceRef) => states.get(refKey(ref));
const src = (kind: 'ConfigMap' | 'Secret', name: string) => ({
  ref: { kind, name },
  optional: false,
  defaultMode: 0o644,
});
const projected: Target = {
  type: 'volume',
  container: 'app',
  volume: 'all',
  mountPath: '/etc/all',
  sources: [src('ConfigMap', 'shared-ca'), src('ConfigMap', 'app')],
};
const env: Target = {
  type: 'env',
  container: 'app',
  ref: { kind: 'Secret', name: 'token' },
  keys: ['t'],
  optional: false,
};
const drift = (
  target: string,
  paths: { path: string; kind: 'content' | 'missing' | 'unexpected' }[],
): Verdict => ({
  target,
  state: 'Drifted',
  reason: 'ContentDrift',
  message: 'differs',
  mismatches: paths,
});

describe('the source annotation', () => {
  it.each([
    [undefined, undefined],
    ['allowed', undefined],
    ['never', 'ConfigMap/x says config-sync.io/restart=never'],
    [
      'no',
      'ConfigMap/x has config-sync.io/restart="no", which is not never or allowed: held to never until it is fixed',
    ],
  ])('config-sync.io/restart=%s', (value, line) => {
    const state = cm('x', {}, value);
    expect(state.state === 'present' ? state.snapshot.neverRestart : 'absent').toBe(line);
  });
});

describe('neverRestartTargets', () => {
  it('holds a projected volume whose differing files all come from a never source', () => {
    expect(expectVolume(projected as never, lookup).files.get('ca.crt')?.source.name).toBe('shared-ca');
    const held = neverRestartTargets(
      [projected, env],
      [drift('app:/etc/all', [{ path: 'ca.crt', kind: 'content' }])],
      lookup,
    );
    expect([...held]).toEqual([['app:/etc/all', ['ConfigMap/shared-ca says config-sync.io/restart=never']]]);
  });

  it('does not hold it where a file of another source differs too, or a file no source expects is there', () => {
    for (const paths of [
      [
        { path: 'ca.crt', kind: 'content' as const },
        { path: 'app.yaml', kind: 'content' as const },
      ],
      [{ path: 'stray', kind: 'unexpected' as const }],
    ]) {
      expect(neverRestartTargets([projected], [drift('app:/etc/all', paths)], lookup).size).toBe(0);
    }
  });

  it('holds an env target of a never Secret, and only drifted ones', () => {
    const v = drift('app:env:Secret/token', []);
    expect(neverRestartTargets([env], [v], lookup).get('app:env:Secret/token')).toEqual([
      'Secret/token says config-sync.io/restart=never',
    ]);
    expect(neverRestartTargets([env], [{ ...v, state: 'Propagating' }], lookup).size).toBe(0);
  });

  it('puts every source behind a drift without files: held only when all say never', () => {
    expect(neverRestartTargets([projected], [drift('app:/etc/all', [])], lookup).size).toBe(0);
  });
});
