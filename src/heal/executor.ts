// Carries out a Plan: the restart patch and the Events. Decides nothing: a conflict is returned
// for the caller to re-read and re-plan (controller-runtime style), never retried blindly.

import { ANNOTATION } from '../kube/annotations.ts';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { type RestartMethod, WORKLOADS, workloadRef } from '../kube/resources.ts';
import type { Plan } from './planner.ts';
import { recentRestarts } from './policy.ts';

export type RestartOutcome = 'restarted' | 'conflict';

/**
 * The restart patch, by the kind's RestartMethod (kube/resources.ts):
 *  - template-annotations: the pod template's `kubectl.kubernetes.io/restartedAt` (what `kubectl
 *    rollout restart` writes, so rollout history and status understand it) and
 *    `config-sync.io/config-hash` (how siblings dedupe); the controller rolls the Pods;
 *  - restart-at: Argo Rollouts' `spec.restartAt`, with the same two annotations on the Rollout
 *    itself (its template is left alone: a changed template is a new revision, a full rollout).
 * The patch carries the resourceVersion the plan was made from: the API server refuses it with
 * 409 if the workload changed since, and the caller re-reads and re-decides.
 */
export function restartPatch(
  method: RestartMethod,
  resourceVersion: string,
  configHash: string,
  now: Date,
  history = '',
) {
  const annotations = {
    [ANNOTATION.restartedAt]: now.toISOString(),
    [ANNOTATION.configHash]: configHash,
    [ANNOTATION.restarts]: restartHistory(history, now),
  };
  if (method === 'restart-at') {
    return { metadata: { resourceVersion, annotations }, spec: { restartAt: now.toISOString() } };
  }
  return { metadata: { resourceVersion }, spec: { template: { metadata: { annotations } } } };
}

/** The restart history after a restart at `now`: the times within the last hour, then `now`. */
export function restartHistory(history: string, now: Date): string {
  return [...recentRestarts(history, now.getTime(), 3_600_000), now.toISOString()].join(' ');
}

export async function restartWorkload(
  client: KubeClient,
  namespace: string,
  plan: Plan,
  now: Date,
): Promise<RestartOutcome> {
  const w = plan.workload;
  if (plan.decision !== 'restart' || !w)
    throw new Error(`restartWorkload called with a ${plan.decision} plan`);
  const body = restartPatch(WORKLOADS[w.kind].restart, w.resourceVersion, plan.configHash, now, w.history);
  try {
    await client.patch(workloadRef(w.kind, namespace, w.name), body, 'merge');
    return 'restarted';
  } catch (error) {
    if (apiStatus(error) === 409) return 'conflict';
    throw error;
  }
}

/** Closed set of the Event reasons config-sync emits on its Pod. */
export type EventReason =
  | 'Drifted'
  | 'Healed'
  | 'Deduped'
  | 'HealFailed'
  | 'CircuitOpen'
  | 'SourceMissing'
  | 'InSync'
  | 'Reloaded'
  | 'ReloadFailed'
  | 'PolicyDenied';

export interface PodRef {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
}

/** A core/v1 Event on the agent's Pod. Messages carry paths and hash prefixes only. */
export async function emitEvent(
  client: KubeClient,
  pod: PodRef,
  reason: EventReason,
  message: string,
  type: 'Normal' | 'Warning',
  now: Date,
): Promise<void> {
  await client.create(
    { resource: 'events', namespace: pod.namespace },
    {
      metadata: { generateName: `${pod.name}.config-sync.`, namespace: pod.namespace },
      involvedObject: {
        apiVersion: 'v1',
        kind: 'Pod',
        name: pod.name,
        namespace: pod.namespace,
        uid: pod.uid,
      },
      reason,
      message: message.slice(0, 1024),
      type,
      source: { component: 'config-sync' },
      reportingComponent: 'config-sync.io/agent',
      reportingInstance: pod.name,
      firstTimestamp: now.toISOString(),
      lastTimestamp: now.toISOString(),
      count: 1,
    },
  );
}
