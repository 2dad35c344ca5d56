// The agent's logger: pino JSON lines on stdout, one per decision with its reason. Nothing here
// redacts, because nothing logged ever carries a value: verdicts hold paths and hash prefixes.
import { type DestinationStream, type Logger, pino } from 'pino';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

export function createLogger(
  level: LogLevel,
  base: Record<string, string>,
  destination: DestinationStream,
): Logger {
  return pino(
    {
      level,
      base: { component: 'config-sync', ...base },
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
