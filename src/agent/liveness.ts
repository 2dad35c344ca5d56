// Whether the agent's loop still turns, for /healthz: a pass (or the wait for the first sync)
// that has run for longer than a bound is stuck, and the container is better restarted.
//
// Why a bound on the pass and not "a pass finished lately": between passes the loop sleeps for
// as long as --resync (60 s by default, up to 24 h), so "a pass finished within 3 x --resync +
// 30 s" let a loop frozen on one request answer 200 for 210 s by default and for days with a
// long --resync. A pass, though, only waits on requests that each end within --request-timeout
// (transport.ts), on OPA (the same timeout) and on the app's reload answer (3 tries of 5 s). In
// the worst pass that still makes progress about five of those come in a row: the confirming
// read, the owner's reads, the restart or its HealFailed Event, the status write, an Event sent
// again. So a pass still running after 6 x --request-timeout + 30 s (90 s by default) is not
// waiting on the API: it is stuck.

/** How long one pass may run before the loop counts as stuck. */
export function stuckAfterMs(requestTimeoutMs: number): number {
  return 6 * requestTimeoutMs + 30_000;
}

export class Liveness {
  private busySince: number | undefined;
  private readonly stuckMs: number;
  private readonly clock: () => number;

  constructor(stuckMs: number, clock: () => number) {
    this.stuckMs = stuckMs;
    this.clock = clock;
  }

  /** A pass (or the wait for the first sync) begins. */
  busy(): void {
    this.busySince = this.clock();
  }

  /** It ended; the loop sleeps until its next wake-up, which is not being stuck. */
  idle(): void {
    this.busySince = undefined;
  }

  /** False once the current pass has run for longer than the bound. */
  live(): boolean {
    return this.busySince === undefined || this.clock() - this.busySince < this.stuckMs;
  }

  /** How long the current pass has run, in whole seconds; undefined between passes. */
  busyForSeconds(): number | undefined {
    return this.busySince === undefined ? undefined : Math.floor((this.clock() - this.busySince) / 1000);
  }
}
