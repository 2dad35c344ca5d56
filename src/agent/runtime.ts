// What every command that acts like the agent starts from: the resolved scope, the one client,
// its own Pod, the targets, and the settings that shape decisions. Built once per process.
import fs from 'node:fs';
import { constants as osConstants } from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { type Settings, scopeFlags } from '../cli/settings.ts';
import {
  DEFAULT_VOLUME_MODE,
  discoverTargets,
  referencedSources,
  type SourceRef,
  type Target,
} from '../discover/targets.ts';
import { parseWatchSpec } from '../discover/watch-spec.ts';
import { ConfigSyncError } from '../errors.ts';
import type { HealPolicy } from '../heal/planner.ts';
import type { ReloadTrigger } from '../heal/reload.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import { explainApiError } from '../kube/api-errors.ts';
import { createKubeClient, type KubeClient } from '../kube/client.ts';
import { isObjectName } from '../kube/names.ts';
import { resourcePath } from '../kube/resources.ts';
import { resolveScope, type Scope } from '../kube/scope.ts';
import { gatherScopeFacts } from '../kube/scope-facts.ts';
import { keyedFingerprint, keyId } from '../verify/fingerprint.ts';
import type { VerifyPolicy } from '../verify/verdict.ts';
import { loadDigestKey } from './digest-key.ts';
import { DEFAULT_STATE_DIR, durationSetting } from './settings.ts';

export interface Runtime {
  readonly scope: Scope;
  readonly client: KubeClient;
  readonly namespace: string;
  readonly pod: V1Pod | undefined;
  readonly targets: readonly Target[];
  readonly sources: readonly SourceRef[];
  readonly notes: readonly string[];
  /** Settings that work but may not mean what was intended: the agent logs them, check and heal print them. */
  readonly warnings: readonly string[];
  readonly verifyPolicy: VerifyPolicy;
  readonly healPolicy: HealPolicy;
  /** A target's mount path as the agent sees it (under --mount-root). */
  agentPath(mountPath: string): string;
  /** The env baselines recorded on the Pod: target id -> fingerprint. */
  readonly envBaselines: Readonly<Record<string, string>>;
  /** Names the fingerprint key the baselines are made under. */
  readonly digestKeyId: string;
  /** Reload mode: how to tell the app (heal policy then holds the fallback). */
  readonly reload: ReloadTrigger | undefined;
  /** Reload mode: how long a config must stand before a reload that follows another change. */
  readonly reloadSettleMs: number;
}

function isDirectory(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}

/** --reload-url, or --reload-signal with --reload-process: exactly one way to tell the app. */
function reloadTrigger(
  settings: Settings,
  modeError: (what: string, hint: string) => ConfigSyncError,
): ReloadTrigger {
  const url = settings.string('reload-url')?.value;
  const signal = settings.string('reload-signal')?.value;
  const proc = settings.string('reload-process')?.value;
  const hint =
    'pass --reload-url http://127.0.0.1:PORT/PATH, or --reload-signal SIGHUP with --reload-process NAME';
  if (url && signal) throw modeError('--reload-url and --reload-signal are both set', hint);
  if (url) {
    if (!/^https?:\/\//.test(url)) throw modeError(`--reload-url ${url} is not an http(s) URL`, hint);
    return { kind: 'http', url };
  }
  if (signal) {
    if (!/^SIG[A-Z0-9]+$/.test(signal) || !(signal in osConstants.signals))
      throw modeError(`--reload-signal ${signal} is not a signal`, hint);
    if (!proc) throw modeError('--reload-signal needs --reload-process', hint);
    return { kind: 'signal', signal: signal as NodeJS.Signals, process: proc };
  }
  throw modeError('--on-drift reload needs a way to tell the app', hint);
}

/**
 * `stopping` aborts every API request in flight and refuses new ones: a process told to stop
 * never waits on a stalled API server.
 */
export async function openRuntime(
  command: string,
  settings: Settings,
  env: NodeJS.ProcessEnv,
  stopping?: AbortSignal,
): Promise<Runtime> {
  const duration = (name: string) => durationSetting(command, settings, name);
  const requestTimeoutMs = duration('request-timeout');
  const facts = await gatherScopeFacts(scopeFlags(settings), env);
  const scope = resolveScope(facts, 'agent');
  const namespace = scope.namespace?.value as string;
  const client = createKubeClient(scope, { requestTimeoutMs, ...(stopping ? { signal: stopping } : {}) });

  const onDrift = settings.string('on-drift')?.value ?? 'restart';
  const modeError = (what: string, hint: string) =>
    new ConfigSyncError('CS_USAGE_BAD_FLAG', 'usage', `${command}: ${what}`, { hint });
  if (onDrift !== 'restart' && onDrift !== 'alert-only' && onDrift !== 'reload') {
    throw modeError(
      `--on-drift ${onDrift} is not restart, alert-only or reload`,
      'use --on-drift restart (default), alert-only or reload',
    );
  }
  const reload = onDrift === 'reload' ? reloadTrigger(settings, modeError) : undefined;
  const fallback = settings.string('reload-fallback')?.value ?? 'restart';
  if (fallback !== 'restart' && fallback !== 'alert-only') {
    throw modeError(
      `--reload-fallback ${fallback} is not restart or alert-only`,
      'use --reload-fallback restart (default) or alert-only',
    );
  }
  const mode: HealPolicy['mode'] = onDrift === 'reload' ? fallback : onDrift;
  const stateDir = settings.string('state-dir')?.value ?? DEFAULT_STATE_DIR;
  const digestKey = loadDigestKey(stateDir);
  const digestKeyId = keyId(digestKey.key);
  const verifyPolicy: VerifyPolicy = {
    graceMs: duration('grace'),
    debounceMs: duration('debounce'),
    fingerprint: keyedFingerprint(digestKey.key),
  };
  const warnings: string[] = [];
  // A grace shorter than the debounce turns the two windows around. --grace 0s is the one
  // exception: it says "do not wait for kubelet at all", which `heal --dry-run --grace 0s` uses
  // on purpose to see the plan now.
  if (verifyPolicy.graceMs > 0 && verifyPolicy.graceMs < verifyPolicy.debounceMs) {
    warnings.push(
      `--grace ${settings.string('grace')?.value} is shorter than --debounce ${settings.string('debounce')?.value}: a volume kubelet updates counts as drifted sooner than a subPath file, env var or immutable source, which kubelet never updates`,
    );
  }
  const healPolicy: HealPolicy = { mode, minRestartIntervalMs: duration('min-restart-interval') };
  const mountRootSetting = settings.string('mount-root');
  const mountRoot = mountRootSetting?.value ?? '/';
  if (!isDirectory(mountRoot)) {
    throw new ConfigSyncError(
      'CS_CONFIG_MOUNT_ROOT',
      'config',
      `${command}: the mount root ${mountRoot} (from ${mountRootSetting?.source ?? 'default'}) is not a directory`,
      {
        hint: "--mount-root is where the app's mount paths are in the agent's filesystem: / in the sidecar, the directory that holds etc/... elsewhere",
        details: { path: mountRoot },
      },
    );
  }

  // Explicit targets first: they need no Pod.
  const targets: Target[] = settings.list('watch').map((raw) => {
    const spec = parseWatchSpec(raw);
    if (!spec.path) {
      throw new ConfigSyncError(
        'CS_USAGE_BAD_WATCH',
        'usage',
        `--watch ${raw}: ${command} needs the mount path too`,
        {
          hint: 'write PATH=configmap/NAME, e.g. --watch /etc/app=configmap/app-config',
        },
      );
    }
    return {
      type: 'volume' as const,
      container: 'explicit',
      volume: spec.ref.name,
      mountPath: spec.path,
      sources: [{ ref: spec.ref, optional: false, defaultMode: DEFAULT_VOLUME_MODE }],
    };
  });
  const notes: string[] = digestKey.note ? [digestKey.note] : [];
  let pod: V1Pod | undefined;
  const podSetting = settings.string('pod');
  const podName = podSetting?.value;
  if (podSetting && podName && !isObjectName(podName)) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_NAME',
      'usage',
      `${command}: Pod name "${podName}" from ${podSetting.source} is not a Pod name`,
      {
        hint: 'in a pod, set POD_NAME from the downward API (fieldRef: metadata.name); elsewhere pass the name --pod as kubectl get pods shows it',
        details: { name: podName, source: podSetting.source },
      },
    );
  }
  if (podName) {
    try {
      pod = await client.get<V1Pod>(resourcePath({ resource: 'pods', namespace, name: podName }));
    } catch (error) {
      throw explainApiError(error, { verb: 'get', resource: 'pods', namespace, name: podName }, scope);
    }
    const discovery = discoverTargets(pod, {
      self: settings.string('self-container')?.value ?? 'config-sync',
      containers: settings.list('container'),
    });
    targets.push(...discovery.targets);
    notes.push(...discovery.notes);
  }
  if (targets.length === 0) {
    throw new ConfigSyncError(
      'CS_CONFIG_NO_TARGETS',
      'config',
      `${command}: nothing to check: no --watch target and no ConfigMap or Secret in ${podName ? `Pod ${podName}` : 'any Pod (no --pod, no POD_NAME)'}`,
      {
        hint: 'in a pod, set POD_NAME from the downward API (fieldRef: metadata.name); elsewhere pass --watch PATH=configmap/NAME',
      },
    );
  }
  const raw = pod?.metadata?.annotations?.[ANNOTATION.envBaseline];
  const baseline = readEnvBaselines(raw, digestKeyId);
  if (baseline.note) notes.push(baseline.note);
  const envBaselines = baseline.baselines;
  return {
    scope,
    client,
    namespace,
    pod,
    targets,
    sources: referencedSources(targets),
    notes,
    warnings,
    verifyPolicy,
    healPolicy,
    agentPath: (mountPath) => path.join(mountRoot, mountPath),
    envBaselines,
    digestKeyId,
    reload,
    reloadSettleMs: duration('reload-settle'),
  };
}

/**
 * The env-baseline annotation: `{"kid": <key id>, "baselines": {target id: fingerprint}}`.
 * Baselines made under another key (another Pod's, or this process's own when the state
 * directory is missing) or in the old unkeyed format cannot be compared, so they are re-taken.
 */
export function readEnvBaselines(
  raw: string | undefined,
  kid: string,
): { baselines: Record<string, string>; note?: string } {
  if (!raw) return { baselines: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.envBaseline} is not JSON; env targets are re-baselined`,
    };
  }
  const record = parsed as { kid?: unknown; baselines?: unknown } | null;
  if (record?.kid !== kid || typeof record.baselines !== 'object' || record.baselines === null) {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.envBaseline} was made under another fingerprint key; env targets are re-baselined`,
    };
  }
  return { baselines: record.baselines as Record<string, string> };
}

/** The annotation's value for `baselines` under the key `kid`. */
export function writeEnvBaselines(baselines: Readonly<Record<string, string>>, kid: string): string {
  return JSON.stringify({ kid, baselines });
}
