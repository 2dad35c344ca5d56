// How soon a failed heal or status write is tried again (src/agent/retry.ts).
import { describe, expect, it } from 'vitest';
import { Backoff, RETRY_FIRST_MS, RETRY_MAX_MS, retryDelay } from '../../src/agent/retry.ts';

describe('retryDelay', () => {
  it('doubles from 5 s with each failure in a row, up to 5 min', () => {
    // random 0.5 is the middle of the spread: the delay itself.
    expect([1, 2, 3, 4, 5, 6, 7, 8, 50].map((n) => retryDelay(n, 0.5))).toEqual([
      5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000,
    ]);
    expect(RETRY_FIRST_MS).toBe(5_000);
    expect(RETRY_MAX_MS).toBe(300_000);
  });

  it('spreads each delay over 80 % to 120 %, so replicas that failed together do not retry together', () => {
    expect(retryDelay(1, 0)).toBe(4_000);
    expect(retryDelay(1, 0.999_999)).toBe(6_000);
    expect(retryDelay(7, 0)).toBe(240_000);
    expect(retryDelay(7, 0.999_999)).toBe(360_000);
    const delays = new Set(Array.from({ length: 20 }, (_, i) => retryDelay(2, i / 20)));
    expect(delays.size).toBe(20);
  });

  it('treats a count below 1 as the first failure and a random outside [0, 1) as its bound', () => {
    expect(retryDelay(0, 0.5)).toBe(5_000);
    expect(retryDelay(1, -3)).toBe(4_000);
    expect(retryDelay(1, 7)).toBe(6_000);
  });
});

describe('Backoff', () => {
  it('counts failures in a row, waits as retryDelay says, and starts over after a success', () => {
    const b = new Backoff();
    expect(b.failed(0.5)).toEqual({ failures: 1, delayMs: 5_000, retryInSeconds: 5 });
    expect(b.failed(0.5)).toEqual({ failures: 2, delayMs: 10_000, retryInSeconds: 10 });
    expect(b.failed(0)).toEqual({ failures: 3, delayMs: 16_000, retryInSeconds: 16 });
    b.succeeded();
    expect(b.failed(0.5)).toEqual({ failures: 1, delayMs: 5_000, retryInSeconds: 5 });
  });
});
