/**
 * Waits for samples recorded by event handlers (an HTTP request arriving, a watch event) without
 * polling: each handler calls poke() after recording, and the wait checks then. Why: a wait that
 * polled every millisecond kept this process waking a thousand times a second on the same two
 * cores as the agent and the baseline it measures, in the very window it measures.
 */
export class Arrivals {
  private pending: (() => void) | undefined;
  poke(): void {
    this.pending?.();
  }
  async wait<T>(check: () => T | undefined, what: string, timeoutMs = 10_000): Promise<T> {
    const now = check();
    if (now !== undefined) return now;
    return new Promise<T>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.pending = undefined;
        reject(new Error(`timed out after ${timeoutMs} ms waiting for ${what}`));
      }, timeoutMs);
      this.pending = () => {
        const value = check();
        if (value === undefined) return;
        clearTimeout(timer);
        this.pending = undefined;
        resolve(value);
      };
    });
  }
}
