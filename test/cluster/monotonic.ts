// Times stamped by another process with CLOCK_MONOTONIC (process.hrtime in Node, clock_gettime in
// Go), on this process's performance.now() scale: the same clock from another origin.

/**
 * performance.now() minus process.hrtime, in ms. Taken once (both clocks are the same one, so
 * the offset never changes), from the reading whose two performance.now() calls around the
 * hrtime are closest, after a first call of each: the first call of performance.now() in a
 * process takes about 2 ms more, and an offset taken across it is off by that much.
 */
const offsetMs: number = (() => {
  performance.now();
  process.hrtime.bigint();
  let best = { span: Number.POSITIVE_INFINITY, offset: 0 };
  for (let i = 0; i < 20; i += 1) {
    const before = performance.now();
    const hr = Number(process.hrtime.bigint()) / 1e6;
    const after = performance.now();
    if (after - before < best.span) best = { span: after - before, offset: (before + after) / 2 - hr };
  }
  return best.offset;
})();

/** A CLOCK_MONOTONIC reading in ns (as a decimal string or bigint), as performance.now() would read it. */
export function fromMonotonicNs(ns: string | bigint): number {
  return Number(BigInt(ns)) / 1e6 + offsetMs;
}
