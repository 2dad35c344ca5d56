// Finds the workload that owns a Pod, by the one table of workload kinds (kube/resources.ts): the
// Pod's controller is the workload itself (StatefulSet, DaemonSet), or a ReplicaSet whose
// controller is (Deployment, Argo Rollout). Anything else (a Job, a bare Pod, a custom
// controller, a ReplicaSet of its own) is reported and never touched.
//
// The walk is two pure steps around one read, so that the agent, check/heal and doctor follow
// the same chain:
//  (1) podOwnerStep: the Pod's controller reference -> a workload, a ReplicaSet to read, or
//      unsupported;
//  (2) replicaSetOwnerStep: the ReplicaSet's controller -> a workload reached through a
//      ReplicaSet, or unsupported.
import type { V1ObjectMeta, V1OwnerReference, V1Pod, V1ReplicaSet } from '@kubernetes/client-node';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { definedOnly } from '../kube/defined-only.ts';
import {
  REPLICA_SET,
  type RolloutGate,
  WORKLOADS,
  type WorkloadKind,
  workloadRef,
  workloadType,
} from '../kube/resources.ts';
import type { OwnerState } from './planner.ts';
import type { WorkloadHealth } from './policy.ts';

/** The owner reference marked as controller, if any. */
export function controllerOf(meta: V1ObjectMeta | undefined): V1OwnerReference | undefined {
  return meta?.ownerReferences?.find((r) => r.controller);
}

export type ResolvedOwner =
  | {
      readonly type: 'workload';
      readonly kind: WorkloadKind;
      readonly name: string;
      /** The revision of the pod template the Pod was made from, where its kind tells (supersededRevisions). */
      readonly podRevision?: string;
    }
  | { readonly type: 'unsupported'; readonly description: string };

/** The annotation a Deployment's controller numbers its rollouts with, on it and on each ReplicaSet. */
const DEPLOYMENT_REVISION = 'deployment.kubernetes.io/revision';
/** The label a StatefulSet's controller names the revision a Pod was made from with. */
const CONTROLLER_REVISION_HASH = 'controller-revision-hash';

export type OwnerStep = ResolvedOwner | { readonly type: 'replicaset'; readonly name: string };

/** (1) */
export function podOwnerStep(pod: V1Pod): OwnerStep {
  const owner = controllerOf(pod.metadata);
  if (!owner) return { type: 'unsupported', description: `Pod ${pod.metadata?.name} (no controller)` };
  if (owner.kind === 'ReplicaSet' && owner.apiVersion === `${REPLICA_SET.group}/${REPLICA_SET.version}`)
    return { type: 'replicaset', name: owner.name };
  const w = workloadType(owner.apiVersion, owner.kind);
  if (w && !w.viaReplicaSet) {
    const podRevision =
      w.kind === 'StatefulSet' ? pod.metadata?.labels?.[CONTROLLER_REVISION_HASH] : undefined;
    return { type: 'workload', kind: w.kind, name: owner.name, ...definedOnly({ podRevision }) };
  }
  return { type: 'unsupported', description: `${owner.kind} ${owner.name}` };
}

/** (2) */
export function replicaSetOwnerStep(name: string, meta: V1ObjectMeta | undefined): ResolvedOwner {
  const top = controllerOf(meta);
  const w = top && workloadType(top.apiVersion, top.kind);
  if (top && w?.viaReplicaSet) {
    const podRevision = w.kind === 'Deployment' ? meta?.annotations?.[DEPLOYMENT_REVISION] : undefined;
    return { type: 'workload', kind: w.kind, name: top.name, ...definedOnly({ podRevision }) };
  }
  return {
    type: 'unsupported',
    description: `ReplicaSet ${name}${top ? ` (owned by ${top.kind} ${top.name})` : ' (no owner)'}`,
  };
}

/** The owning workload's kind and name, reading the ReplicaSet between a Deployment or Rollout and its Pods. */
export async function findOwner(client: KubeClient, namespace: string, pod: V1Pod): Promise<ResolvedOwner> {
  const step = podOwnerStep(pod);
  if (step.type !== 'replicaset') return step;
  const rs = await client.get<V1ReplicaSet>({ ...REPLICA_SET, namespace, name: step.name });
  return replicaSetOwnerStep(step.name, rs.metadata);
}

export interface WorkloadObject {
  readonly metadata?: V1ObjectMeta;
  readonly spec?: {
    readonly replicas?: number;
    readonly template?: { readonly metadata?: V1ObjectMeta };
    /** A Deployment's (kubectl rollout pause). */
    readonly paused?: boolean;
    /** A StatefulSet's or DaemonSet's. */
    readonly updateStrategy?: {
      readonly type?: string;
      readonly rollingUpdate?: { readonly partition?: number };
    };
  };
  readonly status?: {
    readonly observedGeneration?: number;
    readonly replicas?: number;
    readonly updatedReplicas?: number;
    readonly availableReplicas?: number;
    readonly desiredNumberScheduled?: number;
    readonly updatedNumberScheduled?: number;
    readonly numberAvailable?: number;
    /** A StatefulSet's: the revision its rolling update makes Pods of. */
    readonly updateRevision?: string;
    readonly conditions?: readonly {
      readonly type?: string;
      readonly status?: string;
      readonly reason?: string;
      readonly message?: string;
    }[];
  };
}

/**
 * Whether a workload's rollout has settled, from its status: the controller has seen its latest
 * spec, and every replica is updated and available with no old one left (a DaemonSet counts
 * scheduled Pods). What `kubectl rollout status` waits for.
 */
export function workloadHealth(kind: WorkloadKind, obj: WorkloadObject): WorkloadHealth {
  const status = obj.status ?? {};
  const seen = (status.observedGeneration ?? 0) >= (obj.metadata?.generation ?? 0);
  const daemon = kind === 'DaemonSet';
  const want = daemon ? (status.desiredNumberScheduled ?? 0) : (obj.spec?.replicas ?? 1);
  const updated = daemon ? (status.updatedNumberScheduled ?? 0) : (status.updatedReplicas ?? 0);
  const available = daemon ? (status.numberAvailable ?? 0) : (status.availableReplicas ?? 0);
  const total = daemon ? want : (status.replicas ?? 0);
  const settled = seen && updated >= want && available >= want && total <= want;
  const old = total > want ? `, ${total - want} old` : '';
  const detail = `${available}/${want} available, ${updated}/${want} updated${seen ? '' : ', new spec not yet seen'}${old}`;
  // A Deployment's (and a Rollout's) controller marks a rollout that made no progress within
  // its progressDeadlineSeconds, and then stops waiting for it.
  const progressing = status.conditions?.find((c) => c.type === 'Progressing');
  const stalled =
    progressing?.status === 'False' && progressing.reason === 'ProgressDeadlineExceeded'
      ? (progressing.message ?? progressing.reason)
      : undefined;
  return { settled, detail, ...definedOnly({ stalled }) };
}

/**
 * The annotations a restart writes, where the kind keeps them (kube/resources.ts, RestartMethod):
 * the pod template's, or the object's own for a Rollout. Undefined when the object has none.
 */
export function restartAnnotationsOf(
  kind: WorkloadKind,
  obj: WorkloadObject,
): Readonly<Record<string, string>> | undefined {
  return WORKLOADS[kind].restart === 'restart-at'
    ? obj.metadata?.annotations
    : obj.spec?.template?.metadata?.annotations;
}

/**
 * Why a change of the workload's pod template replaces none of its Pods now, if that is so: its
 * kind's rollout gate (kube/resources.ts, RolloutGate) closed in the object as read.
 */
export function rolloutHeldBy(kind: WorkloadKind, obj: WorkloadObject): RolloutGate | undefined {
  switch (WORKLOADS[kind].rolloutGate) {
    case 'paused':
      return obj.spec?.paused === true ? 'paused' : undefined;
    case 'on-delete':
      return obj.spec?.updateStrategy?.type === 'OnDelete' ? 'on-delete' : undefined;
    default:
      return undefined;
  }
}

/**
 * The ordinal below which a rolling update leaves a StatefulSet's Pods alone (kube/resources.ts,
 * `partitioned`), where it is above 0; the Pods of that ordinal and above are replaced.
 */
export function updatePartitionOf(kind: WorkloadKind, obj: WorkloadObject): number | undefined {
  if (!WORKLOADS[kind].partitioned) return undefined;
  const strategy = obj.spec?.updateStrategy;
  if (strategy?.type === 'OnDelete') return undefined;
  const partition = strategy?.rollingUpdate?.partition;
  return partition !== undefined && partition > 0 ? partition : undefined;
}

/** The label a StatefulSet's controller puts its Pod's ordinal in (Kubernetes 1.28 and later). */
const POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index';

/**
 * A StatefulSet Pod's ordinal: its pod-index label, else the number its name ends in (a
 * StatefulSet names its Pods `<name>-<ordinal>`). Read only against a StatefulSet's partition.
 */
export function podOrdinalOf(pod: V1Pod | undefined): number | undefined {
  const text = pod?.metadata?.labels?.[POD_INDEX_LABEL] ?? pod?.metadata?.name?.match(/-(\d+)$/)?.[1];
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : undefined;
}

/**
 * The revision of the workload's current pod template against the one the Pod was made from,
 * where they differ: the Pod is of an older template, which the workload is rolling away from.
 * A Deployment numbers its templates (its revision annotation, and each ReplicaSet's); a
 * StatefulSet names them (status.updateRevision, and each Pod's controller-revision-hash label).
 * Other kinds, or either revision unknown: undefined, and the planner goes on as before.
 */
export function supersededRevisions(
  kind: WorkloadKind,
  obj: WorkloadObject,
  podRevision: string | undefined,
): { readonly podRevision: string; readonly revision: string } | undefined {
  const revision =
    kind === 'Deployment'
      ? obj.metadata?.annotations?.[DEPLOYMENT_REVISION]
      : kind === 'StatefulSet'
        ? obj.status?.updateRevision
        : undefined;
  if (!revision || !podRevision || revision === podRevision) return undefined;
  return { podRevision, revision };
}

/**
 * The workload as the planner needs it: the annotations a restart writes, where its kind keeps
 * them (the restart patch applies only while they are as read), its labels, its rollout state,
 * whether a restart would replace any Pod now, whether the Pod (of `podRevision`) is of an older
 * template than the workload's, and its resourceVersion (shown in the plan). `revisionCached`:
 * `podRevision` is as cached when the chain was found, not read again (ownerResolver).
 */
export function workloadState(
  kind: WorkloadKind,
  name: string,
  obj: WorkloadObject,
  podRevision?: string,
  revisionCached = false,
): OwnerState {
  const kept = restartAnnotationsOf(kind, obj);
  const superseded = supersededRevisions(kind, obj, podRevision);
  return {
    type: 'workload',
    workload: {
      kind,
      name,
      resourceVersion: obj.metadata?.resourceVersion ?? '',
      restartAnnotations: kept ?? null,
      labels: obj.metadata?.labels ?? {},
      health: workloadHealth(kind, obj),
      ...definedOnly({
        rolloutHeld: rolloutHeldBy(kind, obj),
        updatePartition: updatePartitionOf(kind, obj),
        podSuperseded: superseded && (revisionCached ? { ...superseded, cached: true as const } : superseded),
      }),
    },
  };
}

/** The workload read, as the planner needs it (workloadState). */
export async function readWorkload(
  client: KubeClient,
  namespace: string,
  kind: WorkloadKind,
  name: string,
  podRevision?: string,
): Promise<OwnerState> {
  const obj = await client.get<WorkloadObject>(workloadRef(kind, namespace, name));
  return workloadState(kind, name, obj, podRevision);
}

/** Owner lookup and read in one, for the one-shot commands: unsupported when there is no Pod. */
export async function resolveOwner(
  client: KubeClient,
  namespace: string,
  pod: V1Pod | undefined,
): Promise<OwnerState> {
  if (!pod) return { type: 'unsupported', description: 'no Pod (explicit --watch targets only)' };
  const owner = await findOwner(client, namespace, pod);
  if (owner.type === 'unsupported') return owner;
  return readWorkload(client, namespace, owner.kind, owner.name, owner.podRevision);
}

/** How the agent reads its owner (ownerResolver). */
export interface OwnerReadOptions {
  /**
   * Read the ReplicaSet again where the workload's revision is not the one cached for the Pod:
   * a rollback reuses the ReplicaSet of the template it goes back to, and gives it the new
   * revision number. Without it the cached revision is used, and the state says so
   * (podSuperseded.cached).
   */
  readonly recheckRevision?: boolean;
}

export interface OwnerResolver {
  /** The owning workload as the API has it now: one read of the workload. */
  read(options?: OwnerReadOptions): Promise<OwnerState>;
  /**
   * Finds the chain (Pod -> ReplicaSet -> workload) now, at the agent's start: a drift then
   * costs the workload's read alone. A failure is left for read() to meet and report.
   */
  warm(): Promise<void>;
}

/**
 * The agent's owner lookup. The chain (Pod -> ReplicaSet -> workload) is found once, at the
 * start: it does not change during a Pod's life, and reading the ReplicaSet at a drift was one
 * request more from every replica at the same moment. The workload itself is read every time
 * (its restart annotations and rollout state make the plan); if it is gone, the chain is found
 * again. Where the workload's revision is not the one the ReplicaSet had, the Pod counts as
 * superseded by the cached revision, marked so: only a plan that rests on it (a rollout
 * replacing the Pod, planner step 6d) reads the ReplicaSet again (recheckRevision). After a
 * sibling's restart every replica sees a new revision, and reading 49 ReplicaSets to learn what
 * the dedupe did not need was most of a fleet's requests after the restart.
 */
export function ownerResolver(client: KubeClient, namespace: string, pod: V1Pod | undefined): OwnerResolver {
  let found: Extract<ResolvedOwner, { type: 'workload' }> | undefined;
  const find = async (p: V1Pod) => {
    const owner = await findOwner(client, namespace, p);
    if (owner.type === 'workload') found = owner;
    return owner;
  };
  async function read(options: OwnerReadOptions = {}): Promise<OwnerState> {
    if (!found && pod) {
      const owner = await find(pod);
      if (owner.type === 'unsupported') return owner;
    }
    if (!found) return resolveOwner(client, namespace, pod);
    const { kind, name } = found;
    let obj: WorkloadObject;
    try {
      obj = await client.get<WorkloadObject>(workloadRef(kind, namespace, name));
    } catch (error) {
      if (apiStatus(error) === 404) found = undefined;
      throw error;
    }
    const cached = Boolean(
      pod && WORKLOADS[kind].viaReplicaSet && supersededRevisions(kind, obj, found.podRevision),
    );
    if (cached && options.recheckRevision && pod) await find(pod);
    return workloadState(kind, name, obj, found?.podRevision, cached && !options.recheckRevision);
  }
  return {
    read,
    warm: async () => {
      if (found || !pod) return;
      await find(pod).catch(() => undefined);
    },
  };
}
