// The kinds config-sync reads or restarts, and the API resource behind each: one table per role,
// used for RBAC rules, SelfSubjectAccessReviews, request paths, owner lookup, the restart patch,
// inject and error messages alike. Adding a workload kind is a row in WORKLOADS (and a rule in
// the Role): nothing else has to be found by grep.
/** The sources config-sync compares files against. */
export type SourceKind = 'ConfigMap' | 'Secret';

export interface SourceRef {
  readonly kind: SourceKind;
  readonly name: string;
}

export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet' | 'Rollout';

/**
 * How a workload is restarted:
 *  - `template-annotations`: `kubectl rollout restart`'s way, a new annotation on the pod
 *    template (kubectl.kubernetes.io/restartedAt), with config-sync's config hash beside it; the
 *    new Pods inherit both;
 *  - `restart-at`: Argo Rollouts' `spec.restartAt`, which replaces the Pods without a new
 *    revision (a changed template would start a whole canary or blue-green rollout); the two
 *    annotations go on the Rollout's own metadata instead, and its Pods do not carry them.
 */
export type RestartMethod = 'template-annotations' | 'restart-at';

/**
 * What, in the object, can make a change of its pod template replace none of its Pods now
 * (heal/owner.ts reads it; the planner says so instead of calling the drift healed or deduped,
 * heal/planner.ts steps 6b, 6c and 8):
 *  - `paused`: spec.paused, a Deployment paused with `kubectl rollout pause`; its controller
 *    rolls nothing out until it is resumed, and kubectl refuses to restart it ("can't restart
 *    paused deployment (run rollout resume first)", kubectl's objectrestarter.go);
 *  - `on-delete`: spec.updateStrategy.type OnDelete, a StatefulSet or DaemonSet whose controller
 *    replaces a Pod only when someone deletes it.
 * A Rollout has none: Argo Rollouts' restart (spec.restartAt) deletes its Pods one by one
 * whether or not it is paused (rollout/restart.go).
 */
export type RolloutGate = 'paused' | 'on-delete';

export interface WorkloadType {
  readonly kind: WorkloadKind;
  readonly group: string;
  readonly version: string;
  /** Plural resource. */
  readonly resource: string;
  /** Its Pods are owned by a ReplicaSet it owns, not by it directly. */
  readonly viaReplicaSet: boolean;
  /**
   * For a kind reached through a ReplicaSet: the label its controller puts on the Pods, whose
   * value is the hash the ReplicaSet's name ends in (`<workload>-<hash>`).
   */
  readonly podTemplateHashLabel?: string;
  /** Where its pod template is in the object (every kind here: spec.template). */
  readonly podTemplatePath: readonly string[];
  readonly restart: RestartMethod;
  readonly rolloutGate?: RolloutGate;
  /**
   * Its rolling update can leave the Pods below an ordinal alone (a StatefulSet's
   * spec.updateStrategy.rollingUpdate.partition, for staged rollouts): a restart replaces only
   * the Pods of that ordinal and above.
   */
  readonly partitioned?: boolean;
}

export const WORKLOADS: Readonly<Record<WorkloadKind, WorkloadType>> = {
  Deployment: {
    kind: 'Deployment',
    group: 'apps',
    version: 'v1',
    resource: 'deployments',
    viaReplicaSet: true,
    podTemplateHashLabel: 'pod-template-hash',
    podTemplatePath: ['spec', 'template'],
    restart: 'template-annotations',
    rolloutGate: 'paused',
  },
  StatefulSet: {
    kind: 'StatefulSet',
    group: 'apps',
    version: 'v1',
    resource: 'statefulsets',
    viaReplicaSet: false,
    podTemplatePath: ['spec', 'template'],
    restart: 'template-annotations',
    rolloutGate: 'on-delete',
    partitioned: true,
  },
  DaemonSet: {
    kind: 'DaemonSet',
    group: 'apps',
    version: 'v1',
    resource: 'daemonsets',
    viaReplicaSet: false,
    podTemplatePath: ['spec', 'template'],
    restart: 'template-annotations',
    rolloutGate: 'on-delete',
  },
  Rollout: {
    kind: 'Rollout',
    group: 'argoproj.io',
    version: 'v1alpha1',
    resource: 'rollouts',
    viaReplicaSet: true,
    podTemplateHashLabel: 'rollouts-pod-template-hash',
    podTemplatePath: ['spec', 'template'],
    restart: 'restart-at',
  },
};

/** The ReplicaSet between a Deployment or Rollout and its Pods. */
export const REPLICA_SET = {
  group: 'apps',
  version: 'v1',
  resource: 'replicasets',
} as const satisfies ResourceRef;

/**
 * The workload kind an object or owner reference names (`apiVersion` and `kind`), if config-sync
 * restarts it. A manifest with no apiVersion (inject's input may lack one) is matched by kind.
 */
export function workloadType(
  apiVersion: string | undefined,
  kind: string | undefined,
): WorkloadType | undefined {
  const group =
    apiVersion === undefined ? undefined : apiVersion.includes('/') ? apiVersion.split('/')[0] : '';
  return Object.values(WORKLOADS).find((w) => w.kind === kind && (group === undefined || w.group === group));
}

/**
 * The workload that owns a ReplicaSet, named without reading it: the Deployment controller (and
 * Argo Rollouts') names a ReplicaSet `<workload>-<hash>` and labels its Pods with the hash. For
 * what is shown (the fleet view; doctor when the ReplicaSet cannot be read), never for what is
 * restarted: a name is no proof of ownership.
 */
export function workloadNamedByReplicaSet(
  replicaSet: string,
  podLabels: Readonly<Record<string, string>> | undefined,
): { readonly kind: WorkloadKind; readonly name: string } | undefined {
  for (const w of Object.values(WORKLOADS)) {
    const hash = w.podTemplateHashLabel && podLabels?.[w.podTemplateHashLabel];
    if (hash && replicaSet.endsWith(`-${hash}`))
      return { kind: w.kind, name: replicaSet.slice(0, -hash.length - 1) };
  }
  return undefined;
}

/** "a Deployment, StatefulSet, DaemonSet or Rollout": the kinds config-sync restarts, for messages. */
export const RESTARTABLE_KINDS = (() => {
  const kinds = Object.keys(WORKLOADS);
  return `${kinds.slice(0, -1).join(', ')} or ${kinds.at(-1)}`;
})();

/** The REST reference of a workload object. */
export function workloadRef(kind: WorkloadKind, namespace: string, name: string): ResourceRef {
  const w = WORKLOADS[kind];
  return { group: w.group, version: w.version, resource: w.resource, namespace, name };
}

export const SOURCE_RESOURCE: Readonly<Record<SourceKind, string>> = {
  ConfigMap: 'configmaps',
  Secret: 'secrets',
};

export interface ResourceRef {
  /** API group; '' (or absent) for core. */
  readonly group?: string;
  /** API version; v1 unless given. */
  readonly version?: string;
  /** Plural resource. */
  readonly resource: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
}

/** The REST path of a resource, a collection or an object: `/apis/apps/v1/namespaces/x/deployments/y`. */
export function resourcePath(ref: ResourceRef): string {
  const version = ref.version ?? 'v1';
  const parts = [ref.group ? `/apis/${ref.group}/${version}` : `/api/${version}`];
  if (ref.namespace !== undefined) parts.push('namespaces', encodeURIComponent(ref.namespace));
  parts.push(ref.resource);
  if (ref.name !== undefined) parts.push(encodeURIComponent(ref.name));
  if (ref.subresource !== undefined) parts.push(ref.subresource);
  return parts.join('/');
}
