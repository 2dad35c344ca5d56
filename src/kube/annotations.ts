// Every annotation and condition name config-sync reads or writes, in one place: what users
// alert on and select by, and what the admission policies in deploy/sidecar/rbac allow.
export const ANNOTATION = {
  /** On the workload's Pod template: the config version it was last restarted for (dedupe). */
  configHash: 'config-sync.io/config-hash',
  /** On the workload's Pod template: what `kubectl rollout restart` writes. */
  restartedAt: 'kubectl.kubernetes.io/restartedAt',
  /** Beside the config hash: config-sync's restarts of the workload in the last hour (for the policy gate). */
  restarts: 'config-sync.io/restarts',
  /** On the Pod: the time of the last verified match. */
  lastConfigSync: 'config-sync.io/last-config-sync',
  /** On the Pod: the source versions that match was made on. */
  matchedVersions: 'config-sync.io/matched-versions',
  /** On the Pod: what each app container got at its start for env and subPath targets (keyed), with that start. */
  startBaselines: 'config-sync.io/start-baselines',
  /** On a Pod: `enabled` or `disabled`, the Pod's own say over whether the node agent serves it. */
  nodeAgent: 'config-sync.io/node-agent',
} as const;

/**
 * On a workload's Pod template (so on its Pods): the workload's own say over what is checked and
 * what is done about drift, read by the sidecar and the node agent (config/pod-annotations.ts).
 * They win over the agent's flags for that Pod.
 */
export const POD_SETTING = {
  /** Volumes, ConfigMaps and Secrets not to check: `volume/cache, configmap/flags, secret/tls`. */
  ignore: 'config-sync.io/ignore',
  /** restart, alert-only or reload: as --on-drift, for this workload. */
  onDrift: 'config-sync.io/on-drift',
  /** As --grace, for this workload. */
  grace: 'config-sync.io/grace',
  /** Reload mode: as --reload-url. */
  reloadUrl: 'config-sync.io/reload-url',
  /** Reload mode: as --reload-signal, with reload-process. */
  reloadSignal: 'config-sync.io/reload-signal',
  /** Reload mode: as --reload-process. */
  reloadProcess: 'config-sync.io/reload-process',
  /** restart (default) or ignore: what a changed Secret read as environment variables calls for. */
  secretEnv: 'config-sync.io/secret-env',
} as const;

/**
 * On a ConfigMap or Secret: `never` says a drift of it is reported and never healed by a
 * restart (a source shared by many workloads whose owners are not its owner); `allowed` is the
 * default.
 */
export const SOURCE_RESTART_ANNOTATION = 'config-sync.io/restart';

/**
 * On a Namespace or a Pod (its workload's template): `config-sync.io/inject=enabled` asks the
 * admission webhook for the sidecar (deploy/webhook); `disabled` on a Pod refuses it.
 */
export const INJECT_LABEL = 'config-sync.io/inject';

/** On a Namespace: `config-sync.io/node-agent=enabled` opts its Pods in to the node agent. */
export const NODE_AGENT_LABEL = 'config-sync.io/node-agent';

/** The Pod condition the agent writes (usable as a readiness gate). */
export const CONDITION_TYPE = 'config-sync.io/InSync';
