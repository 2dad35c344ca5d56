// Polls a condition until it holds or a deadline passes. Tests and the harness wait this way,
// never with a fixed sleep: a fixed sleep is either too short on a loaded CI machine or wasted time.

export interface WaitOptions {
  /** What is being waited for, for the timeout message. */
  readonly what: string;
  readonly timeoutMs?: number;
  readonly intervalMs?: number;
  /** Checked before every attempt; a message here ends the wait at once (e.g. "etcd exited"). */
  readonly abortIf?: () => string | undefined;
  /**
   * On a timeout, what the message adds about the state things were left in (e.g. the agent's
   * last log lines), so that a failure in CI says why without a second run.
   */
  readonly onTimeout?: () => Promise<string> | string;
}

export async function waitFor<T>(
  attempt: () => Promise<T | undefined> | T | undefined,
  options: WaitOptions,
): Promise<T> {
  const { what, timeoutMs = 30_000, intervalMs = 100, abortIf, onTimeout } = options;
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  for (;;) {
    const abort = abortIf?.();
    if (abort) throw new Error(`gave up waiting for ${what}: ${abort}`);
    try {
      const value = await attempt();
      if (value !== undefined && value !== false) return value;
    } catch (error) {
      lastError = error;
    }
    if (Date.now() >= deadline) {
      const last = lastError instanceof Error ? ` (last error: ${lastError.message})` : '';
      throw new Error(
        `timed out after ${timeoutMs} ms waiting for ${what}${last}${await stateAtTimeout(onTimeout)}`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** What onTimeout says, on lines of its own; a failure of its own is said, not thrown. */
async function stateAtTimeout(onTimeout: WaitOptions['onTimeout']): Promise<string> {
  if (!onTimeout) return '';
  try {
    return `\n${await onTimeout()}`;
  } catch (error) {
    return `\n(and the state at the timeout could not be read: ${(error as Error).message})`;
  }
}

/**
 * Reads a count until it has stayed the same for `quietMs`, and returns it: for "and nothing
 * more happens after", which no single poll can tell.
 */
export async function waitForSteady(
  read: () => Promise<number>,
  options: WaitOptions & { readonly quietMs: number },
): Promise<number> {
  const { quietMs, intervalMs = 250 } = options;
  let last = await read();
  let since = Date.now();
  return waitFor(
    async () => {
      const now = await read();
      if (now !== last) {
        last = now;
        since = Date.now();
        return undefined;
      }
      return Date.now() - since >= quietMs ? now : undefined;
    },
    { ...options, intervalMs },
  );
}
