// The error config-sync reports to a person (STYLE.md, after fastify/undici).
//
// Every error carries a stable `code` (CS_<AREA>_<WHAT>, each listed once in error-codes.ts with
// its domain, what triggers it and its fix; docs/errors.md) that docs and scripts can match on, a
// `hint` that says what to do about it, the facts in fields rather than baked into the message,
// and the underlying `cause`. The CLI prints code, message and hint and turns the error's
// `domain` into the exit code, so `check` and `doctor` keep the contract:
//   usage / config -> 2, api / permission -> 3.
// Error messages and details never carry a ConfigMap or Secret value: keys, paths, sizes and
// hash prefixes only.

import { ERROR_CODES, type ErrorCode, type ErrorDomain } from './error-codes.ts';

export type { ErrorCode, ErrorDomain };

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
  readonly code: ErrorCode;
  /** From the code's entry in error-codes.ts: one code, one exit code. */
  readonly domain: ErrorDomain;
  readonly hint: string | undefined;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, options: ConfigSyncErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.domain = ERROR_CODES[code].domain;
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

/** The exit code each domain sets: usage and config 2, api and permission 3, internal 4. */
export const DOMAIN_EXIT: Readonly<Record<ErrorDomain, number>> = {
  usage: EXIT.usage,
  config: EXIT.usage,
  api: EXIT.api,
  permission: EXIT.api,
  internal: EXIT.internal,
};

export function exitCodeFor(error: unknown): number {
  return error instanceof ConfigSyncError ? DOMAIN_EXIT[error.domain] : EXIT.internal;
}

// --- usage ---------------------------------------------------------------------------------------

/** An unknown sub-command was given on the command line. */
export function unknownCommand(command: string, known: readonly string[]): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_UNKNOWN_COMMAND', `unknown command "${command}"`, {
    hint: `run "config-sync --help"; commands: ${known.join(', ')}`,
    details: { command },
  });
}

/** A flag the command does not know, or a flag with a missing or malformed value. */
export function badFlag(command: string, message: string, cause?: unknown): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_BAD_FLAG', `${command}: ${message}`, {
    hint: `run "config-sync ${command} --help" for the flags it takes`,
    details: { command },
    cause,
  });
}

/** `-o`/`--output` named a format the command cannot print. */
export function badOutputFormat(value: string, allowed: readonly string[]): ConfigSyncError {
  return new ConfigSyncError('CS_USAGE_BAD_OUTPUT', `unsupported output format "${value}"`, {
    hint: `use -o ${allowed.join(' or -o ')}`,
    details: { value },
  });
}
