// Finds the workload that owns a Pod: Pod -> ReplicaSet -> Deployment, or a StatefulSet or
// DaemonSet directly. Anything else (a Job, a bare Pod, a custom controller) is reported and
// never touched.
import type {
  V1DaemonSet,
  V1Deployment,
  V1ObjectMeta,
  V1OwnerReference,
  V1Pod,
  V1ReplicaSet,
  V1StatefulSet,
} from '@kubernetes/client-node';
import { explainApiError } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { resourcePath, WORKLOAD_RESOURCE } from '../kube/resources.ts';
import type { OwnerState, WorkloadKind } from './planner.ts';

/** The owner reference marked as controller, if any. */
export function controllerOf(meta: V1ObjectMeta | undefined): V1OwnerReference | undefined {
  return meta?.ownerReferences?.find((r) => r.controller);
}

export async function readWorkload(
  client: KubeClient,
  namespace: string,
  kind: WorkloadKind,
  name: string,
): Promise<OwnerState> {
  const resource = WORKLOAD_RESOURCE[kind];
  try {
    const obj = await client.get<V1Deployment | V1StatefulSet | V1DaemonSet>(
      resourcePath({ group: 'apps', resource, namespace, name }),
    );
    return {
      type: 'workload',
      workload: {
        kind,
        name,
        resourceVersion: obj.metadata?.resourceVersion ?? '',
        templateAnnotations: obj.spec?.template.metadata?.annotations ?? {},
      },
    };
  } catch (error) {
    throw explainApiError(error, { verb: 'get', resource, group: 'apps', namespace, name }, client.scope);
  }
}

/** The owning workload's kind and name, reading the ReplicaSet between a Deployment and its Pods. */
export async function findOwner(
  client: KubeClient,
  namespace: string,
  pod: V1Pod,
): Promise<{ kind: WorkloadKind; name: string } | { unsupported: string }> {
  const owner = controllerOf(pod.metadata);
  if (!owner) return { unsupported: `Pod ${pod.metadata?.name} (no controller)` };
  if (owner.kind === 'StatefulSet' || owner.kind === 'DaemonSet')
    return { kind: owner.kind, name: owner.name };
  if (owner.kind !== 'ReplicaSet') return { unsupported: `${owner.kind} ${owner.name}` };
  let rsMeta: V1ObjectMeta | undefined;
  try {
    rsMeta = (
      await client.get<V1ReplicaSet>(
        resourcePath({ group: 'apps', resource: 'replicasets', namespace, name: owner.name }),
      )
    ).metadata;
  } catch (error) {
    throw explainApiError(
      error,
      { verb: 'get', resource: 'replicasets', group: 'apps', namespace, name: owner.name },
      client.scope,
    );
  }
  const top = controllerOf(rsMeta);
  if (top?.kind === 'Deployment') return { kind: 'Deployment', name: top.name };
  return {
    unsupported: `ReplicaSet ${owner.name}${top ? ` (owned by ${top.kind} ${top.name})` : ' (no Deployment)'}`,
  };
}
