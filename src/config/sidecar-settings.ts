// The agent's settings that `inject` and the webhook write into the sidecars they add: a
// platform team's defaults for every injected Pod (`--sidecar-grace 2m`, ...), carried as the
// agent's own environment variables (CONFIG_SYNC_GRACE, ...), so the agent reads them as it
// reads any setting, with its origin. Checked here, where they are given: a bad value would
// otherwise only fail in every Pod the webhook touched.
import { ConfigSyncError } from '../errors.ts';
import { durationSetting } from './durations.ts';
import type { SettingDef, Settings } from './settings.ts';

/** Each sidecar setting: the agent setting it sets, and that setting's environment variable. */
const SIDECAR_SETTINGS = [
  { name: 'sidecar-grace', agentSetting: 'grace', env: 'CONFIG_SYNC_GRACE', valueName: 'duration' },
  { name: 'sidecar-debounce', agentSetting: 'debounce', env: 'CONFIG_SYNC_DEBOUNCE', valueName: 'duration' },
  {
    name: 'sidecar-on-drift',
    agentSetting: 'on-drift',
    env: 'CONFIG_SYNC_ON_DRIFT',
    valueName: 'restart|alert-only',
  },
] as const;

export const sidecarSettings: readonly SettingDef[] = SIDECAR_SETTINGS.map((s) => ({
  name: s.name,
  env: `CONFIG_SYNC_${s.name.toUpperCase().replaceAll('-', '_')}`,
  type: 'string' as const,
  valueName: s.valueName,
  description: `the injected agent's --${s.agentSetting} (unset: the agent's default)`,
}));

/** The environment the injected agent gets for the sidecar settings given; none given, none set. */
export function sidecarAgentEnv(command: string, settings: Settings): Record<string, string> {
  const env: Record<string, string> = {};
  for (const s of SIDECAR_SETTINGS) {
    const given = settings.string(s.name);
    if (!given) continue;
    if (s.valueName === 'duration') {
      // Checked against the agent's own range for that setting; the error names the value
      // where it was given (--sidecar-grace 2x, CONFIG_SYNC_SIDECAR_GRACE=2x).
      const asGiven = { string: (name: string) => (name === s.agentSetting ? given : undefined) } as Settings;
      durationSetting(command, asGiven, s.agentSetting);
    } else if (given.value !== 'restart' && given.value !== 'alert-only') {
      throw new ConfigSyncError(
        'CS_USAGE_BAD_FLAG',
        `${command}: --${s.name} ${given.value} (from ${given.source}) is not restart or alert-only`,
        {
          hint: 'reload mode needs a reload URL per app: set it on the workload, not for every injected Pod',
        },
      );
    }
    env[s.env] = given.value;
  }
  return env;
}
