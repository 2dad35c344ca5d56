import { ConfigSyncError } from '../errors.ts';

// Turns any thrown value into the lines a person reads on stderr:
//   error CS_USAGE_UNKNOWN_COMMAND: unknown command "frob"
//   hint: run "config-sync --help"; commands: version, help
// An error that is not ours is a bug: it is printed with its stack so it can be reported.
export function formatError(error: unknown): string {
  if (error instanceof ConfigSyncError) {
    const lines = [`error ${error.code}: ${error.message}`];
    if (error.hint) lines.push(`hint: ${error.hint}`);
    return `${lines.join('\n')}\n`;
  }
  const stack = error instanceof Error ? (error.stack ?? error.message) : String(error);
  return `error CS_INTERNAL: unexpected failure (a bug: please report it with this output)\n${stack}\n`;
}
