// Durations as the settings take them (`90s`, `1m30s`, `500ms`, a bare number of seconds), each
// checked against the range its setting allows; an error names the value where the user gave it.
import { ConfigSyncError } from '../errors.ts';
import type { Sourced } from '../kube/scope.ts';
import type { Settings } from './settings.ts';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };
const SECOND = 1000;
const HOUR = 3_600_000;

/**
 * The range each duration setting may take, in ms. The upper bounds stay well below Node's
 * largest timer (2^31-1 ms, about 24.8 days): past it setTimeout fires at once, which turned
 * `--resync 1000h` into a busy loop. The lower bounds keep the agent from hammering the API
 * (`--heartbeat 0` sent 94 status PATCHes a second) or the disk (`--poll 0`).
 */
export const DURATION_RANGES: Readonly<Record<string, { readonly min: number; readonly max: number }>> = {
  grace: { min: 0, max: 24 * HOUR },
  debounce: { min: 0, max: 24 * HOUR },
  'reload-settle': { min: 0, max: HOUR },
  'min-restart-interval': { min: 0, max: 24 * HOUR },
  'request-timeout': { min: SECOND, max: 5 * 60 * SECOND },
  resync: { min: SECOND, max: 24 * HOUR },
  poll: { min: 100, max: HOUR },
  heartbeat: { min: 10 * SECOND, max: 24 * HOUR },
};

/** `90s`, `1m30s`, `500ms`, `2h` -> milliseconds; a bare number is seconds; undefined if neither. */
export function durationMs(raw: string): number | undefined {
  if (/^\d+(\.\d+)?$/.test(raw)) return Number(raw) * 1000;
  const parts = [...raw.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== raw) return undefined;
  return parts.reduce((ms, p) => ms + Number(p[1]) * (UNITS[p[2] as string] as number), 0);
}

/** A duration in the short form the flags take: 90s, 5m, 24h, 500ms. */
export function formatDuration(ms: number): string {
  if (ms % HOUR === 0 && ms > 0) return `${ms / HOUR}h`;
  if (ms % 60_000 === 0 && ms > 0) return `${ms / 60_000}m`;
  if (ms % SECOND === 0) return `${ms / SECOND}s`;
  return `${ms}ms`;
}

/** How a setting's value was given, as the user wrote it: `--grace 5s`, `CONFIG_SYNC_GRACE=abc`, ... */
export function describeOrigin(name: string, setting: Sourced<string>): string {
  if (setting.source.startsWith('--')) return `${setting.source} ${setting.value}`;
  if (setting.source.startsWith('config file ')) return `"${name}: ${setting.value}" in ${setting.source}`;
  if (setting.source === 'default') return `the default --${name} ${setting.value}`;
  return `${setting.source}=${setting.value}`;
}

/**
 * A duration setting in ms, checked against its range. The error names the value where the
 * user gave it (flag, environment variable or config file), and the range.
 */
export function durationSetting(command: string, settings: Settings, name: string): number {
  const setting = settings.string(name);
  if (!setting) throw new Error(`durationSetting: ${name} has no value and no default`);
  const checked = checkDuration(name, setting.value);
  if ('ms' in checked) return checked.ms;
  const where = describeOrigin(name, setting);
  throw durationError(
    command,
    name,
    checked.fault === 'not a duration'
      ? `${where} is not a duration (examples: 90s, 1m30s, 500ms)`
      : `${where} is out of range: --${name} takes ${formatDuration(checked.range.min)} to ${formatDuration(checked.range.max)}`,
  );
}

/**
 * `raw` as the duration setting `name` takes it: its ms, or what is wrong with it (and the range
 * it must be in). For the settings, and for a Pod's annotation that stands in for one
 * (pod-annotations.ts), which report it each in their own way.
 */
export function checkDuration(
  name: string,
  raw: string,
):
  | { readonly ms: number }
  | { readonly fault: 'not a duration' | 'out of range'; readonly range: { min: number; max: number } } {
  const range = DURATION_RANGES[name] ?? { min: 0, max: Number.POSITIVE_INFINITY };
  const ms = durationMs(raw);
  if (ms === undefined) return { fault: 'not a duration', range };
  if (ms < range.min || ms > range.max) return { fault: 'out of range', range };
  return { ms };
}

function durationError(command: string, name: string, message: string): ConfigSyncError {
  const range = DURATION_RANGES[name];
  return new ConfigSyncError('CS_USAGE_BAD_DURATION', `${command}: ${message}`, {
    hint: range
      ? `give --${name} a duration from ${formatDuration(range.min)} to ${formatDuration(range.max)}, e.g. 90s or 1m30s`
      : `give --${name} a duration such as 90s or 1m30s`,
    details: { command, setting: name },
  });
}
