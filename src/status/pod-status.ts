// Writes the agent's verdict onto its own Pod: the `config-sync.io/InSync` condition (usable as
// a readiness gate) and the `config-sync.io/last-config-sync` annotation with the matched
// resourceVersions. The agent calls it on a transition and at a bounded heartbeat, not on every
// pass (status writes are API load on every pod).
import { CoreV1Api, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ANNOTATION } from '../heal/planner.ts';
import { explainApiError } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';

export const CONDITION_TYPE = 'config-sync.io/InSync';

export interface PodStatusUpdate {
  readonly inSync: boolean;
  readonly reason: string;
  readonly message: string;
  /** When the condition last changed status. */
  readonly lastTransitionTime: Date;
  /** Set when in sync: the time of this verified match and the versions matched. */
  readonly lastConfigSync?: Date;
  readonly matchedVersions?: string;
}

// Pod conditions merge by `type` under a strategic merge patch, so this never disturbs the
// conditions kubelet owns (Ready, ContainersReady, ...).
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export async function writePodStatus(
  client: KubeClient,
  namespace: string,
  pod: string,
  update: PodStatusUpdate,
): Promise<void> {
  const core = client.api(CoreV1Api);
  try {
    await core.patchNamespacedPodStatus(
      {
        name: pod,
        namespace,
        body: {
          status: {
            conditions: [
              {
                type: CONDITION_TYPE,
                status: update.inSync ? 'True' : 'False',
                reason: update.reason,
                message: update.message.slice(0, 1024),
                lastTransitionTime: update.lastTransitionTime.toISOString(),
                lastProbeTime: new Date().toISOString(),
              },
            ],
          },
        },
      },
      strategic,
    );
  } catch (error) {
    throw explainApiError(
      error,
      { verb: 'patch', resource: 'pods/status', namespace, name: pod },
      client.scope,
    );
  }
  if (update.lastConfigSync) {
    await annotatePod(client, namespace, pod, {
      [ANNOTATION.lastConfigSync]: update.lastConfigSync.toISOString(),
      [ANNOTATION.matchedVersions]: update.matchedVersions ?? '',
    });
  }
}

export async function annotatePod(
  client: KubeClient,
  namespace: string,
  pod: string,
  annotations: Record<string, string>,
): Promise<void> {
  try {
    await client
      .api(CoreV1Api)
      .patchNamespacedPod({ name: pod, namespace, body: { metadata: { annotations } } }, merge);
  } catch (error) {
    throw explainApiError(error, { verb: 'patch', resource: 'pods', namespace, name: pod }, client.scope);
  }
}
