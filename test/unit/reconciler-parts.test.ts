// The parts of a Pod's reconciler, each with its own state, backoff and deadline, against a
// fake client that records what it is asked and fails when told to (pure units: the real API
// server's side is in test/integration/agent.test.ts and stream-reset.test.ts).
import { Writable } from 'node:stream';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ContainerStartsTracker } from '../../src/agent/container-starts.ts';
import { EventOutbox, MAX_UNSENT } from '../../src/agent/event-outbox.ts';
import { HealActor } from '../../src/agent/heal-actor.ts';
import type { Runtime } from '../../src/agent/runtime.ts';
import { matchedVersions, StatusWriter } from '../../src/agent/status-writer.ts';
import type { Target } from '../../src/discover/targets.ts';
import { ConfigSyncError } from '../../src/errors.ts';
import type { OwnerReadOptions } from '../../src/heal/owner.ts';
import type { OwnerState, WorkloadState } from '../../src/heal/planner.ts';
import { ANNOTATION } from '../../src/kube/annotations.ts';
import { createLogger } from '../../src/log.ts';
import { configVersion } from '../../src/verify/expected.ts';
import type { SourceState } from '../../src/verify/source.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

/** Log lines as objects. */
function memoryLog() {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger(
    'debug',
    {},
    new Writable({
      write: (chunk, _e, done) => {
        lines.push(JSON.parse(String(chunk)));
        done();
      },
    }),
  );
  return { log, lines };
}

/** A client whose requests are recorded; `failing` says whether the next one fails. */
function fakeClient() {
  const calls: { verb: string; target: unknown; body?: unknown }[] = [];
  const state = { failing: false, conflict: false };
  const answer = async (verb: string, target: unknown, body?: unknown) => {
    calls.push({ verb, target, body });
    if (state.conflict)
      throw new ConfigSyncError('CS_API_FAILED', 'create events failed with HTTP 409', {
        details: { status: 409 },
      });
    if (state.failing) throw Object.assign(new Error('no answer in 10 s'), { code: 'CS_API_UNREACHABLE' });
    return {} as never;
  };
  return {
    calls,
    state,
    client: {
      create: (target: unknown, body: unknown) => answer('create', target, body),
      patch: (target: unknown, body: unknown) => answer('patch', target, body),
      get: (target: unknown) => answer('get', target),
    },
  };
}

const POD = { name: 'web-1', namespace: 'shop', uid: 'u-1' };

describe('the Event outbox', () => {
  it('names an Event when it happens, keeps one that failed and sends it again after the backoff, with its time', async () => {
    const { client, calls, state } = fakeClient();
    const { log, lines } = memoryLog();
    let now = Date.parse('2026-12-07T10:00:00Z');
    const outbox = new EventOutbox({ client, pod: POD, log, clock: () => now });
    state.failing = true;
    await outbox.emit('Healed', 'restarted Deployment web', 'Normal');
    expect(outbox.waiting()).toBe(1);
    const retryAt = outbox.deadline() as number;
    // 5 s, spread over 80 to 120 %.
    expect(retryAt - now).toBeGreaterThanOrEqual(4_000);
    expect(retryAt - now).toBeLessThanOrEqual(6_000);
    expect(lines.at(-1)).toMatchObject({ msg: 'could not emit Event: sending it again', event: 'Healed' });

    // Before its backoff is over: not sent again.
    state.failing = false;
    now += 1_000;
    await outbox.sendUnsent(now);
    expect(calls).toHaveLength(1);
    now = retryAt;
    await outbox.sendUnsent(now);
    expect(calls).toHaveLength(2);
    expect(outbox.waiting()).toBe(0);
    expect(outbox.deadline()).toBeUndefined();
    // The same name both times, and the time it happened, not when it was sent.
    const [first, again] = calls.map((c) => c.body as { metadata: { name: string }; firstTimestamp: string });
    expect(again?.metadata.name).toBe(first?.metadata.name);
    expect(again?.firstTimestamp).toBe('2026-12-07T10:00:00.000Z');
  });

  it('counts a 409 on a try again as sent: an earlier try made it', async () => {
    const { client, state } = fakeClient();
    let now = 0;
    const outbox = new EventOutbox({ client, pod: POD, log: memoryLog().log, clock: () => now });
    state.failing = true;
    await outbox.emit('Drifted', 'app:/etc/app drifted', 'Warning');
    state.failing = false;
    state.conflict = true;
    now = 10_000;
    await outbox.sendUnsent(now);
    expect(outbox.waiting()).toBe(0);
  });

  it(`keeps at most ${MAX_UNSENT} Events, dropping the oldest, and sends nothing for a process with no Pod`, async () => {
    const { client, state } = fakeClient();
    const outbox = new EventOutbox({ client, pod: POD, log: memoryLog().log, clock: () => 0 });
    state.failing = true;
    for (let i = 0; i < MAX_UNSENT + 5; i += 1) await outbox.emit('Drifted', `drift ${i}`, 'Warning');
    expect(outbox.waiting()).toBe(MAX_UNSENT);

    const none = fakeClient();
    const podless = new EventOutbox({
      client: none.client,
      pod: undefined,
      log: memoryLog().log,
      clock: () => 0,
    });
    await podless.emit('Healed', 'x', 'Normal');
    expect(none.calls).toHaveLength(0);
  });
});

const verdict = (
  state: Verdict['state'],
  reason: Verdict['reason'] = state as Verdict['reason'],
): Verdict => ({
  target: 'app:/etc/app',
  state,
  reason,
  message: state,
  mismatches: [],
});

describe('the status writer', () => {
  it('writes on a transition, and after a failed write asks to run again after the backoff', async () => {
    const { client, calls, state } = fakeClient();
    let now = 1_000_000;
    const writer = new StatusWriter({
      client,
      namespace: 'shop',
      pod: 'web-1',
      heartbeatMs: 900_000,
      log: memoryLog().log,
      clock: () => now,
    });
    state.failing = true;
    await writer.write([verdict('InSync')], 'ConfigMap/web@1', now);
    expect(writer.last()).toBeUndefined();
    const retryAt = writer.deadline() as number;
    expect(retryAt - now).toBeGreaterThanOrEqual(4_000);
    state.failing = false;
    now = retryAt;
    await writer.write([verdict('InSync')], 'ConfigMap/web@1', now);
    expect(writer.deadline()).toBeUndefined();
    expect(writer.last()).toMatchObject({ inSync: true, reason: 'InSync', matched: 'ConfigMap/web@1' });
    // Nothing new: no write.
    await writer.write([verdict('InSync')], 'ConfigMap/web@1', now + 1_000);
    expect(calls).toHaveLength(2);
  });

  it('names the versions a match was made on, present sources only', () => {
    const lookup = (ref: { kind: string; name: string }): SourceState | undefined =>
      ref.name === 'web'
        ? {
            state: 'present',
            snapshot: {
              ref: { kind: 'ConfigMap', name: 'web' },
              uid: 'u',
              resourceVersion: '42',
              immutable: false,
              changedAt: undefined,
              keys: new Map(),
            },
          }
        : { state: 'absent', ref: { kind: 'Secret', name: ref.name } };
    expect(
      matchedVersions(
        [
          { kind: 'ConfigMap', name: 'web' },
          { kind: 'Secret', name: 'gone' },
        ],
        lookup as never,
      ),
    ).toBe('ConfigMap/web@42');
  });
});

describe('the container-starts tracker', () => {
  const subPath: Target = {
    type: 'volume',
    container: 'app',
    volume: 'config',
    mountPath: '/etc/app.yaml',
    subPath: 'app.yaml',
    sources: [{ ref: { kind: 'ConfigMap', name: 'web' }, optional: false, defaultMode: 0o644 }],
  };
  const pod = (startedAt?: string): V1Pod => ({
    metadata: { name: 'web-1' },
    status: startedAt
      ? {
          containerStatuses: [
            {
              name: 'app',
              image: 'x',
              imageID: '',
              ready: true,
              restartCount: 0,
              state: { running: { startedAt: new Date(startedAt) } },
            },
          ],
        }
      : {},
  });

  it('reads the Pod 1 s after the start, then 2 s after that, until the app container shows a start', async () => {
    let now = 0;
    const tracker = new ContainerStartsTracker({
      pod: pod(),
      targets: [subPath],
      agentStartedAt: 0,
      heartbeatMs: 900_000,
      clock: () => now,
    });
    expect(tracker.pending()).toBe(true);
    expect(tracker.deadline()).toBe(1_000);
    let reads = 0;
    const readPod = async () => {
      reads += 1;
      return reads < 2 ? pod() : pod('2026-12-07T10:00:00Z');
    };
    expect(await tracker.readWhenDue(500, readPod)).toBe(false);
    expect(reads).toBe(0);
    now = 1_000;
    expect(await tracker.readWhenDue(now, readPod)).toBe(false);
    expect(tracker.deadline()).toBe(3_000);
    now = 3_000;
    // The start appeared: it decides the subPath target again.
    expect(await tracker.readWhenDue(now, readPod)).toBe(true);
    expect(tracker.starts.byContainer.app).toBe(Date.parse('2026-12-07T10:00:00Z'));
    expect(tracker.pending()).toBe(false);
    expect(tracker.deadline()).toBeUndefined();
  });

  it('reads nothing for a Pod with whole-volume targets only', async () => {
    const tracker = new ContainerStartsTracker({
      pod: pod(),
      targets: [{ type: 'volume', container: 'app', volume: 'config', mountPath: '/etc/app', sources: [] }],
      agentStartedAt: 0,
      heartbeatMs: 900_000,
      clock: () => 10_000,
    });
    expect(tracker.pending()).toBe(false);
    expect(await tracker.readWhenDue(10_000, async () => pod('2026-12-07T10:00:00Z'))).toBe(false);
  });
});

describe('the heal actor', () => {
  const drifted = [verdict('Drifted', 'SubPathStale')];
  const rt = (client: ReturnType<typeof fakeClient>['client']) =>
    ({
      client,
      namespace: 'shop',
      pod: { metadata: { name: 'web-1', uid: 'u-1' } },
      targets: [],
      sources: [],
      config: { heal: { mode: 'restart', minRestartIntervalMs: 300_000 }, policy: {} },
    }) as unknown as Runtime;

  it('a read the plan needed that failed: one HealFailed Event per kind of failure, and a retry after the backoff', async () => {
    const { client, calls } = fakeClient();
    const { log, lines } = memoryLog();
    const now = 100_000;
    const events = new EventOutbox({ client, pod: POD, log, clock: () => now });
    const actor = new HealActor({
      rt: rt(client),
      lookup: () => undefined,
      events,
      metrics: { heals: { inc: () => {} } },
      log,
      clock: () => now,
      currentOwner: async (): Promise<OwnerState> => {
        throw Object.assign(new Error('get deployments web failed'), { code: 'CS_API_UNREACHABLE' });
      },
      readPod: async () => undefined,
      wake: () => {},
      signal: new AbortController().signal,
    });
    const first = await actor.act(drifted, now);
    expect(first.failed).toBe(true);
    expect((first.retryAt as number) - now).toBeGreaterThanOrEqual(4_000);
    const second = await actor.act(drifted, now);
    // The second failure in a row waits twice as long, and tells nothing new.
    expect((second.retryAt as number) - now).toBeGreaterThanOrEqual(8_000);
    const healFailed = calls.filter((c) => (c.body as { reason?: string })?.reason === 'HealFailed');
    expect(healFailed).toHaveLength(1);
    expect(lines.filter((l) => l.msg === 'the heal failed: trying again').map((l) => l.failures)).toEqual([
      1, 2,
    ]);
    // In sync again: the next failure starts the backoff over, and is news.
    actor.settled();
    const third = await actor.act(drifted, now);
    expect((third.retryAt as number) - now).toBeLessThanOrEqual(6_000);
    expect(calls.filter((c) => (c.body as { reason?: string })?.reason === 'HealFailed')).toHaveLength(2);
  });
  // What one replica of a drift spends: a sibling's restart made is found with the workload's
  // read alone; the Pod is read only before a restart, the ReplicaSet only for a rollout's dedupe.
  describe('reads only what its plan rests on', () => {
    const now = 100_000;
    const expected = configVersion(() => undefined, []);
    const workload = (extra: Partial<WorkloadState> = {}): OwnerState => ({
      type: 'workload',
      workload: {
        kind: 'Deployment',
        name: 'web',
        resourceVersion: '7',
        restartAnnotations: null,
        ...extra,
      },
    });
    function actorWith(owners: OwnerState[], pod: V1Pod = { metadata: { name: 'web-1', uid: 'u-1' } }) {
      const { client, calls } = fakeClient();
      const { log, lines } = memoryLog();
      const ownerReads: (OwnerReadOptions | undefined)[] = [];
      let podReads = 0;
      const actor = new HealActor({
        rt: rt(client),
        lookup: () => undefined,
        events: new EventOutbox({ client, pod: POD, log, clock: () => now }),
        metrics: { heals: { inc: () => {} } },
        log,
        clock: () => now,
        currentOwner: async (options) => {
          ownerReads.push(options);
          return owners[Math.min(ownerReads.length - 1, owners.length - 1)] as OwnerState;
        },
        readPod: async () => {
          podReads += 1;
          return pod;
        },
        wake: () => {},
        signal: new AbortController().signal,
      });
      return { actor, calls, lines, ownerReads, reads: () => podReads };
    }

    it("a sibling's restart for this config: no Pod read, no Event, and the outcome says so", async () => {
      const done = workload({
        restartAnnotations: {
          [ANNOTATION.configHash]: expected,
          [ANNOTATION.restartedAt]: new Date(now - 1_000).toISOString(),
        },
      });
      const { actor, calls, lines, ownerReads, reads } = actorWith([done]);
      const outcome = await actor.act(drifted, now);
      expect(outcome).toEqual({ siblingRestarted: true });
      expect(ownerReads).toEqual([undefined]);
      expect(reads()).toBe(0);
      expect(calls).toEqual([]);
      expect(lines.map((l) => l.msg)).toContain('a sibling already restarted the workload');
    });

    it('a restart: the Pod is read first, and a Pod being deleted restarts nothing', async () => {
      const deleting = { metadata: { name: 'web-1', uid: 'u-1', deletionTimestamp: new Date(now) } };
      const gone = actorWith([workload()], deleting);
      const outcome = await gone.actor.act(drifted, now);
      expect(gone.reads()).toBe(1);
      expect(gone.calls.filter((c) => c.verb === 'patch')).toEqual([]);
      expect(outcome.siblingRestarted).toBeUndefined();
      expect(gone.lines.map((l) => l.msg)).toContain('not restarting: PodTerminating');

      const live = actorWith([workload()]);
      expect(await live.actor.act(drifted, now)).toEqual({});
      expect(live.reads()).toBe(1);
      expect(live.calls.filter((c) => c.verb === 'patch')).toHaveLength(1);
    });

    it("a dedupe on the Pod's cached revision reads the ReplicaSet again first: a rollback renumbers it", async () => {
      const cached = workload({ podSuperseded: { podRevision: '1', revision: '3', cached: true } });
      // Read again, the Pod's ReplicaSet is the workload's current one (a rollback to it).
      const { actor, calls, ownerReads } = actorWith([cached, workload()]);
      await actor.act(drifted, now);
      expect(ownerReads).toEqual([undefined, { recheckRevision: true }]);
      expect(calls.filter((c) => c.verb === 'patch')).toHaveLength(1);

      // Read again and still superseded: deduped by the rollout, no restart.
      const superseded = workload({ podSuperseded: { podRevision: '1', revision: '3' } });
      const again = actorWith([cached, superseded]);
      const outcome = await again.actor.act(drifted, now);
      expect(again.ownerReads).toHaveLength(2);
      expect(again.calls.filter((c) => c.verb === 'patch')).toEqual([]);
      expect(outcome.siblingRestarted).toBeUndefined();
    });
  });
});
