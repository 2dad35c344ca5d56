// What every command that acts like the agent starts from: the resolved scope, the one client,
// its own Pod, the targets, and the settings that shape decisions. Built once per process.
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { AgentConfig } from '../config/agent-config.ts';
import { servedPod } from '../config/served-pod.ts';
import {
  DEFAULT_VOLUME_MODE,
  referencedSources,
  type SourceRef,
  type Target,
  type VolumeTarget,
} from '../discover/targets.ts';
import { ConfigSyncError } from '../errors.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import { apiStatus } from '../kube/api-errors.ts';
import { createKubeClient, type KubeClient } from '../kube/client.ts';
import { namespaceAbsentError, namespacePresence } from '../kube/namespace-presence.ts';
import { resolveScope, type Scope } from '../kube/scope.ts';
import { gatherScopeFacts } from '../kube/scope-facts.ts';
import { type Fingerprint, keyedFingerprint, keyId } from '../verify/fingerprint.ts';
import { loadDigestKey } from './digest-key.ts';
import { readStartBaselines, type StartBaselines } from './start-baselines.ts';

export interface Runtime {
  readonly scope: Scope;
  readonly client: KubeClient;
  readonly namespace: string;
  readonly pod: V1Pod | undefined;
  readonly targets: readonly Target[];
  readonly sources: readonly SourceRef[];
  readonly notes: readonly string[];
  /**
   * The typed configuration it was opened with (warnings, verify windows, heal, reload), with
   * the Pod's annotations applied (config/pod-annotations.ts).
   */
  readonly config: AgentConfig;
  /** What the Pod's annotations changed and left out, one line each (config/served-pod.ts). */
  readonly selection: readonly string[];
  /** The Pod's annotation values that could not be read: told, and the Pod is never restarted. */
  readonly annotationProblems: readonly string[];
  /** Digests shown outside the process are keyed with the Pod's key (--state-dir). */
  readonly fingerprint: Fingerprint;
  /**
   * Where a volume target's files are in the agent's filesystem: its mount path under
   * --mount-root for the sidecar, kubelet's own directory of the volume for the node agent.
   */
  volumePath(target: VolumeTarget): string;
  /** What each app container got at its start, as recorded on the Pod (start-baselines.ts). */
  readonly baselines: StartBaselines;
  /** Names the fingerprint key the baselines are made under. */
  readonly digestKeyId: string;
  /**
   * The agent reads the app containers' own mounts (the node agent: kubelet's directories),
   * not copies of them in a container of its own (the sidecar).
   */
  readonly seesAppMounts?: boolean;
}

/**
 * `stopping` aborts every API request in flight and refuses new ones: a process told to stop
 * never waits on a stalled API server.
 */
export async function openRuntime(
  config: AgentConfig,
  env: NodeJS.ProcessEnv,
  stopping?: AbortSignal,
): Promise<Runtime> {
  const facts = await gatherScopeFacts(config.scope, env);
  const scope = resolveScope(facts, 'agent');
  const namespace = scope.namespace?.value as string;
  const client = createKubeClient(scope, {
    requestTimeoutMs: config.requestTimeoutMs,
    ...(stopping ? { signal: stopping } : {}),
  });
  const digestKey = loadDigestKey(config.stateDir);
  const digestKeyId = keyId(digestKey.key);

  // Explicit targets first: they need no Pod.
  const targets: Target[] = config.watch.map((spec) => ({
    type: 'volume' as const,
    container: 'explicit',
    volume: spec.ref.name,
    mountPath: spec.path,
    sources: [{ ref: spec.ref, optional: false, defaultMode: DEFAULT_VOLUME_MODE }],
  }));
  const notes: string[] = digestKey.note ? [digestKey.note] : [];
  let pod: V1Pod | undefined;
  let podConfig = config;
  let selection: readonly string[] = [];
  let annotationProblems: readonly string[] = [];
  const podName = config.pod.name?.value;
  if (podName) {
    pod = await client.get<V1Pod>({ resource: 'pods', namespace, name: podName }).catch(async (error) => {
      // A Pod "not found" in a namespace that does not exist: say so (kube/namespace-presence.ts).
      if (apiStatus(error) === 404 && (await namespacePresence(client, namespace)) === 'absent')
        throw namespaceAbsentError(scope);
      throw error;
    });
    const served = servedPod(
      pod,
      config,
      { self: config.pod.selfContainer, containers: config.pod.containers },
      'sidecar',
    );
    targets.push(...served.targets);
    notes.push(...served.notes);
    ({ config: podConfig, selection, problems: annotationProblems } = served);
  }
  if (targets.length === 0) {
    throw new ConfigSyncError(
      'CS_CONFIG_NO_TARGETS',
      `${config.command}: nothing to check: no --watch target and no ConfigMap or Secret in ${podName ? `Pod ${podName}` : 'any Pod (no --pod, no POD_NAME)'}`,
      {
        hint: selection.length
          ? `the Pod's annotations leave nothing to check (${selection.join('; ')}); to run no agent in it, set config-sync.io/inject=disabled on its template`
          : 'in a pod, set POD_NAME from the downward API (fieldRef: metadata.name); elsewhere pass --watch PATH=configmap/NAME',
      },
    );
  }
  const raw = pod?.metadata?.annotations?.[ANNOTATION.startBaselines];
  const baseline = readStartBaselines(raw, digestKeyId);
  if (baseline.note) notes.push(baseline.note);
  return {
    scope,
    client,
    namespace,
    pod,
    targets,
    sources: referencedSources(targets),
    notes,
    config: podConfig,
    selection,
    annotationProblems,
    fingerprint: keyedFingerprint(digestKey.key),
    volumePath: (target) => path.join(config.mountRoot, target.mountPath),
    baselines: baseline.baselines,
    digestKeyId,
  };
}

/** Reads the Runtime's Pod as the API has it now; undefined where there is none or the read failed. */
export function podReader(
  rt: Pick<Runtime, 'client' | 'namespace' | 'pod'>,
): () => Promise<V1Pod | undefined> {
  const name = rt.pod?.metadata?.name;
  return async () => {
    if (!name) return undefined;
    try {
      return await rt.client.get<V1Pod>({ resource: 'pods', namespace: rt.namespace, name });
    } catch {
      // The sources' re-read says what the API cannot answer; the plan keeps the Pod as read at
      // the start, so a failed read holds back no restart it would have made before.
      return undefined;
    }
  };
}
