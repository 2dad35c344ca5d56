// The outer loop both watches run (api-watch.ts for one object, collection-watch.ts for a
// namespace's collection): a session lists and watches until the server ends the watch cleanly
// or something fails.
//   1. A clean end (the server's timeoutSeconds) is told as `closed` and a new session starts at
//      once, from the version the session left.
//   2. A failure is told through `onFailure` (the watch marks itself stale and says why) and the
//      session is retried after a p-retry backoff: 0.5 s doubling to 8 s, randomized so that many
//      agents cut off together do not come back together.
//   3. Only the abort of `signal` ends the loop; it ends quietly.

import pRetry from 'p-retry';

/** The longest wait between two failed sessions. */
export const MAX_BACKOFF_MS = 8_000;

export async function watchForever(
  session: (signal: AbortSignal) => Promise<void>,
  signal: AbortSignal,
  hooks: { onClosed(): void; onFailure(error: Error): void },
): Promise<void> {
  while (!signal.aborted) {
    try {
      await pRetry(() => session(signal), {
        retries: Number.POSITIVE_INFINITY,
        minTimeout: 500,
        maxTimeout: MAX_BACKOFF_MS,
        randomize: true,
        signal,
        onFailedAttempt: ({ error }) => {
          // (2)
          if (signal.aborted) return;
          hooks.onFailure(error as Error);
        },
      });
      // (1)
      if (!signal.aborted) hooks.onClosed();
    } catch (error) {
      // (3)
      if (signal.aborted) return;
      throw error;
    }
  }
}
