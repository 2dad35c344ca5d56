// The verdict state machine: every transition, on digests only.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import type { EnvTarget, VolumeTarget } from '../../src/discover/targets.ts';
import { expectEnv, expectVolume } from '../../src/verify/expected.ts';
import { keyedFingerprint, keyId } from '../../src/verify/fingerprint.ts';
import {
  type SourceSnapshot,
  type SourceState,
  sameView,
  sha256,
  snapshotConfigMap,
  snapshotSecret,
} from '../../src/verify/source.ts';
import { decide, type TargetMemory, type VolumeObservation } from '../../src/verify/verdict.ts';

const fingerprint = keyedFingerprint(Buffer.from('a test key of this pod'));
const policy = { graceMs: 90_000, debounceMs: 5_000, fingerprint };
const T0 = Date.parse('2026-12-02T10:00:00Z');

const volume = (over: Partial<VolumeTarget> = {}): VolumeTarget => ({
  type: 'volume',
  container: 'app',
  volume: 'config',
  mountPath: '/etc/app',
  sources: [{ ref: { kind: 'ConfigMap', name: 'app' }, optional: false, defaultMode: 0o644 }],
  ...over,
});

function cm(data: Record<string, string>, changedAt = T0, immutable = false): SourceSnapshot {
  return {
    ...snapshotConfigMap({ metadata: { name: 'app', uid: 'u1', resourceVersion: '7' }, data }),
    changedAt,
    immutable,
  };
}

const lookupOf = (state: SourceState | undefined) => () => state;
const present = (snap: SourceSnapshot): SourceState => ({ state: 'present', snapshot: snap });
const onDisk = (files: Record<string, string | 'missing'>, extras: string[] = []): VolumeObservation => ({
  files: new Map(
    Object.entries(files).map(([p, v]) => [
      p,
      v === 'missing' ? 'missing' : { sha256: sha256(Buffer.from(v)), size: v.length },
    ]),
  ),
  extras,
});

function run(
  target: VolumeTarget,
  state: SourceState | undefined,
  observed: VolumeObservation,
  now: number,
  memory: TargetMemory = {},
) {
  return decide(target, expectVolume(target, lookupOf(state)), observed, memory, now, policy);
}

describe('volume targets', () => {
  it('InSync when every expected file has the API bytes', () => {
    const { verdict } = run(
      volume(),
      present(cm({ 'a.yaml': 'x: 1' })),
      onDisk({ 'a.yaml': 'x: 1' }),
      T0 + 1000,
    );
    expect(verdict).toMatchObject({ state: 'InSync', reason: 'InSync', mismatches: [] });
  });

  it('Propagating inside the grace window after the API change, with a deadline', () => {
    const { verdict, memory } = run(
      volume(),
      present(cm({ 'a.yaml': 'x: 2' })),
      onDisk({ 'a.yaml': 'x: 1' }),
      T0 + 10_000,
    );
    expect(verdict).toMatchObject({ state: 'Propagating', since: T0, deadline: T0 + 90_000 });
    expect(verdict.mismatches).toEqual([
      {
        path: 'a.yaml',
        kind: 'content',
        expected: fingerprint(sha256(Buffer.from('x: 2'))),
        observed: fingerprint(sha256(Buffer.from('x: 1'))),
      },
    ]);
    expect(memory).toEqual({ lastState: 'Propagating', mismatchSince: T0 + 10_000 });
  });

  it("the agent's spread is added to the window, which the messages still name as set", () => {
    const target = volume();
    const stale = onDisk({ 'a.yaml': 'x: 1' });
    const spread = { ...policy, spreadMs: 700 };
    const decideAt = (now: number) =>
      decide(
        target,
        expectVolume(target, lookupOf(present(cm({ 'a.yaml': 'x: 2' })))),
        stale,
        {},
        now,
        spread,
      ).verdict;
    expect(decideAt(T0 + 90_500)).toMatchObject({ state: 'Propagating', deadline: T0 + 90_700 });
    expect(decideAt(T0 + 90_500).message).toContain('within the 90s window');
    expect(decideAt(T0 + 90_700)).toMatchObject({ state: 'Drifted', reason: 'ContentDrift' });
    expect(decideAt(T0 + 90_700).message).toContain('past the 90s grace');
  });

  it('Propagating -> InSync measures the propagation time from the API change', () => {
    const { verdict } = run(
      volume(),
      present(cm({ 'a.yaml': 'x: 2' })),
      onDisk({ 'a.yaml': 'x: 2' }),
      T0 + 12_500,
      {
        lastState: 'Propagating',
        mismatchSince: T0 + 1000,
      },
    );
    expect(verdict).toMatchObject({ state: 'InSync', propagationSeconds: 12.5 });
  });

  it('InSync -> InSync measures nothing', () => {
    const { verdict } = run(volume(), present(cm({ a: '1' })), onDisk({ a: '1' }), T0 + 5000, {
      lastState: 'InSync',
    });
    expect(verdict.propagationSeconds).toBeUndefined();
  });

  it('a change whose files landed before any pass saw them differ is measured too, once', () => {
    // The first pass after start measures nothing: the version is older than the agent.
    const first = run(volume(), present(cm({ a: '1' })), onDisk({ a: '1' }), T0 + 1000);
    expect(first.verdict.propagationSeconds).toBeUndefined();
    // The API's event and kubelet's swap both came before the next pass: InSync -> InSync.
    const next = present(cm({ a: '2' }, T0 + 60_000));
    const landed = run(volume(), next, onDisk({ a: '2' }), T0 + 60_250, first.memory);
    expect(landed.verdict).toMatchObject({ state: 'InSync', propagationSeconds: 0.25 });
    expect(
      run(volume(), next, onDisk({ a: '2' }), T0 + 61_000, landed.memory).verdict.propagationSeconds,
    ).toBe(undefined);
  });

  it('a change to what the target does not show (a key outside its items) propagates nothing', () => {
    const items = volume({
      sources: [
        {
          ref: { kind: 'ConfigMap', name: 'app' },
          optional: false,
          defaultMode: 0o644,
          items: [{ key: 'a', path: 'a' }],
        },
      ],
    });
    const first = run(items, present(cm({ a: '1', b: '1' })), onDisk({ a: '1' }), T0 + 1000);
    const other = run(
      items,
      present(cm({ a: '1', b: '2' }, T0 + 60_000)),
      onDisk({ a: '1' }),
      T0 + 60_250,
      first.memory,
    );
    expect(other.verdict).toMatchObject({ state: 'InSync' });
    expect(other.verdict.propagationSeconds).toBeUndefined();
  });

  it('a subPath file is never propagated: no propagation time from a change to its source', () => {
    const file = volume({ mountPath: '/etc/a', subPath: 'a' });
    const first = run(file, present(cm({ a: '1', b: '1' })), onDisk({ '': '1' }), T0 + 1000);
    const other = run(
      file,
      present(cm({ a: '1', b: '2' }, T0 + 60_000)),
      onDisk({ '': '1' }),
      T0 + 60_250,
      first.memory,
    );
    expect(other.verdict.propagationSeconds).toBeUndefined();
  });

  it('Drifted (ContentDrift) past the grace window', () => {
    const { verdict } = run(volume(), present(cm({ a: '2' })), onDisk({ a: '1' }), T0 + 91_000);
    expect(verdict).toMatchObject({ state: 'Drifted', reason: 'ContentDrift' });
    expect(verdict.message).toContain('still differ 91s after the change, past the 90s grace');
  });

  it('an agent that starts long after the change calls it drift on its first pass', () => {
    const { verdict } = run(volume(), present(cm({ a: '2' }, T0)), onDisk({ a: '1' }), T0 + 3_600_000, {});
    expect(verdict.state).toBe('Drifted');
  });

  it('without a known change time the window starts at the first sighting', () => {
    const snap = { ...cm({ a: '2' }), changedAt: undefined };
    const first = run(volume(), present(snap), onDisk({ a: '1' }), T0);
    expect(first.verdict.state).toBe('Propagating');
    const later = run(volume(), present(snap), onDisk({ a: '1' }), T0 + 90_000, first.memory);
    expect(later.verdict.state).toBe('Drifted');
  });

  it('Missing (FileMissing) when every mismatch is a file that is not there, past grace', () => {
    const { verdict } = run(
      volume(),
      present(cm({ a: '1', b: '2' })),
      onDisk({ a: 'missing', b: 'missing' }),
      T0 + 100_000,
    );
    expect(verdict).toMatchObject({ state: 'Missing', reason: 'FileMissing' });
  });

  it('a file on disk for a key the API no longer has is a mismatch', () => {
    const { verdict } = run(
      volume(),
      present(cm({ a: '1' })),
      onDisk({ a: '1' }, ['removed-key']),
      T0 + 100_000,
    );
    expect(verdict.mismatches).toEqual([{ path: 'removed-key', kind: 'unexpected' }]);
    expect(verdict.state).toBe('Drifted');
  });

  it('subPath: only the one file, and Drifted (SubPathStale) after the short debounce', () => {
    const target = volume({ subPath: 'a' });
    const prop = run(target, present(cm({ a: '2', b: 'x' })), onDisk({ '': '1' }), T0 + 2000);
    expect(prop.verdict.state).toBe('Propagating');
    const { verdict } = run(
      target,
      present(cm({ a: '2', b: 'x' })),
      onDisk({ '': '1' }),
      T0 + 6000,
      prop.memory,
    );
    expect(verdict).toMatchObject({ state: 'Drifted', reason: 'SubPathStale' });
    expect(verdict.message).toContain('never updated by kubelet');
  });

  it('an immutable source is never propagated: ImmutableStale after the debounce', () => {
    const { verdict } = run(volume(), present(cm({ a: '2' }, T0, true)), onDisk({ a: '1' }), T0 + 6000);
    expect(verdict).toMatchObject({ state: 'Drifted', reason: 'ImmutableStale' });
  });

  it('Unknown (ApiUnreadable) when the API could not be read', () => {
    const { verdict } = run(
      volume(),
      { state: 'unreadable', ref: { kind: 'ConfigMap', name: 'app' }, reason: 'forbidden' },
      onDisk({}),
      T0,
    );
    expect(verdict).toMatchObject({ state: 'Unknown', reason: 'ApiUnreadable' });
  });

  it('Unknown (FilesUnreadable) when the mount could not be read', () => {
    const { verdict } = run(
      volume(),
      present(cm({ a: '1' })),
      { files: new Map(), extras: [], error: 'EACCES /etc/app' },
      T0,
    );
    expect(verdict).toMatchObject({
      state: 'Unknown',
      reason: 'FilesUnreadable',
      message: 'EACCES /etc/app',
    });
  });

  it('Missing (SourceMissing) when a non-optional source is gone: files keep their content', () => {
    const { verdict } = run(
      volume(),
      { state: 'absent', ref: { kind: 'ConfigMap', name: 'app' } },
      onDisk({ a: '1' }),
      T0,
    );
    expect(verdict).toMatchObject({ state: 'Missing', reason: 'SourceMissing' });
  });

  it('an optional source that is gone expects an empty volume', () => {
    const target = volume({
      sources: [{ ref: { kind: 'ConfigMap', name: 'app' }, optional: true, defaultMode: 0o644 }],
    });
    const absent: SourceState = { state: 'absent', ref: { kind: 'ConfigMap', name: 'app' } };
    expect(run(target, absent, onDisk({}), T0).verdict.state).toBe('InSync');
    // No change time is known for a deleted object: the window starts at the first sighting.
    const first = run(target, absent, onDisk({}, ['a']), T0);
    expect(first.verdict.state).toBe('Propagating');
    expect(run(target, absent, onDisk({}, ['a']), T0 + 100_000, first.memory).verdict.state).toBe('Drifted');
  });

  it('a listed item whose key is gone is SourceMissing (the mount would fail)', () => {
    const target = volume({
      sources: [
        {
          ref: { kind: 'ConfigMap', name: 'app' },
          items: [{ key: 'gone', path: 'g' }],
          optional: false,
          defaultMode: 0o644,
        },
      ],
    });
    expect(run(target, present(cm({ a: '1' })), onDisk({}), T0).verdict).toMatchObject({
      state: 'Missing',
      reason: 'SourceMissing',
    });
  });
});

describe('projection rules (expectVolume)', () => {
  it('projected sources merge in order, a later one winning at the same path, with items and modes', () => {
    const target = volume({
      sources: [
        { ref: { kind: 'ConfigMap', name: 'base' }, optional: false, defaultMode: 0o600 },
        {
          ref: { kind: 'Secret', name: 'over' },
          items: [{ key: 'pw', path: 'a', mode: 0o400 }],
          optional: false,
          defaultMode: 0o600,
        },
      ],
    });
    const base = present({
      ...snapshotConfigMap({ metadata: { name: 'base' }, data: { a: 'from-cm', b: 'only-cm' } }),
    });
    const over = present(
      snapshotSecret({
        metadata: { name: 'over' },
        data: { pw: Buffer.from('from-secret').toString('base64') },
      }),
    );
    const exp = expectVolume(target, (ref) => (ref.name === 'base' ? base : over));
    expect(exp.files.get('a')).toMatchObject({
      digest: { sha256: sha256(Buffer.from('from-secret')) },
      mode: 0o400,
      key: 'pw',
    });
    expect(exp.files.get('b')).toMatchObject({
      digest: { sha256: sha256(Buffer.from('only-cm')) },
      mode: 0o600,
    });
  });

  it('hashes binaryData and Secret data decoded, exactly as kubelet writes them', () => {
    const bin = Buffer.from([0, 255, 10]);
    const snap = snapshotConfigMap({ metadata: { name: 'x' }, binaryData: { b: bin.toString('base64') } });
    expect(snap.keys.get('b')).toEqual({ sha256: sha256(bin), size: 3 });
  });

  it('hashes a data value as the UTF-8 bytes kubelet writes, its size in bytes', () => {
    const value = 'naïve — 東京\n';
    const bytes = Buffer.from(value, 'utf8');
    const snap = snapshotConfigMap({ metadata: { name: 'x' }, data: { k: value } });
    expect(snap.keys.get('k')).toEqual({
      sha256: createHash('sha256').update(bytes).digest('hex'),
      size: bytes.byteLength,
    });
    expect(bytes.byteLength).toBeGreaterThan(value.length);
  });

  it('fingerprints are the HMAC of the digest under the Pod’s key, 12 hex characters', () => {
    const key = Buffer.alloc(32, 7);
    const digest = sha256(Buffer.from('v'));
    const expected = createHmac('sha256', key).update(digest).digest('hex').slice(0, 12);
    const fingerprint = keyedFingerprint(key);
    expect(fingerprint(digest)).toBe(expected);
    expect(fingerprint(digest)).toBe(expected); // the key imported once serves every call
    expect(keyedFingerprint(Buffer.alloc(32, 8))(digest)).not.toBe(expected);
  });
});

describe('env targets', () => {
  const env: EnvTarget = {
    type: 'env',
    container: 'app',
    ref: { kind: 'Secret', name: 'db' },
    keys: ['password'],
    optional: false,
  };
  const secret = (pw: string) =>
    present({
      ...snapshotSecret({ metadata: { name: 'db' }, data: { password: Buffer.from(pw).toString('base64') } }),
      changedAt: T0,
    });

  it('InSync while the key has the digest the container started with', () => {
    const { digest, expectation } = expectEnv(env, lookupOf(secret('one')));
    expect(
      decide(env, expectation, { baseline: digest }, {}, T0 + 60_000, policy, digest).verdict.state,
    ).toBe('InSync');
  });

  it('Drifted (EnvStale) after the debounce once the key changed', () => {
    const before = expectEnv(env, lookupOf(secret('one'))).digest;
    const { digest, expectation } = expectEnv(env, lookupOf(secret('two')));
    const { verdict } = decide(env, expectation, { baseline: before }, {}, T0 + 6000, policy, digest);
    expect(verdict).toMatchObject({ state: 'Drifted', reason: 'EnvStale', target: 'app:env:Secret/db' });
    expect(JSON.stringify(verdict)).not.toContain('two');
  });
});

describe('sameView: two reads of one source show the same object', () => {
  const present = (uid: string, resourceVersion: string): SourceState => ({
    state: 'present',
    snapshot: {
      ref: { kind: 'ConfigMap', name: 'app' },
      uid,
      resourceVersion,
      immutable: false,
      changedAt: undefined,
      keys: new Map(),
    },
  });
  const absent: SourceState = { state: 'absent', ref: { kind: 'ConfigMap', name: 'app' } };
  const unreadable: SourceState = {
    state: 'unreadable',
    ref: { kind: 'ConfigMap', name: 'app' },
    reason: 'x',
  };

  it.each([
    ['same uid and version', present('u1', '5'), present('u1', '5'), true],
    ['a newer version', present('u1', '5'), present('u1', '6'), false],
    ['recreated under the same name', present('u1', '5'), present('u2', '5'), false],
    ['both absent', absent, absent, true],
    ['deleted since', present('u1', '5'), absent, false],
    ['unreadable shows nothing', unreadable, unreadable, false],
    ['never read', undefined, present('u1', '5'), false],
  ])('%s', (_what, a, b, same) => {
    expect(sameView(a, b)).toBe(same);
  });
});

describe('fingerprints: what leaves the process is keyed', () => {
  const digest = sha256(Buffer.from('hunter2'));

  it('is not the plain sha256 prefix a reader could recompute for a guessed value', () => {
    expect(fingerprint(digest)).toMatch(/^[0-9a-f]{12}$/);
    expect(fingerprint(digest)).not.toBe(digest.slice(0, 12));
  });

  it('is stable under one key and differs under another', () => {
    expect(fingerprint(digest)).toBe(keyedFingerprint(Buffer.from('a test key of this pod'))(digest));
    expect(keyedFingerprint(Buffer.from('another pod'))(digest)).not.toBe(fingerprint(digest));
  });

  it('a key id names the key without revealing it', () => {
    const key = Buffer.from('a test key of this pod');
    expect(keyId(key)).toMatch(/^[0-9a-f]{8}$/);
    expect(keyId(key)).not.toBe(keyId(Buffer.from('another pod')));
    expect(keyId(key)).not.toContain(key.toString('hex').slice(0, 8));
  });
});
