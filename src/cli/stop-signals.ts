// How a long-running command (agent, node) stops: SIGTERM, SIGINT or SIGHUP (a terminal that
// closed) aborts `controller`, which ends every request in flight and every watch; the command
// then logs "stopped" and exits 0. A backstop ends the process 4.5 s after the signal whatever
// is still running, so kubelet's grace period is never what ends it.
import type { Logger } from 'pino';
import { EXIT } from '../errors.ts';

/** After a stop signal the process is gone within 5 s, whatever the API server does. */
const STOP_DEADLINE_MS = 4_500;

export interface StopSignals {
  /** The command ended cleanly: the backstop is not needed. */
  stopped(): void;
}

/** `log()` is the command's logger once it has one. */
export function stopOnSignals(controller: AbortController, log: () => Logger | undefined): StopSignals {
  let backstop: NodeJS.Timeout | undefined;
  const stop = (signal: string) => {
    if (controller.signal.aborted) return;
    log()?.info({ signal }, 'stopping');
    controller.abort();
    // Everything in flight is aborted by now, so this fires only if something ignored the abort.
    // It is not unref'd: a promise that never settles (a request that waited for ever did, once)
    // holds nothing else in the event loop, and Node would then end the process with 13 (an
    // unsettled top-level await), not 0.
    backstop = setTimeout(() => {
      log()?.error({ signal }, 'still running 4.5 s after the stop signal: exiting');
      process.exit(EXIT.ok);
    }, STOP_DEADLINE_MS);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  // Node's default for SIGHUP kills the process mid-write, with no "stopped" line.
  process.once('SIGHUP', () => stop('SIGHUP'));
  return { stopped: () => clearTimeout(backstop) };
}
