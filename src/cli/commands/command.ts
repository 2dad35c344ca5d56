import type { CliIO } from '../io.ts';

/**
 * A sub-command. `run` returns the exit code for a result (0 ok, 1 drift, see EXIT in
 * errors.ts) and throws a ConfigSyncError for what went wrong; main maps that to 2/3.
 */
export interface Command {
  readonly name: string;
  readonly summary: string;
  readonly usage: string;
  /** `env` is the process environment unless a test passes its own. */
  run(args: readonly string[], io: CliIO, env?: NodeJS.ProcessEnv): Promise<number>;
}
