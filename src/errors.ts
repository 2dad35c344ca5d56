// One registry of the errors config-sync reports to a person (STYLE.md, after fastify/undici).
//
// Every error carries a stable `code` (CS_<AREA>_<WHAT>) that docs and scripts can match on, a
// `hint` that says what to do about it, the facts in fields rather than baked into the message,
// and the underlying `cause`. The CLI prints code, message and hint and turns the error's
// `domain` into the exit code, so `check` and `doctor` keep the contract:
//   usage / config -> 2, api / permission -> 3.
// Error messages and details never carry a ConfigMap or Secret value: keys, paths, sizes and
// hash prefixes only.

export type ErrorDomain = 'usage' | 'config' | 'api' | 'permission' | 'internal';

export interface ErrorDetails {
  readonly [field: string]: string | number | boolean | undefined;
}

export interface ConfigSyncErrorOptions {
  readonly hint?: string;
  readonly details?: ErrorDetails;
  readonly cause?: unknown;
}

export class ConfigSyncError extends Error {
  override readonly name: string = 'ConfigSyncError';
  readonly code: string;
  readonly domain: ErrorDomain;
  readonly hint: string | undefined;
  readonly details: ErrorDetails;

  constructor(code: string, domain: ErrorDomain, message: string, options: ConfigSyncErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.domain = domain;
    this.hint = options.hint;
    this.details = options.details ?? {};
  }
}

/** Exit codes shared by every command (README.md, "Commands"). */
export const EXIT = {
  ok: 0,
  drift: 1,
  usage: 2,
  api: 3,
  internal: 4,
} as const;

export function exitCodeFor(error: unknown): number {
  if (!(error instanceof ConfigSyncError)) return EXIT.internal;
  switch (error.domain) {
    case 'usage':
    case 'config':
      return EXIT.usage;
    case 'api':
    case 'permission':
      return EXIT.api;
    case 'internal':
      return EXIT.internal;
  }
}

// --- usage ---------------------------------------------------------------------------------------

/** An unknown sub-command was given on the command line. */
export function unknownCommand(command: string, known: readonly string[]): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_UNKNOWN_COMMAND', 'usage', `unknown command "${command}"`, {
    hint: `run "config-sync --help"; commands: ${known.join(', ')}`,
    details: { command },
  });
}

/** A flag the command does not know, or a flag with a missing or malformed value. */
export function badFlag(command: string, message: string, cause?: unknown): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_BAD_FLAG', 'usage', `${command}: ${message}`, {
    hint: `run "config-sync ${command} --help" for the flags it takes`,
    details: { command },
    cause,
  });
}

/** `-o`/`--output` named a format the command cannot print. */
export function badOutputFormat(value: string, allowed: readonly string[]): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_BAD_OUTPUT', 'usage', `unsupported output format "${value}"`, {
    hint: `use -o ${allowed.join(' or -o ')}`,
    details: { value },
  });
}
