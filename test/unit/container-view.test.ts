// What the app container holds for the targets kubelet never updates, when it and the agent did
// not start together (src/verify/container-view.ts), and how a pass decides on it.
import { describe, expect, it } from 'vitest';
import { containerStarts, readsContainerStarts, verifyPass } from '../../src/agent/pass.ts';
import type { StartBaseline } from '../../src/agent/start-baselines.ts';
import type { Target } from '../../src/discover/targets.ts';
import { containerView, START_SLACK_MS } from '../../src/verify/container-view.ts';
import { keyedFingerprint } from '../../src/verify/fingerprint.ts';
import { type SourceState, sha256, snapshotConfigMap } from '../../src/verify/source.ts';

const T = 1_800_000_000_000;
const S = START_SLACK_MS;

describe('containerView', () => {
  it('the app started after the current version: it holds it, whatever the agent’s copy says', () => {
    expect(containerView(T + S + 1, T - 60_000, T)).toBe('current');
    expect(containerView(T + S + 1, T + 60_000, T)).toBe('current');
  });
  it('the agent started no later than the app (the native sidecar order): its copy stands for the app’s', () => {
    expect(containerView(T, T - 3000, T + 60_000)).toBe('agent-copy');
    expect(containerView(T, T + S, T + 60_000)).toBe('agent-copy');
  });
  it('the agent restarted after the change, the app did not: the app is older', () => {
    expect(containerView(T - 60_000, T + 10_000, T)).toBe('older');
  });
  it('a start within the slack of the change is not taken as current (a restart is the safe side)', () => {
    expect(containerView(T + S, T + 60_000, T)).toBe('older');
    expect(containerView(T + S, T - 1000, T)).toBe('agent-copy');
  });
  it('a source never changed since its creation has no older version to hold, even just after it', () => {
    // The app started within the slack after the creation, the agent restarted later: without
    // this, 'older' (a restart for a version that never existed).
    expect(containerView(T + 1000, T + 60_000, T, true)).toBe('current');
    // An app started before the source existed held a predecessor (deleted and recreated).
    expect(containerView(T - 60_000, T + 60_000, T, true)).toBe('older');
  });
  it('unknown starts fall back to the agent’s copy', () => {
    expect(containerView(undefined, T, T)).toBe('agent-copy');
    expect(containerView(T - 60_000, undefined, T)).toBe('agent-copy');
    expect(containerView(T, T, undefined)).toBe('agent-copy');
  });
});

describe('containerStarts', () => {
  it('reads running containers and init (sidecar) containers; the agent’s start is its process’s', () => {
    const starts = containerStarts(
      {
        status: {
          initContainerStatuses: [
            { name: 'config-sync', state: { running: { startedAt: new Date(T) } } } as never,
          ],
          containerStatuses: [
            { name: 'app', state: { running: { startedAt: new Date(T + 5000) } } } as never,
            { name: 'side', state: { waiting: { reason: 'CrashLoopBackOff' } } } as never,
          ],
        },
      },
      T - 100,
    );
    expect(starts).toEqual({ agent: T - 100, byContainer: { 'config-sync': T, app: T + 5000 } });
  });
});

describe('a pass on a subPath file and an env var, by container starts', () => {
  const changedAt = T;
  const cm = (value: string): SourceState => ({
    state: 'present',
    snapshot: {
      ...snapshotConfigMap({ metadata: { name: 'cfg', resourceVersion: '2', uid: 'u' }, data: { k: value } }),
      changedAt,
    },
  });
  const subPath: Target = {
    type: 'volume',
    container: 'app',
    volume: 'cfg',
    mountPath: '/etc/k',
    subPath: 'k',
    sources: [{ ref: { kind: 'ConfigMap', name: 'cfg' }, optional: false, defaultMode: 0o644 }],
  };
  const env: Target = {
    type: 'env',
    container: 'app',
    ref: { kind: 'ConfigMap', name: 'cfg' },
    keys: ['k'],
    optional: false,
  };
  const pass = (
    agentCopy: string,
    appStartedAt: number | undefined,
    agentStartedAt: number,
    baseline?: string,
    baselines: Record<string, StartBaseline> = {},
  ) =>
    verifyPass({
      targets: [subPath, env],
      lookup: () => cm('new'),
      readVolume: () => ({
        files: new Map([['', { sha256: sha256(Buffer.from(agentCopy)), size: agentCopy.length }]]),
        extras: [],
      }),
      volumePath: (t) => t.mountPath,
      baselines: baseline === undefined ? baselines : { ...baselines, [ENV]: { fp: baseline } },
      memory: new Map(),
      windows: { graceMs: 90_000, debounceMs: 0 },
      fingerprint: keyedFingerprint(Buffer.from('a test key')),
      now: T + 120_000,
      starts: { agent: agentStartedAt, byContainer: appStartedAt === undefined ? {} : { app: appStartedAt } },
    });
  const ENV = 'app:env:ConfigMap/cfg';
  const FILE = 'app:/etc/k';
  const fp = keyedFingerprint(Buffer.from('a test key'));
  const fileFp = (value: string) => fp(sha256(Buffer.from(value)));

  it('the app restarted after the change: InSync, though the agent’s copy and baseline are old', () => {
    const r = pass('old', T + 30_000, T - 600_000, 'old-baseline');
    expect(r.verdicts.map((v) => v.state)).toEqual(['InSync', 'InSync']);
  });
  it('the agent restarted after the change, the app did not: Drifted, though the agent’s copy is new', () => {
    const r = pass('new', T - 600_000, T + 30_000);
    expect(r.verdicts.map((v) => v.reason)).toEqual(['SubPathStale', 'EnvStale']);
    // No baseline is taken from a version the app never got.
    expect(r.baselines).toEqual({});
  });
  it('both from before the change, in the sidecar order: the agent’s copy decides', () => {
    expect(pass('old', T - 600_000, T - 601_000).verdicts[0]?.reason).toBe('SubPathStale');
    expect(pass('new', T - 600_000, T - 601_000).verdicts[0]?.state).toBe('InSync');
  });

  describe('a baseline recorded for the app container’s start', () => {
    const APP = T - 600_000;
    // What the app got at its start, as the first agent recorded it: the key's value `new`.
    const envNew = () => pass('new', T + 30_000, T - 601_000).baselines[ENV]?.fp as string;
    it('the agent restarted after a change to another key: the app holds the current value, InSync', () => {
      const held = { [FILE]: { fp: fileFp('new'), startedAt: APP }, [ENV]: { fp: envNew(), startedAt: APP } };
      const r = pass('new', APP, T + 30_000, undefined, held);
      expect(r.verdicts.map((v) => v.state)).toEqual(['InSync', 'InSync']);
      expect(r.baselines).toEqual({});
    });
    it('the agent restarted after a change to the key itself: Drifted, showing what the app holds', () => {
      const oldEnv = pass('new', T + 30_000, T - 601_000, undefined, {}).baselines[ENV]?.fp;
      const held = {
        [FILE]: { fp: fileFp('old'), startedAt: APP },
        [ENV]: { fp: `${oldEnv}-of-old`, startedAt: APP },
      };
      const r = pass('new', APP, T + 30_000, undefined, held);
      expect(r.verdicts.map((v) => v.reason)).toEqual(['SubPathStale', 'EnvStale']);
      expect(r.verdicts[0]?.mismatches).toEqual([
        { path: '', kind: 'content', expected: fileFp('new'), observed: fileFp('old') },
      ]);
    });
    it('it stands for that start only: the app started again since -> its start decides again', () => {
      const held = { [FILE]: { fp: fileFp('new'), startedAt: APP - 60_000 } };
      expect(pass('new', APP, T + 30_000, undefined, held).verdicts[0]?.reason).toBe('SubPathStale');
    });
    it('env, in the sidecar order, with a baseline of an earlier start: still the observation, nothing new recorded', () => {
      // The app started again after the agent, within the slack of the change: what it got then
      // is not known, so the old baseline decides as it did before baselines had starts.
      const held = { [ENV]: { fp: 'env-of-an-earlier-start', startedAt: T - 600_000 } };
      const r = pass('new', T + S, T - 601_000, undefined, held);
      expect(r.verdicts[1]?.reason).toBe('EnvStale');
      expect(r.verdicts[1]?.mismatches[0]?.observed).toBe('env-of-an-earlier-start');
      expect(r.baselines[ENV]).toBeUndefined();
    });
  });

  describe('which baselines a pass offers to record', () => {
    it('the app started after the current version: the API’s version, with that start', () => {
      const r = pass('old', T + 30_000, T - 600_000);
      expect(r.baselines[FILE]).toEqual({ fp: fileFp('new'), startedAt: T + 30_000 });
      expect(r.baselines[ENV]).toEqual({
        fp: expect.stringMatching(/^[0-9a-f]{12}$/),
        startedAt: T + 30_000,
      });
    });
    it('the agent’s copy stands for the app’s: that copy for a subPath file; for env the untied baseline, tied', () => {
      const r = pass('old', T - 600_000, T - 601_000, 'env-at-first-start');
      expect(r.baselines[FILE]).toEqual({ fp: fileFp('old'), startedAt: T - 600_000 });
      expect(r.baselines[ENV]).toEqual({ fp: 'env-at-first-start', startedAt: T - 600_000 });
    });
    it('the app’s start not known yet: an untied env baseline, no subPath one (the agent’s copy is the observation)', () => {
      const r = pass('new', undefined, T - 601_000);
      expect(Object.keys(r.baselines)).toEqual([ENV]);
      expect(r.baselines[ENV]?.startedAt).toBeUndefined();
    });
    it('already recorded for this start: nothing', () => {
      const held = { [FILE]: { fp: fileFp('old'), startedAt: T - 600_000 } };
      expect(pass('old', T - 600_000, T - 601_000, undefined, held).baselines[FILE]).toBeUndefined();
    });
  });
});

describe('neverChanged, from the object', () => {
  const at = (s: string) => new Date(s);
  it('created and never updated: true; updated later, or seen changing by the watch: false', () => {
    const created = { name: 'c', creationTimestamp: at('2026-12-03T10:00:00Z') };
    const op = (time: string) => ({ manager: 'kubectl', operation: 'Update', time: at(time) });
    expect(
      snapshotConfigMap({ metadata: { ...created, managedFields: [op('2026-12-03T10:00:00Z')] } })
        .neverChanged,
    ).toBe(true);
    expect(
      snapshotConfigMap({ metadata: { ...created, managedFields: [op('2026-12-03T10:05:00Z')] } })
        .neverChanged,
    ).toBe(false);
    expect(
      snapshotConfigMap({ metadata: { ...created, managedFields: [op('2026-12-03T10:00:00Z')] } }, T)
        .neverChanged,
    ).toBe(false);
  });
});

describe('readsContainerStarts: which drift needs the Pod read again before acting', () => {
  const volume: Target = {
    type: 'volume',
    container: 'app',
    volume: 'config',
    mountPath: '/etc/app',
    sources: [{ ref: { kind: 'ConfigMap', name: 'web' }, optional: false, defaultMode: 0o644 }],
  };
  it('a subPath file and an env target hold what their container started with: yes', () => {
    expect(readsContainerStarts({ ...volume, subPath: 'app.yaml' })).toBe(true);
    expect(
      readsContainerStarts({
        type: 'env',
        container: 'app',
        ref: { kind: 'Secret', name: 'web' },
        keys: 'all',
        optional: false,
      }),
    ).toBe(true);
  });
  it('a whole volume is compared as the agent sees it now: no', () => {
    expect(readsContainerStarts(volume)).toBe(false);
  });
});
