// The fleet view behind `config-sync status`: which Pods run on stale configuration, from the
// Pods alone (what the agents write on them: the InSync condition, last-config-sync and the
// matched versions), so it needs nothing but `list pods`. Pure: the command lists, this decides.
//
// Steps:
//  (1) a Pod runs the agent when it has the agent's container (native sidecar or not), its
//      condition, or its last-config-sync annotation, or it is annotated for the node agent
//      (config-sync.io/node-agent: enabled); without a sidecar, the node agent serves it;
//  (2) its state: the condition True is InSync (or Propagating, within kubelet's window), False
//      is Drifted with the agent's reason, absent is NoStatus (the agent has not reported yet);
//  (3) its workload, named from the owner reference without reading it: a ReplicaSet's name
//      less the pod-template hash its Pods are labelled with is its Deployment (or Rollout);
//  (4) one line per workload: how many Pods in sync, or how many drifted, why, and since when.
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION, CONDITION_TYPE, INJECT_LABEL } from '../kube/annotations.ts';
import { workloadNamedByReplicaSet } from '../kube/resources.ts';

export type FleetState = 'InSync' | 'Propagating' | 'Drifted' | 'NoStatus' | 'NotInjected';

export interface PodRow {
  readonly namespace: string;
  readonly pod: string;
  /** `Deployment/web`, `StatefulSet/db`, `-` for a Pod with no controller. */
  readonly workload: string;
  readonly state: FleetState;
  /** The condition's reason (SubPathStale, EnvStale, ...); empty with no status. */
  readonly reason: string;
  /** The condition's message: target, paths and keyed digests only, never a value. */
  readonly message: string;
  /** When it went out of sync (ms), for Drifted. */
  readonly driftedSince?: number;
  /** The last verified match (ms). */
  readonly lastSync?: number;
  /** `ConfigMap/web-config@123,...`: the versions that match was made on. */
  readonly matchedVersions: string;
  /** Which agent checks it: its own sidecar, or the node agent (config-sync node). */
  readonly agent: 'sidecar' | 'node';
}

export interface WorkloadRow {
  readonly namespace: string;
  readonly workload: string;
  readonly pods: number;
  readonly inSync: number;
  readonly drifted: number;
  readonly noStatus: number;
  /** Pods that asked for the sidecar and did not get it (missedInjection). */
  readonly notInjected: number;
  /** The drifted Pods' reasons, most frequent first. */
  readonly reasons: readonly string[];
  /** The earliest time one of its Pods went out of sync (ms). */
  readonly driftedSince?: number;
}

/** (1) */
export function runsAgent(pod: V1Pod, agentContainer: string): boolean {
  return (
    hasSidecar(pod, agentContainer) ||
    (pod.status?.conditions ?? []).some((c) => c.type === CONDITION_TYPE) ||
    pod.metadata?.annotations?.[ANNOTATION.lastConfigSync] !== undefined ||
    pod.metadata?.annotations?.[ANNOTATION.nodeAgent] === 'enabled'
  );
}

function hasSidecar(pod: V1Pod, agentContainer: string): boolean {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].some(
    (c) => c.name === agentContainer,
  );
}

/**
 * A Pod the webhook should have given a sidecar and did not: asked for by its own label or its
 * namespace's (`config-sync.io/inject=enabled`; `disabled` on the Pod refuses), with no sidecar,
 * no status of an agent and no opt-in to the node agent. The webhook's failurePolicy is Ignore
 * (a Pod is never refused for it), so a Pod made while it was down runs unchecked: nothing else
 * would say so. `namespaceLabels` undefined: the namespace could not be read.
 */
export function missedInjection(
  pod: V1Pod,
  namespaceLabels: Readonly<Record<string, string>> | undefined,
  agentContainer: string,
): boolean {
  const own = pod.metadata?.labels?.[INJECT_LABEL];
  const asked = own === 'enabled' || (own !== 'disabled' && namespaceLabels?.[INJECT_LABEL] === 'enabled');
  return (
    asked &&
    !runsAgent(pod, agentContainer) &&
    pod.status?.phase !== 'Succeeded' &&
    pod.status?.phase !== 'Failed'
  );
}

/** The row of a Pod that missed its injection (missedInjection). */
export function notInjectedRow(pod: V1Pod): PodRow {
  return {
    ...podRow(pod),
    state: 'NotInjected',
    reason: 'NotInjected',
    message:
      'asked for the config-sync sidecar (config-sync.io/inject=enabled) but has none: the webhook did not answer when it was made (failurePolicy Ignore); restart its workload once the webhook serves',
    agent: 'sidecar',
  };
}

/** Which agent checks the Pod: its own sidecar, else the node agent (the only other writer of its status). */
export function servedBy(pod: V1Pod, agentContainer: string): 'sidecar' | 'node' {
  return hasSidecar(pod, agentContainer) ? 'sidecar' : 'node';
}

/** (3) */
export function workloadOf(pod: V1Pod): string {
  const owner = pod.metadata?.ownerReferences?.find((r) => r.controller);
  if (!owner) return '-';
  if (owner.kind !== 'ReplicaSet') return `${owner.kind}/${owner.name}`;
  const named = workloadNamedByReplicaSet(owner.name, pod.metadata?.labels);
  return named ? `${named.kind}/${named.name}` : `ReplicaSet/${owner.name}`;
}

function time(value: string | Date | undefined): number | undefined {
  if (value === undefined) return undefined;
  const ms = new Date(value).getTime();
  return Number.isNaN(ms) ? undefined : ms;
}

/** (2) */
export function podRow(pod: V1Pod, agentContainer = 'config-sync'): PodRow {
  const condition = (pod.status?.conditions ?? []).find((c) => c.type === CONDITION_TYPE);
  const annotations = pod.metadata?.annotations ?? {};
  const state: FleetState = !condition
    ? 'NoStatus'
    : condition.status === 'True'
      ? condition.reason === 'Propagating'
        ? 'Propagating'
        : 'InSync'
      : 'Drifted';
  const since = state === 'Drifted' ? time(condition?.lastTransitionTime) : undefined;
  const lastSync = time(annotations[ANNOTATION.lastConfigSync]);
  return {
    namespace: pod.metadata?.namespace ?? '',
    pod: pod.metadata?.name ?? '',
    workload: workloadOf(pod),
    state,
    reason: condition?.reason ?? '',
    message: condition?.message ?? '',
    ...(since === undefined ? {} : { driftedSince: since }),
    ...(lastSync === undefined ? {} : { lastSync }),
    matchedVersions: annotations[ANNOTATION.matchedVersions] ?? '',
    agent: servedBy(pod, agentContainer),
  };
}

/** (4) In the order the Pods came, one row per namespace and workload. */
export function workloadRows(pods: readonly PodRow[]): WorkloadRow[] {
  const groups = new Map<string, PodRow[]>();
  for (const p of pods) {
    const key = `${p.namespace}\0${p.workload === '-' ? `Pod/${p.pod}` : p.workload}`;
    groups.set(key, [...(groups.get(key) ?? []), p]);
  }
  return [...groups.entries()].map(([key, rows]) => {
    const drifted = rows.filter((r) => r.state === 'Drifted');
    const counts = new Map<string, number>();
    for (const r of drifted) counts.set(r.reason, (counts.get(r.reason) ?? 0) + 1);
    const since = drifted
      .map((r) => r.driftedSince)
      .filter((t): t is number => t !== undefined)
      .sort((a, b) => a - b)[0];
    return {
      namespace: rows[0]?.namespace ?? '',
      workload: key.split('\0')[1] ?? '',
      pods: rows.length,
      inSync: rows.filter((r) => r.state === 'InSync' || r.state === 'Propagating').length,
      drifted: drifted.length,
      noStatus: rows.filter((r) => r.state === 'NoStatus').length,
      notInjected: rows.filter((r) => r.state === 'NotInjected').length,
      reasons: [...counts.entries()].sort((a, b) => b[1] - a[1]).map(([reason]) => reason),
      ...(since === undefined ? {} : { driftedSince: since }),
    };
  });
}

/** `35s`, `4m`, `3h`, `2d`: how long ago, as kubectl shows ages. */
export function age(ms: number): string {
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 120) return `${s}s`;
  if (s < 2 * 3600) return `${Math.floor(s / 60)}m`;
  if (s < 2 * 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** `web: 3/3 in sync`, `api: 1/4 drifted (SubPathStale) since 4m`, with ` (1 with no status yet)`. */
export function workloadLine(w: WorkloadRow, now: number, withNamespace: boolean): string {
  const name = `${withNamespace ? `${w.namespace}/` : ''}${w.workload.replace(/^Deployment\//, '')}`;
  const unknown = [
    ...(w.noStatus > 0 ? [`${w.noStatus} with no status yet`] : []),
    ...(w.notInjected > 0 ? [`${w.notInjected} without the sidecar it asked for`] : []),
  ]
    .map((s) => ` (${s})`)
    .join('');
  if (w.drifted === 0) return `${name}: ${w.inSync}/${w.pods} in sync${unknown}`;
  const since = w.driftedSince === undefined ? '' : ` since ${age(now - w.driftedSince)}`;
  return `${name}: ${w.drifted}/${w.pods} drifted (${w.reasons.join(', ')})${since}${unknown}`;
}
