// The agent's small parts around its reconciler: the loop's wake-up and sleep, and the env
// and subPath start baselines it records on its Pod.
import { describe, expect, it } from 'vitest';
import { Liveness, stuckAfterMs } from '../../src/agent/liveness.ts';
import { runLoop, sleepAfterPass, Wakeup } from '../../src/agent/loop.ts';
import {
  baselinesToRecord,
  heldBaseline,
  readStartBaselines,
  startsReadDelay,
  writeStartBaselines,
} from '../../src/agent/start-baselines.ts';

describe('the loop', () => {
  it('sleeps until 10 ms past the earliest deadline, never longer than the resync interval', () => {
    expect(sleepAfterPass(undefined, 1_000, 60_000)).toBe(60_000);
    expect(sleepAfterPass(3_000, 1_000, 60_000)).toBe(2_010);
    expect(sleepAfterPass(500_000, 1_000, 60_000)).toBe(60_000);
  });

  it('a wake while awake is remembered: the next sleep returns at once', async () => {
    const wakeup = new Wakeup();
    wakeup.wake();
    const t0 = performance.now();
    await wakeup.sleep(10_000, new AbortController().signal);
    expect(performance.now() - t0).toBeLessThan(1_000);
  });

  it('a wake ends a sleep; only one is remembered', async () => {
    const wakeup = new Wakeup();
    const slept = wakeup.sleep(10_000, new AbortController().signal);
    wakeup.wake();
    await slept;
    const t0 = performance.now();
    await wakeup.sleep(50, new AbortController().signal);
    expect(performance.now() - t0).toBeGreaterThanOrEqual(40);
  });

  it('waits for the first sync, reconciles, goes on after a pass that threw, stops on abort', async () => {
    const stop = new AbortController();
    const wakeup = new Wakeup();
    const calls: string[] = [];
    let passes = 0;
    await runLoop(
      {
        wakeup,
        synced: async () => {
          calls.push('synced');
        },
        reconcile: async () => {
          passes += 1;
          calls.push(`pass ${passes}`);
          wakeup.wake();
          if (passes === 1) throw new Error('boom');
          if (passes === 3) stop.abort();
          return undefined;
        },
        resyncMs: 60_000,
        clock: Date.now,
        onError: (error) => calls.push(`error ${error.message}`),
      },
      stop.signal,
    );
    expect(calls).toEqual(['synced', 'pass 1', 'error boom', 'pass 2', 'pass 3']);
  });
});

describe('liveness', () => {
  it('fails once one pass has run past its bound, whatever --resync is; sleeping is never stuck', () => {
    let now = 0;
    const liveness = new Liveness(stuckAfterMs(10_000), () => now);
    expect(stuckAfterMs(10_000)).toBe(90_000);
    expect(liveness.live()).toBe(true);
    liveness.busy();
    now = 89_999;
    expect(liveness.live()).toBe(true);
    now = 90_000;
    expect(liveness.live()).toBe(false);
    expect(liveness.busyForSeconds()).toBe(90);
    liveness.idle();
    // Asleep for a day (a long --resync) is not stuck.
    now += 86_400_000;
    expect(liveness.live()).toBe(true);
    expect(liveness.busyForSeconds()).toBeUndefined();
  });

  it('is told by the loop when a pass begins and ends, and when the first sync is awaited', async () => {
    const stop = new AbortController();
    const told: string[] = [];
    let passes = 0;
    await runLoop(
      {
        wakeup: new Wakeup(),
        synced: async () => {
          told.push('synced');
        },
        reconcile: async () => {
          passes += 1;
          told.push('pass');
          if (passes === 2) stop.abort();
          return Date.now();
        },
        resyncMs: 60_000,
        clock: Date.now,
        onError: () => {},
        liveness: { busy: () => told.push('busy'), idle: () => told.push('idle') },
      },
      stop.signal,
    );
    expect(told).toEqual(['busy', 'synced', 'busy', 'pass', 'idle', 'busy', 'pass', 'idle']);
  });
});

describe('start baselines', () => {
  const T = Date.parse('2026-12-06T07:00:00Z');

  it('records a target with none yet, and a new start of its container; never an untied one over a tied one', () => {
    expect(
      baselinesToRecord({ 'app:env': { fp: 'f1' }, 'app:env2': { fp: 'f2' } }, { 'app:env': { fp: 'f0' } }),
    ).toEqual({ 'app:env2': { fp: 'f2' } });
    // The app's start became known: the untied baseline is recorded again, tied to it.
    expect(baselinesToRecord({ 'app:env': { fp: 'f0', startedAt: T } }, { 'app:env': { fp: 'f0' } })).toEqual(
      {
        'app:env': { fp: 'f0', startedAt: T },
      },
    );
    // The app container started again: what it got then replaces what the old start held.
    expect(
      baselinesToRecord(
        { 'app:/etc/a': { fp: 'f1', startedAt: T + 1 } },
        { 'app:/etc/a': { fp: 'f0', startedAt: T } },
      ),
    ).toEqual({ 'app:/etc/a': { fp: 'f1', startedAt: T + 1 } });
    expect(
      baselinesToRecord(
        { 'app:/etc/a': { fp: 'f1', startedAt: T } },
        { 'app:/etc/a': { fp: 'f0', startedAt: T } },
      ),
    ).toEqual({});
    expect(baselinesToRecord({ 'app:env': { fp: 'f1' } }, { 'app:env': { fp: 'f0', startedAt: T } })).toEqual(
      {},
    );
  });

  it('the Pod is read for the app’s start 1, 2, 4 ... s apart, at most 30 s, then at each heartbeat', () => {
    const delays = Array.from({ length: 12 }, (_, i) => startsReadDelay(i + 1, 900_000));
    expect(delays).toEqual([
      2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000, 30_000, 30_000, 900_000, 900_000, 900_000,
    ]);
    // The first read 1 s after the start, then the nine after it: about three minutes in all.
    expect(1000 + delays.slice(0, 9).reduce((a, b) => a + b, 0)).toBe(181_000);
  });

  it('a baseline says what the container holds only for the start it was recorded for', () => {
    expect(heldBaseline({ fp: 'f0', startedAt: T }, T)).toBe('f0');
    expect(heldBaseline({ fp: 'f0', startedAt: T }, T + 1000)).toBeUndefined();
    expect(heldBaseline({ fp: 'f0', startedAt: T }, undefined)).toBeUndefined();
    expect(heldBaseline({ fp: 'f0' }, T)).toBeUndefined();
    expect(heldBaseline(undefined, T)).toBeUndefined();
  });

  it('reads back what it wrote under the same key, and takes baselines again under another or from garbage', () => {
    const baselines = { 'app:env': { fp: 'f1' }, 'app:/etc/a': { fp: 'f2', startedAt: T } };
    const written = writeStartBaselines(baselines, 'kid-1');
    // The start is written as kubelet reports it, readable by an operator.
    expect(JSON.parse(written)).toEqual({
      kid: 'kid-1',
      baselines: {
        'app:env': { fp: 'f1' },
        'app:/etc/a': { fp: 'f2', startedAt: '2026-12-06T07:00:00.000Z' },
      },
    });
    expect(readStartBaselines(written, 'kid-1')).toEqual({ baselines });
    expect(readStartBaselines(written, 'kid-2').baselines).toEqual({});
    expect(readStartBaselines(written, 'kid-2').note).toContain('another fingerprint key');
    expect(readStartBaselines('not json', 'kid-1').note).toContain('not JSON');
    expect(readStartBaselines(undefined, 'kid-1')).toEqual({ baselines: {} });
    // An entry of another shape is left out (taken again), the others kept.
    const odd = JSON.stringify({
      kid: 'kid-1',
      baselines: { a: 'f1', b: { fp: 'f2', startedAt: 'never' }, c: { fp: 'f3' } },
    });
    expect(readStartBaselines(odd, 'kid-1')).toEqual({ baselines: { c: { fp: 'f3' } } });
  });
});
