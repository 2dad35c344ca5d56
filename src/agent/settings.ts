// The settings of the agent and of the one-shot commands that act like it (check, heal).

import { configFileSetting, podSettings, type SettingDef, scopeSettings } from '../cli/settings.ts';
import { badFlag } from '../errors.ts';

export const targetSettings: readonly SettingDef[] = [
  configFileSetting,
  ...scopeSettings,
  ...podSettings,
  {
    name: 'mount-root',
    env: 'CONFIG_SYNC_MOUNT_ROOT',
    type: 'string',
    valueName: 'dir',
    default: '/',
    description: "where the app's mount paths are in the agent's filesystem",
  },
  {
    name: 'grace',
    env: 'CONFIG_SYNC_GRACE',
    type: 'string',
    valueName: 'duration',
    default: '90s',
    description: 'how long kubelet may take to propagate a change',
  },
  {
    name: 'debounce',
    env: 'CONFIG_SYNC_DEBOUNCE',
    type: 'string',
    valueName: 'duration',
    default: '5s',
    description: 'wait before a subPath, env or immutable target counts as drifted',
  },
  {
    name: 'on-drift',
    env: 'CONFIG_SYNC_ON_DRIFT',
    type: 'string',
    valueName: 'restart|alert-only|reload',
    default: 'restart',
    description: 'what to do about drift (reload: tell the app once the files match, see --reload-*)',
  },
  {
    name: 'reload-url',
    env: 'CONFIG_SYNC_RELOAD_URL',
    type: 'string',
    valueName: 'url',
    description: 'reload mode: POST here (2xx = reloaded), e.g. http://127.0.0.1:9090/-/reload',
  },
  {
    name: 'reload-signal',
    env: 'CONFIG_SYNC_RELOAD_SIGNAL',
    type: 'string',
    valueName: 'SIGHUP',
    description: 'reload mode: send this signal to --reload-process (needs shareProcessNamespace)',
  },
  {
    name: 'reload-process',
    env: 'CONFIG_SYNC_RELOAD_PROCESS',
    type: 'string',
    valueName: 'name',
    description: "reload mode: the app's process name",
  },
  {
    name: 'reload-fallback',
    env: 'CONFIG_SYNC_RELOAD_FALLBACK',
    type: 'string',
    valueName: 'restart|alert-only',
    default: 'restart',
    description: 'reload mode: when a reload fails or the files never become right',
  },
  {
    name: 'min-restart-interval',
    env: 'CONFIG_SYNC_MIN_RESTART_INTERVAL',
    type: 'string',
    valueName: 'duration',
    default: '5m',
    description: 'no second restart of the workload sooner than this',
  },
];

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** `90s`, `1m30s`, `500ms`, `2h` -> milliseconds; a bare number is seconds. */
export function parseDuration(command: string, name: string, raw: string): number {
  if (/^\d+(\.\d+)?$/.test(raw)) return Number(raw) * 1000;
  const parts = [...raw.matchAll(/(\d+(?:\.\d+)?)(ms|s|m|h)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join('') !== raw) {
    throw badFlag(command, `--${name} ${raw} is not a duration (examples: 90s, 1m30s, 500ms)`);
  }
  return parts.reduce((ms, p) => ms + Number(p[1]) * (UNITS[p[2] as string] as number), 0);
}
