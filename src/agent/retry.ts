// How soon the agent tries again what it had to do and could not: a heal (a restart patch the API
// refused or did not answer, a read the plan needed, a policy server that could not decide) or
// the write of its Pod's status. Waiting for the next --resync instead (60 s by default, up to a
// day) left the drift in place, or the InSync condition wrong (a readiness gate on it), that long
// after one lost request, and in reload mode lost the fallback restart for good.
//
// The delay doubles from RETRY_FIRST_MS with each failure in a row, up to RETRY_MAX_MS,
// and is spread over 80 % to 120 % of that: the replicas of a workload fail together (an API
// server restarting, a policy server down) and would otherwise all come back in the same second.
// retryDelay is pure: `random` is a number in [0, 1) the caller draws. Backoff counts the
// failures in a row of one kind of work for the agent, which keeps one per kind.

export const RETRY_FIRST_MS = 5_000;
export const RETRY_MAX_MS = 300_000;

/** The wait before the next try after `failures` (1 or more) failures in a row. */
export function retryDelay(failures: number, random: number): number {
  const doubled = RETRY_FIRST_MS * 2 ** Math.max(0, Math.min(failures - 1, 30));
  const spread = 0.8 + 0.4 * Math.min(Math.max(random, 0), 1);
  return Math.round(Math.min(doubled, RETRY_MAX_MS) * spread);
}

/** The failures in a row of one kind of work, and the wait before its next try. */
export class Backoff {
  private failures = 0;

  /** One more failure: how many in a row now, and the wait before the next try (retryDelay). */
  failed(random: number = Math.random()): {
    readonly failures: number;
    readonly delayMs: number;
    readonly retryInSeconds: number;
  } {
    this.failures += 1;
    const delayMs = retryDelay(this.failures, random);
    return { failures: this.failures, delayMs, retryInSeconds: Math.round(delayMs / 1000) };
  }

  /** It went through: the next failure waits the shortest time again. */
  succeeded(): void {
    this.failures = 0;
  }
}
