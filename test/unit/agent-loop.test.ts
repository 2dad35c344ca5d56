// The agent's small parts around its reconciler: the loop's wake-up and sleep, and the env
// baselines it records on its Pod.
import { describe, expect, it } from 'vitest';
import { baselinesToRecord, readEnvBaselines, writeEnvBaselines } from '../../src/agent/env-baselines.ts';
import { runLoop, sleepAfterPass, Wakeup } from '../../src/agent/loop.ts';

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

describe('env baselines', () => {
  it('records only the targets that have none yet', () => {
    expect(baselinesToRecord({ 'app:env': 'f1', 'app:env2': 'f2' }, { 'app:env': 'f0' })).toEqual({
      'app:env2': 'f2',
    });
    expect(baselinesToRecord({ 'app:env': 'f1' }, { 'app:env': 'f0' })).toEqual({});
  });

  it('reads back what it wrote under the same key, and re-baselines under another or from garbage', () => {
    const written = writeEnvBaselines({ 'app:env': 'f1' }, 'kid-1');
    expect(readEnvBaselines(written, 'kid-1')).toEqual({ baselines: { 'app:env': 'f1' } });
    expect(readEnvBaselines(written, 'kid-2').baselines).toEqual({});
    expect(readEnvBaselines(written, 'kid-2').note).toContain('another fingerprint key');
    expect(readEnvBaselines('not json', 'kid-1').note).toContain('not JSON');
    expect(readEnvBaselines(undefined, 'kid-1')).toEqual({ baselines: {} });
  });
});
