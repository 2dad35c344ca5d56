// The spread of sibling replicas' drift decisions (heal/spread.ts): an offset of each Pod's own,
// the same at every drift, spread evenly across the window.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { RESTART_SPREAD_MS, restartSpreadMs } from '../../src/heal/spread.ts';

describe('the restart spread', () => {
  it('is the same for a Pod every time, and 0 without a Pod', () => {
    const uid = randomUUID();
    expect(restartSpreadMs(uid)).toBe(restartSpreadMs(uid));
    expect(restartSpreadMs(undefined)).toBe(0);
  });

  it("spreads a thousand Pods' offsets across the whole window, none outside it", () => {
    const offsets = Array.from({ length: 1000 }, () => restartSpreadMs(randomUUID()));
    expect(offsets.every((o) => Number.isInteger(o) && o >= 0 && o < RESTART_SPREAD_MS)).toBe(true);
    // Each tenth of the window holds about a tenth of them (binomial: 100 +- 9.5).
    const tenths = Array.from({ length: 10 }, (_, i) =>
      offsets.filter((o) => Math.floor((o / RESTART_SPREAD_MS) * 10) === i),
    );
    for (const t of tenths) expect(t.length).toBeGreaterThan(55);
  });
});
