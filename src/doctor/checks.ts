// The checks behind `config-sync doctor`: everything it asks the API, gathered into one plain
// report (formatted by src/doctor/format.ts). Each check that fails becomes a problem in the
// report instead of an exception, so one run shows everything wrong at once.
import type {
  V1Namespace,
  V1Pod,
  V1ReplicaSet,
  V1SelfSubjectAccessReview,
  V1SelfSubjectReview,
  VersionInfo,
} from '@kubernetes/client-node';
import { whoServes } from '../discover/node-pods.ts';
import { discoverTargets, referencedSources, type SourceRef } from '../discover/targets.ts';
import type { ConfigSyncError } from '../errors.ts';
import {
  controllerOf,
  podOrdinalOf,
  podOwnerStep,
  readWorkload,
  replicaSetOwnerStep,
} from '../heal/owner.ts';
import { restartHeldLine } from '../heal/planner.ts';
import { describeRequest } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { namespaceAbsentError, namespacePresence } from '../kube/namespace-presence.ts';
import { type AccessNeed, requiredAccess } from '../kube/permissions.ts';
import {
  REPLICA_SET,
  RESTARTABLE_KINDS,
  type WorkloadKind,
  workloadNamedByReplicaSet,
} from '../kube/resources.ts';
import type { Scope, Sourced } from '../kube/scope.ts';
import { podSelectionReport } from './pod-selection.ts';
import { type Problem, problemOf } from './problem.ts';
import { serverVersionFindings } from './server-version.ts';

export { type Problem, problemOf } from './problem.ts';

export interface CheckedNeed extends AccessNeed {
  readonly allowed: boolean;
  readonly reason?: string;
}

export interface DoctorReport {
  readonly scope?: Scope;
  readonly identity?: {
    readonly username: string;
    readonly groups: readonly string[];
    readonly extra: Readonly<Record<string, readonly string[]>>;
  };
  readonly serverVersion?: string;
  readonly pod?: Sourced<string>;
  readonly ownerChain: readonly string[];
  readonly sources: readonly SourceRef[];
  readonly notes: readonly string[];
  /** What the Pod's config-sync annotations change and leave out (config/pod-annotations.ts). */
  readonly selection?: readonly string[];
  readonly access: readonly CheckedNeed[];
  readonly problems: readonly Problem[];
}

export interface DoctorInput {
  readonly client: KubeClient;
  readonly namespace: Sourced<string> | undefined;
  readonly pod: Sourced<string> | undefined;
  readonly watched: readonly SourceRef[];
  /** Problems found before any request (scope disagreements the agent would refuse). */
  readonly preflight: readonly Problem[];
  readonly selfContainer: string;
  readonly containers: readonly string[];
}

/**
 * Steps:
 *  (1) identity: SelfSubjectReview; a 401 here means nothing else can work, so stop;
 *  (2) server version (what will not work on it: server-version.ts), and whether the namespace
 *      exists (where the identity may tell);
 *  (3) the agent's Pod (if named): its targets and its owner chain, walked as the agent walks
 *      it (heal/owner.ts: ReplicaSet -> Deployment or Rollout, or StatefulSet / DaemonSet), and
 *      a note where a restart of that workload would not replace the Pod now (a paused
 *      Deployment, OnDelete, a partition above its ordinal): drift would be told, not healed;
 *  (4) one SelfSubjectAccessReview per need for those targets.
 */
export async function runDoctorChecks(input: DoctorInput): Promise<DoctorReport> {
  const { client } = input;
  const scope = client.scope;
  const problems: Problem[] = [...input.preflight];
  const notes: string[] = [];
  const selection: string[] = [];
  const ownerChain: string[] = [];
  const namespace = input.namespace?.value;
  const base = { scope, ownerChain, notes, ...(input.pod ? { pod: input.pod } : {}) };

  // (1)
  let identity: DoctorReport['identity'];
  try {
    const review = await client.create<V1SelfSubjectReview>(
      { group: 'authentication.k8s.io', resource: 'selfsubjectreviews' },
      { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
    );
    const u = review.status?.userInfo ?? {};
    identity = { username: u.username ?? '', groups: u.groups ?? [], extra: u.extra ?? {} };
  } catch (error) {
    problems.push(problemOf(error));
    return { ...base, sources: [], access: [], problems };
  }

  // (2)
  let serverVersion: string | undefined;
  try {
    serverVersion = (await client.get<VersionInfo>({ path: '/version' })).gitVersion;
  } catch (error) {
    problems.push(problemOf(error));
  }
  if (serverVersion) {
    const { problem, note } = serverVersionFindings(serverVersion);
    if (problem) problems.push(problemOf(problem));
    if (note) notes.push(note);
  }

  // A namespace that does not exist answers every read in it with 404 and every access review
  // with what the ClusterRoles allow: name it as the one problem, and ask nothing of it.
  if (namespace && (await namespacePresence(client, namespace)) === 'absent')
    problems.push(problemOf(namespaceAbsentError(scope)));
  if (!namespace || problems.some((p) => p.code === 'CS_CONFIG_NAMESPACE_ABSENT')) {
    return {
      ...base,
      identity,
      ...(serverVersion ? { serverVersion } : {}),
      sources: [],
      access: [],
      problems,
    };
  }

  // A read that RBAC refuses is reported by the permission matrix (step 4) itself; here it only
  // means that what would have been learned from the object is unknown. Any other failure is a
  // problem of its own.
  const reportReadFailure = (error: unknown, what: string, consequence: string) => {
    if ((error as ConfigSyncError).code !== 'CS_API_FORBIDDEN') {
      problems.push(problemOf(error));
      return;
    }
    notes.push(
      `could not read ${what} (forbidden): ${consequence}, so the permissions below are incomplete; ` +
        'grant them (--fix) and run doctor again',
    );
  };

  // (3)
  const sources = new Map(input.watched.map((r) => [`${r.kind}/${r.name}`, r]));
  let replicaSet: string | undefined;
  let workload: { kind: WorkloadKind; name: string } | undefined;
  if (input.pod) {
    const podName = input.pod.value;
    try {
      const pod = await client.get<V1Pod>({ resource: 'pods', namespace, name: podName });
      const discovery = discoverTargets(pod, { self: input.selfContainer, containers: input.containers });
      // What the workload's annotations leave out is not checked, so its sources need no access.
      const selected = podSelectionReport(pod, discovery.targets);
      selection.push(...selected.lines);
      problems.push(...selected.problems);
      for (const ref of referencedSources(selected.targets)) sources.set(`${ref.kind}/${ref.name}`, ref);
      notes.push(...discovery.notes);
      // Who checks it: its sidecar, the node agent (opted in by the Pod or its namespace's
      // label), or nobody. The namespace is read for its label where the identity may.
      const labels = await client
        .get<V1Namespace>({ resource: 'namespaces', name: namespace })
        .then((ns) => ns.metadata?.labels ?? {})
        .catch(() => undefined);
      notes.push(`Pod ${podName}: ${whoServes(pod, labels)}`);
      // The chain as the owner references show it, and the workload as the agent finds it.
      const owner = controllerOf(pod.metadata);
      if (owner) ownerChain.push(`${owner.kind} ${owner.name}`);
      else notes.push(`Pod ${podName} has no controller: drift is reported, never healed`);
      let step = podOwnerStep(pod);
      if (step.type === 'replicaset') {
        const rsName = step.name;
        replicaSet = rsName;
        try {
          const rs = await client.get<V1ReplicaSet>({ ...REPLICA_SET, namespace, name: rsName });
          const top = controllerOf(rs.metadata);
          if (top) ownerChain.push(`${top.kind} ${top.name}`);
          step = replicaSetOwnerStep(rsName, rs.metadata);
        } catch (error) {
          // The owner can still be named for the matrix, from the ReplicaSet's name and the
          // hash label on the Pod.
          const inferred = workloadNamedByReplicaSet(rsName, pod.metadata?.labels);
          if (inferred) {
            workload = inferred;
            ownerChain.push(`${inferred.kind} ${inferred.name} (inferred from the ReplicaSet name)`);
          }
          reportReadFailure(error, `ReplicaSet ${rsName}`, 'its owner is not confirmed');
        }
      }
      if (step.type === 'workload') {
        workload = { kind: step.kind, name: step.name };
        const held = await restartHeld(client, namespace, workload, pod);
        if (held) notes.push(`drift would not be healed by a restart now: ${held}`);
      } else if (step.type === 'unsupported' && owner) {
        notes.push(
          `owner ${step.description} is not a ${RESTARTABLE_KINDS}: drift is reported, never healed`,
        );
      }
    } catch (error) {
      reportReadFailure(error, `Pod ${podName}`, 'its ConfigMaps, Secrets and owner are unknown');
    }
  } else {
    notes.push(
      "no Pod named (--pod or POD_NAME): checking only --watch objects and the agent's own-pod rights by kind",
    );
  }

  // (4)
  const needs = requiredAccess({
    namespace,
    ...(input.pod ? { podName: input.pod.value } : {}),
    sources: [...sources.values()],
    ...(replicaSet ? { replicaSet } : {}),
    ...(workload ? { workload } : {}),
  });
  const reviews = { group: 'authorization.k8s.io', resource: 'selfsubjectaccessreviews' };
  const access = await Promise.all(
    needs.map(async (need): Promise<CheckedNeed> => {
      try {
        const review = await client.create<V1SelfSubjectAccessReview>(reviews, {
          apiVersion: 'authorization.k8s.io/v1',
          kind: 'SelfSubjectAccessReview',
          spec: {
            resourceAttributes: {
              namespace: need.namespace,
              verb: need.verb,
              group: need.group,
              resource: need.resource,
              ...(need.subresource ? { subresource: need.subresource } : {}),
              ...(need.name ? { name: need.name } : {}),
            },
          },
        });
        const reason = review.status?.reason || review.status?.evaluationError;
        return { ...need, allowed: review.status?.allowed === true, ...(reason ? { reason } : {}) };
      } catch (error) {
        problems.push(problemOf(error));
        return { ...need, allowed: false, reason: 'could not be checked' };
      }
    }),
  );
  const missing = access.filter((a) => !a.allowed);
  if (missing.length > 0) {
    const first = missing[0] as CheckedNeed;
    const what = describeRequest({
      verb: first.verb,
      resource: first.subresource ? `${first.resource}/${first.subresource}` : first.resource,
      group: first.group,
      namespace: first.namespace,
      ...(first.name ? { name: first.name } : {}),
    });
    const more = missing.length > 1 ? ` (and ${missing.length - 1} more)` : '';
    problems.push({
      code: 'CS_DOCTOR_MISSING_PERMISSIONS',
      domain: 'permission',
      message: `${identity.username} may not ${what}${more}`,
      hint: `grant it with a Role and RoleBinding in namespace "${namespace}" (RBAC is per namespace: a Role elsewhere does not apply); "config-sync doctor --fix" prints them`,
    });
  }
  return {
    ...base,
    identity,
    ...(serverVersion ? { serverVersion } : {}),
    sources: [...sources.values()],
    ...(selection.length ? { selection } : {}),
    access,
    problems,
  };
}

/**
 * (3) Whether a restart of the workload would replace the Pod now (heal/planner.ts, steps 6b and
 * 6c: paused, OnDelete, a partition above its ordinal), read as the agent reads it. A workload
 * that cannot be read says nothing here: the permissions below show whether it may be.
 */
async function restartHeld(
  client: KubeClient,
  namespace: string,
  workload: { kind: WorkloadKind; name: string },
  pod: V1Pod,
): Promise<string | undefined> {
  try {
    const state = await readWorkload(client, namespace, workload.kind, workload.name);
    return state.type === 'workload' ? restartHeldLine(state.workload, podOrdinalOf(pod)) : undefined;
  } catch {
    return undefined;
  }
}
