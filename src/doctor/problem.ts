// One thing doctor found wrong, as it reports it: the error's code, domain (the exit code) and
// hint; any other error is an internal one.
import { ConfigSyncError } from '../errors.ts';

export interface Problem {
  readonly code: string;
  readonly domain: ConfigSyncError['domain'];
  readonly message: string;
  readonly hint?: string;
}

export function problemOf(error: unknown): Problem {
  if (error instanceof ConfigSyncError) {
    return {
      code: error.code,
      domain: error.domain,
      message: error.message,
      ...(error.hint ? { hint: error.hint } : {}),
    };
  }
  return { code: 'CS_INTERNAL', domain: 'internal', message: (error as Error)?.message ?? String(error) };
}
