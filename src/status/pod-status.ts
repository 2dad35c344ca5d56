// Writes the agent's verdict onto its own Pod: the `config-sync.io/InSync` condition (usable as
// a readiness gate) and the `config-sync.io/last-config-sync` annotation with the matched
// resourceVersions. The agent calls it on a transition and at a bounded heartbeat, not on every
// pass (status writes are API load on every pod).
import { ANNOTATION, CONDITION_TYPE } from '../kube/annotations.ts';
import type { KubeClient } from '../kube/client.ts';

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

// One strategic merge patch of pods/status carries both: the condition (Pod conditions merge by
// `type`, so this never disturbs the ones kubelet owns: Ready, ContainersReady, ...) and, when in
// sync, the annotations. The status subresource resets only the spec, deletionTimestamp and
// ownerReferences of what it is sent, so the annotations are kept (the own-Pod admission policy
// checks them on pods/status as on pods). Why one request: whoever waits for the condition
// (`kubectl wait`, a readiness gate, `config-sync status`) then finds the last-config-sync that
// goes with it in the same object version, and each verified match is one API write, not two
// (a reload was three Pod PATCHes and an Event; docs/benchmarks.md, 2026-12-06).
export async function writePodStatus(
  client: KubeClient,
  namespace: string,
  pod: string,
  update: PodStatusUpdate,
): Promise<void> {
  await client.patch(
    { resource: 'pods', namespace, name: pod, subresource: 'status' },
    {
      ...(update.lastConfigSync
        ? {
            metadata: {
              annotations: {
                [ANNOTATION.lastConfigSync]: update.lastConfigSync.toISOString(),
                [ANNOTATION.matchedVersions]: update.matchedVersions ?? '',
              },
            },
          }
        : {}),
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
    'strategic',
  );
}

export async function annotatePod(
  client: KubeClient,
  namespace: string,
  pod: string,
  annotations: Record<string, string>,
): Promise<void> {
  await client.patch({ resource: 'pods', namespace, name: pod }, { metadata: { annotations } }, 'merge');
}
