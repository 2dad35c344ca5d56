// Reads the referenced ConfigMaps and Secrets from the API, once each, into SourceStates (digests
// only). Used by one-shot commands and for the agent's initial list; the agent then follows
// changes through watches (src/watch/api-watch.ts).
import { CoreV1Api } from '@kubernetes/client-node';
import type { SourceRef } from '../discover/targets.ts';
import { type SourceState, snapshotSource } from '../verify/source.ts';
import { explainApiError } from './api-errors.ts';
import type { KubeClient } from './client.ts';
import { SOURCE_RESOURCE } from './resources.ts';

export async function readSource(
  client: KubeClient,
  namespace: string,
  ref: SourceRef,
): Promise<SourceState> {
  const core = client.api(CoreV1Api);
  try {
    const obj =
      ref.kind === 'ConfigMap'
        ? await core.readNamespacedConfigMap({ name: ref.name, namespace })
        : await core.readNamespacedSecret({ name: ref.name, namespace });
    const snapshot = snapshotSource(ref, obj);
    return { state: 'present', snapshot };
  } catch (error) {
    if ((error as { code?: number }).code === 404) return { state: 'absent', ref };
    const resource = SOURCE_RESOURCE[ref.kind];
    const explained = explainApiError(
      error,
      { verb: 'get', resource, namespace, name: ref.name },
      client.scope,
    );
    return { state: 'unreadable', ref, reason: `${explained.code}: ${explained.message}` };
  }
}
