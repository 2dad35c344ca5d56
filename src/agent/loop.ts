// The agent's loop, and nothing else: wait for the source cache's first sync, then reconcile;
// sleep until a wake-up (a watch event, a file event), the deadline the pass asked for (a grace
// window ending, a retry) or the resync interval, whichever comes first; repeat until stopped.
// What a pass does is the reconciler's business (agent.ts); events only wake the loop.

/** Wakes a sleeping loop; a wake while awake is remembered for the next sleep. */
export class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  wake(): void {
    this.pending = true;
    this.resolve?.();
  }

  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.pending && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, ms));
        const onAbort = () => done();
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        }
        this.resolve = done;
        signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    this.resolve = undefined;
    this.pending = false;
  }
}

/**
 * How long to sleep after a pass: until the earliest deadline it returned (10 ms past it, so the
 * next pass sees the deadline passed), never longer than the resync interval.
 */
export function sleepAfterPass(next: number | undefined, now: number, resyncMs: number): number {
  return next === undefined ? resyncMs : Math.min(resyncMs, next - now + 10);
}

export interface LoopInput {
  readonly wakeup: Wakeup;
  /** Resolves once the first pass can compare against the API (or gave up waiting). */
  readonly synced: () => Promise<void>;
  /** One pass; returns the earliest time it wants to run again, if any. */
  readonly reconcile: () => Promise<number | undefined>;
  readonly resyncMs: number;
  readonly clock: () => number;
  /** A pass that threw: logged, and the loop goes on. */
  readonly onError: (error: Error) => void;
  /** Told when the loop works (the first sync's wait, a pass) and when it sleeps (liveness.ts). */
  readonly liveness?: { busy(): void; idle(): void };
}

export async function runLoop(input: LoopInput, signal: AbortSignal): Promise<void> {
  input.liveness?.busy();
  await input.synced();
  while (!signal.aborted) {
    let next: number | undefined;
    input.liveness?.busy();
    try {
      next = await input.reconcile();
    } catch (error) {
      input.onError(error as Error);
    }
    input.liveness?.idle();
    await input.wakeup.sleep(sleepAfterPass(next, input.clock(), input.resyncMs), signal);
  }
}
