// The settings of the agent and of the one-shot commands that act like it: each one's flag,
// environment variable, default and help line, stated once. agent-config.ts turns their values
// into one typed, checked AgentConfig; node-config.ts takes the same minus the sidecar's own.
import { configFileSetting, podSettings, type SettingDef, scopeSettings } from './settings.ts';

/** Where the sidecar mounts its emptyDir (deploy/sidecar, inject, the webhook). */
export const DEFAULT_STATE_DIR = '/var/run/config-sync';

/** The settings of the agent and of the one-shot commands that act like it (check, heal). */
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
    name: 'state-dir',
    env: 'CONFIG_SYNC_STATE_DIR',
    type: 'string',
    valueName: 'dir',
    default: DEFAULT_STATE_DIR,
    description:
      "the agent's own emptyDir: the Pod's fingerprint key (kept there so it survives a sidecar restart)",
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
    name: 'reload-settle',
    env: 'CONFIG_SYNC_RELOAD_SETTLE',
    type: 'string',
    valueName: 'duration',
    default: '1s',
    description:
      'reload mode: a change that follows another this soon waits until the config stood this long (a burst costs two reloads)',
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
    name: 'request-timeout',
    env: 'CONFIG_SYNC_REQUEST_TIMEOUT',
    type: 'string',
    valueName: 'duration',
    default: '10s',
    description: 'how long one API request may take before it fails (watches excepted)',
  },
  {
    name: 'policy-url',
    env: 'CONFIG_SYNC_POLICY_URL',
    type: 'string',
    valueName: 'url',
    description:
      "before a restart, POST the plan to this OPA Data API path (http://HOST:8181/v1/data/PATH); its result's allow decides",
  },
  {
    name: 'policy-failure',
    env: 'CONFIG_SYNC_POLICY_FAILURE',
    type: 'string',
    valueName: 'closed|open',
    default: 'closed',
    description:
      'when the policy cannot decide (unreachable, slow, a malformed answer): closed = no restart, open = restart',
  },
  {
    name: 'restart-window',
    env: 'CONFIG_SYNC_RESTART_WINDOW',
    type: 'string',
    valueName: 'window',
    description: 'restart only inside this window, e.g. "Mon-Fri 08:00-18:00 Europe/Berlin"',
  },
  {
    name: 'only-when-settled',
    env: 'CONFIG_SYNC_ONLY_WHEN_SETTLED',
    type: 'boolean',
    description: 'no restart while the workload is not fully available or a rollout is in progress',
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

/** The long-running agent's own settings on top of targetSettings: its loop, endpoints and logs. */
export const agentSettings: readonly SettingDef[] = [
  ...targetSettings,
  {
    name: 'listen',
    env: 'CONFIG_SYNC_LISTEN',
    type: 'string',
    valueName: 'host:port',
    default: ':9464',
    description: '/metrics, /healthz, /readyz',
  },
  {
    name: 'resync',
    env: 'CONFIG_SYNC_RESYNC',
    type: 'string',
    valueName: 'duration',
    default: '60s',
    description: 'a full compare at least this often, whatever the watches say',
  },
  {
    name: 'poll',
    env: 'CONFIG_SYNC_POLL',
    type: 'string',
    valueName: 'duration',
    default: '2s',
    description: 'stat check of the mounts (inotify fallback)',
  },
  {
    name: 'heartbeat',
    env: 'CONFIG_SYNC_HEARTBEAT',
    type: 'string',
    valueName: 'duration',
    default: '15m',
    description: 'rewrite the InSync condition at least this often',
  },
  {
    name: 'log-level',
    env: 'CONFIG_SYNC_LOG_LEVEL',
    type: 'string',
    valueName: 'level',
    default: 'info',
    description: 'debug, info, warn or error',
  },
];
