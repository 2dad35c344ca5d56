// Whether the namespace a command works in exists. The API answers a read of an object in a
// namespace that does not exist exactly as it answers a read of an object that does not exist
// (404, "configmaps "x" not found"), so `check -n typo` reported every ConfigMap as "gone from
// the API". Asked only after a 404, when it changes what to say: a read of the namespace itself
// (which many identities may not do: then it stays unknown and the first message stands).

import { ConfigSyncError } from '../errors.ts';
import { apiStatus } from './api-errors.ts';
import type { KubeClient } from './client.ts';
import type { Scope } from './scope.ts';

export type NamespacePresence = 'present' | 'absent' | 'unknown';

export async function namespacePresence(
  client: Pick<KubeClient, 'get'>,
  namespace: string,
): Promise<NamespacePresence> {
  try {
    await client.get({ resource: 'namespaces', name: namespace });
    return 'present';
  } catch (error) {
    return apiStatus(error) === 404 ? 'absent' : 'unknown';
  }
}

/** The namespace the scope names does not exist on its server: a configuration error (exit 2). */
export function namespaceAbsentError(scope: Pick<Scope, 'namespace' | 'cluster'>): ConfigSyncError {
  const namespace = scope.namespace?.value ?? '';
  const source = scope.namespace?.source ?? 'the scope';
  return new ConfigSyncError(
    'CS_CONFIG_NAMESPACE_ABSENT',
    `namespace "${namespace}" (from ${source}) does not exist on ${scope.cluster.value.server}`,
    {
      hint: 'name an existing namespace (kubectl get namespaces lists them), or the cluster it is on (--context, --kubeconfig)',
      details: { namespace, source },
    },
  );
}
