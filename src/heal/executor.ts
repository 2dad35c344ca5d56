// Carries out a Plan: the restart patch and the Events. Decides nothing: a conflict is returned
// for the caller to re-read and re-plan (controller-runtime style), never retried blindly.

import { isDeepStrictEqual } from 'node:util';
import { ANNOTATION } from '../kube/annotations.ts';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { type RestartMethod, WORKLOADS, workloadRef } from '../kube/resources.ts';
import { restartAnnotationsOf, type WorkloadObject } from './owner.ts';
import type { Plan } from './planner.ts';
import { recentRestarts } from './policy.ts';

export type RestartOutcome = 'restarted' | 'conflict';

/** Where each restart method keeps the annotations a restart writes, as a JSON pointer. */
const ANNOTATIONS_AT: Record<RestartMethod, string> = {
  'template-annotations': '/spec/template/metadata/annotations',
  'restart-at': '/metadata/annotations',
};

export type JsonPatch = readonly {
  readonly op: 'test' | 'add';
  readonly path: string;
  readonly value: unknown;
}[];

/** A JSON pointer token (RFC 6901): `~` and `/` escaped, as in `config-sync.io~1config-hash`. */
const pointerToken = (key: string) => key.replaceAll('~', '~0').replaceAll('/', '~1');

/**
 * The restart patch, by the kind's RestartMethod (kube/resources.ts):
 *  - template-annotations: the pod template's `kubectl.kubernetes.io/restartedAt` (what `kubectl
 *    rollout restart` writes, so rollout history and status understand it),
 *    `config-sync.io/config-hash` (how siblings dedupe) and the restart history; the controller
 *    rolls the Pods;
 *  - restart-at: Argo Rollouts' `spec.restartAt`, with the same annotations on the Rollout
 *    itself (its template is left alone: a changed template is a new revision, a full rollout).
 *
 * A JSON patch (RFC 6902) whose first operation tests the annotations where it writes, exactly
 * as the plan read them (`null`: there were none; the API server's JSON patch treats a missing
 * member as null), so the API server applies it only while they are unchanged. That is the
 * dedupe between siblings: the first restart changes them, and every sibling that planned from
 * the same read is refused and re-reads. It is not conditional on the resourceVersion, which the
 * workload's controller bumps with every status update: during a rollout (the usual moment for a
 * config change) nearly every conditional restart was refused once or more, each refusal one more
 * read and patch before the restart. The annotations change only with a restart or an edit of
 * the template's annotations.
 */
export function restartPatch(
  method: RestartMethod,
  asRead: Readonly<Record<string, string>> | null,
  configHash: string,
  now: Date,
  history = '',
): JsonPatch {
  const at = ANNOTATIONS_AT[method];
  const annotations = {
    [ANNOTATION.restartedAt]: now.toISOString(),
    [ANNOTATION.configHash]: configHash,
    [ANNOTATION.restarts]: restartHistory(history, now),
  };
  const writes =
    asRead === null
      ? [{ op: 'add' as const, path: at, value: annotations }]
      : Object.entries(annotations).map(([key, value]) => ({
          op: 'add' as const,
          path: `${at}/${pointerToken(key)}`,
          value,
        }));
  const restartAt =
    method === 'restart-at'
      ? [{ op: 'add' as const, path: '/spec/restartAt', value: now.toISOString() }]
      : [];
  return [{ op: 'test', path: at, value: asRead }, ...writes, ...restartAt];
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
  const ref = workloadRef(w.kind, namespace, w.name);
  const body = restartPatch(WORKLOADS[w.kind].restart, w.annotations, plan.configHash, now, w.history);
  try {
    await client.patch(ref, body, 'json');
    return 'restarted';
  } catch (error) {
    const status = apiStatus(error);
    if (status === 409) return 'conflict';
    // A failed test is answered 422 with no detail, like any other patch the server cannot apply:
    // it is a conflict only if the annotations it tested are no longer as the plan read them.
    if (status === 422) {
      const current = restartAnnotationsOf(w.kind, await client.get<WorkloadObject>(ref)) ?? null;
      if (!isDeepStrictEqual(current, w.annotations)) return 'conflict';
    }
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
  | 'PolicyDenied'
  | 'WorkloadPaused'
  | 'UpdateOnDelete'
  | 'UpdatePartitioned'
  | 'NeverRestart'
  | 'InvalidAnnotation';

export interface PodRef {
  readonly name: string;
  readonly namespace: string;
  readonly uid: string;
}

/** Events this process has named: the last digits of the next name, unique within a millisecond. */
let eventsNamed = 0;

/**
 * An Event's name as client-go's recorder makes it, the Pod's name and the time in nanoseconds
 * in hex, with this process's count of Events in the nanoseconds a millisecond leaves over. It is
 * chosen before the first try, so that a try again after an answer that was lost finds the Event
 * made (409) rather than making it twice.
 */
export function eventName(podName: string, at: Date): string {
  eventsNamed = (eventsNamed + 1) % 1_000_000;
  return `${podName}.${(BigInt(at.getTime()) * 1_000_000n + BigInt(eventsNamed)).toString(16)}`;
}

/**
 * A core/v1 Event on the agent's Pod, named `name`; one of that name already made (an earlier
 * try whose answer was lost) counts as sent. Messages carry paths and hash prefixes only.
 */
export async function emitEvent(
  client: KubeClient,
  pod: PodRef,
  reason: EventReason,
  message: string,
  type: 'Normal' | 'Warning',
  now: Date,
  name: string = eventName(pod.name, now),
): Promise<void> {
  try {
    await client.create(
      { resource: 'events', namespace: pod.namespace },
      {
        metadata: { name, namespace: pod.namespace },
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
  } catch (error) {
    if (apiStatus(error) !== 409) throw error;
  }
}
