// Reads the referenced ConfigMaps and Secrets from the API, once each, into SourceStates (digests
// only). In watch/, beside the watches that keep the same states current, not in kube/: it
// turns API objects into verify's SourceState, and kube/ stays the ground floor. Used by one-shot commands and for the agent's initial list; the agent then follows
// changes through watches (src/watch/api-watch.ts).
import type { V1ConfigMap, V1Secret } from '@kubernetes/client-node';
import type { ConfigSyncError } from '../errors.ts';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { SOURCE_RESOURCE, type SourceRef } from '../kube/resources.ts';
import { type SourceState, snapshotSource } from '../verify/source.ts';

export async function readSource(
  client: KubeClient,
  namespace: string,
  ref: SourceRef,
): Promise<SourceState> {
  try {
    const obj = await client.get<V1ConfigMap | V1Secret>({
      resource: SOURCE_RESOURCE[ref.kind],
      namespace,
      name: ref.name,
    });
    const snapshot = snapshotSource(ref, obj);
    return { state: 'present', snapshot };
  } catch (error) {
    if (apiStatus(error) === 404) return { state: 'absent', ref };
    const explained = error as ConfigSyncError;
    return { state: 'unreadable', ref, reason: `${explained.code}: ${explained.message}` };
  }
}
