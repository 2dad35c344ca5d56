// Reads a referenced ConfigMap or Secret from the API once into a SourceState (digests only):
// the one-shot commands read every source this way, and the agent's source cache confirms a
// copy with it before acting (watch/source-cache.ts). Beside read/volume.ts, its counterpart on
// disk. Not in kube/: it turns API objects into verify's SourceState, and kube/ stays the ground
// floor.
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
