// What the agent must be allowed to do for its targets, and the least-privilege Role that grants
// exactly that. Pure; `doctor` checks each need with a SelfSubjectAccessReview and prints the
// Role for what is missing.
//
// resourceNames are used wherever RBAC honours them and the name is stable: the referenced
// ConfigMaps and Secrets (get, and list/watch with a metadata.name field selector, which the API
// authorizes against resourceNames) and the owning workload. They are not used for the agent's
// own Pod or ReplicaSet, whose names change with every rollout, nor for `create events`, which
// cannot name an object that does not exist yet. Patching only its *own* Pod is enforced by the
// ValidatingAdmissionPolicy in deploy/sidecar instead (RBAC cannot express it).

import { byCodeUnit } from './names.ts';
import { REPLICA_SET, SOURCE_RESOURCE, type SourceRef, WORKLOADS, type WorkloadKind } from './resources.ts';

export type { WorkloadKind };

export interface AccessNeed {
  readonly verb: string;
  /** '' for the core group. */
  readonly group: string;
  readonly resource: string;
  readonly subresource?: string;
  /** Checked by name; the Role names it only when `pinName` is set. */
  readonly name?: string;
  readonly pinName: boolean;
  readonly namespace: string;
  readonly why: string;
}

export interface AccessContext {
  readonly namespace: string;
  readonly podName?: string;
  readonly sources: readonly SourceRef[];
  /** The ReplicaSet between a Deployment or Rollout and its Pods. */
  readonly replicaSet?: string;
  readonly workload?: { readonly kind: WorkloadKind; readonly name: string };
}

/**
 * The mark the admission policies find the agent by (deploy/sidecar/rbac/own-*-policy.yaml), in
 * its Role whatever ServiceAccount that Role is bound to: a rule for a resource that does not
 * exist, so it grants nothing. An identity allowed the mark's other verb, `unrestricted`, holds a
 * wildcard rule (an administrator) and is not held.
 */
export const AGENT_MARK = {
  verb: 'restricted',
  group: 'config-sync.io',
  resource: 'agents',
  why: 'be held by the admission policies to a restart and its own Pod (a mark: it grants nothing)',
} as const;

export function requiredAccess(ctx: AccessContext): AccessNeed[] {
  const { namespace } = ctx;
  const needs: AccessNeed[] = [];
  const need = (n: Omit<AccessNeed, 'namespace'>) => needs.push({ ...n, namespace });
  const pod = ctx.podName ? { name: ctx.podName } : {};

  need({
    verb: 'get',
    group: '',
    resource: 'pods',
    ...pod,
    pinName: false,
    why: 'read its own Pod (targets, owner, whether it is being deleted, when its app started)',
  });
  need({
    verb: 'patch',
    group: '',
    resource: 'pods',
    ...pod,
    pinName: false,
    why: 'record last-config-sync on its Pod',
  });
  need({
    verb: 'patch',
    group: '',
    resource: 'pods',
    subresource: 'status',
    ...pod,
    pinName: false,
    why: 'set the config-sync.io/InSync condition',
  });
  need({ verb: 'create', group: '', resource: 'events', pinName: false, why: 'emit Events on its Pod' });
  need({ ...AGENT_MARK, pinName: false, why: AGENT_MARK.why });
  for (const ref of ctx.sources) {
    const resource = SOURCE_RESOURCE[ref.kind];
    for (const verb of ['get', 'list', 'watch']) {
      need({
        verb,
        group: '',
        resource,
        name: ref.name,
        pinName: true,
        why: `compare ${ref.kind} ${ref.name}`,
      });
    }
  }
  if (ctx.replicaSet) {
    need({
      verb: 'get',
      group: REPLICA_SET.group,
      resource: REPLICA_SET.resource,
      name: ctx.replicaSet,
      pinName: false,
      why: 'find the workload that owns its ReplicaSet',
    });
  }
  if (ctx.workload) {
    const { group, resource } = WORKLOADS[ctx.workload.kind];
    for (const verb of ['get', 'patch']) {
      need({
        verb,
        group,
        resource,
        name: ctx.workload.name,
        pinName: true,
        why:
          verb === 'get'
            ? `read ${ctx.workload.kind} ${ctx.workload.name}`
            : `restart ${ctx.workload.kind} ${ctx.workload.name}`,
      });
    }
  }
  return needs;
}

export interface PolicyRule {
  readonly apiGroups: string[];
  readonly resources: string[];
  readonly verbs: string[];
  readonly resourceNames?: string[];
}

/**
 * Folds needs into Role rules: one rule per (group, resource, resourceNames) with the union of
 * verbs, in a stable order so the YAML is reviewable and diffable.
 */
export function rulesFor(needs: readonly AccessNeed[]): PolicyRule[] {
  const byKey = new Map<
    string,
    { group: string; resource: string; names: Set<string>; verbs: Set<string> }
  >();
  for (const n of needs) {
    const resource = n.subresource ? `${n.resource}/${n.subresource}` : n.resource;
    const pinned = n.pinName && n.name !== undefined;
    const key = `${n.group}|${resource}|${pinned}`;
    const entry = byKey.get(key) ?? {
      group: n.group,
      resource,
      names: new Set<string>(),
      verbs: new Set<string>(),
    };
    entry.verbs.add(n.verb);
    if (pinned && n.name) entry.names.add(n.name);
    byKey.set(key, entry);
  }
  const verbOrder = ['get', 'list', 'watch', 'create', 'patch', 'update', 'delete'];
  return [...byKey.values()]
    .sort((a, b) => byCodeUnit(`${a.group}/${a.resource}`, `${b.group}/${b.resource}`))
    .map((e) => ({
      apiGroups: [e.group],
      resources: [e.resource],
      verbs: [...e.verbs].sort((a, b) => verbOrder.indexOf(a) - verbOrder.indexOf(b)),
      ...(e.names.size ? { resourceNames: [...e.names].sort() } : {}),
    }));
}

export interface Subject {
  readonly kind: 'ServiceAccount' | 'User';
  readonly name: string;
  readonly namespace?: string;
}

/** `system:serviceaccount:<ns>:<name>` becomes a ServiceAccount subject; anything else a User. */
export function subjectFor(username: string): Subject {
  const m = username.match(/^system:serviceaccount:([^:]+):([^:]+)$/);
  if (m?.[1] && m[2]) return { kind: 'ServiceAccount', name: m[2], namespace: m[1] };
  return { kind: 'User', name: username };
}

/** A Role and RoleBinding granting `needs` to `subject`, in the needs' namespace. */
export function roleAndBinding(
  name: string,
  namespace: string,
  needs: readonly AccessNeed[],
  subject: Subject,
) {
  const role = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'Role',
    metadata: { name, namespace },
    rules: rulesFor(needs),
  };
  const binding = {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'RoleBinding',
    metadata: { name, namespace },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
    subjects: [
      subject.kind === 'ServiceAccount'
        ? { kind: 'ServiceAccount', name: subject.name, namespace: subject.namespace }
        : { apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: subject.name },
    ],
  };
  return [role, binding] as const;
}
