// The heal planner's input as this Pod gives it, for the agent and the one-shot commands alike.
import type { V1Pod } from '@kubernetes/client-node';
import { type OwnerState, type Plan, planHeal } from '../heal/planner.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import { configVersion, type SourceLookup } from '../verify/expected.ts';
import type { Verdict } from '../verify/verdict.ts';
import type { Runtime } from './runtime.ts';

/** The label a StatefulSet's controller puts its Pod's ordinal in (Kubernetes 1.28 and later). */
const POD_INDEX_LABEL = 'apps.kubernetes.io/pod-index';

/**
 * A StatefulSet Pod's ordinal: its pod-index label, else the number its name ends in (a
 * StatefulSet names its Pods `<name>-<ordinal>`). Read only against a StatefulSet's partition.
 */
export function podOrdinalOf(pod: V1Pod | undefined): number | undefined {
  const text = pod?.metadata?.labels?.[POD_INDEX_LABEL] ?? pod?.metadata?.name?.match(/-(\d+)$/)?.[1];
  return text !== undefined && /^\d+$/.test(text) ? Number(text) : undefined;
}

/**
 * The planner's input as this Pod gives it: its own config hash, whether it is being deleted, its
 * ordinal (a StatefulSet's Pod), the sources' digest, the policy. `pod` is the Pod as last read
 * (the agent reads it again before it acts: a deletion comes long after the start).
 */
export function planFor(
  rt: Runtime,
  verdicts: readonly Verdict[],
  owner: OwnerState,
  lookup: SourceLookup,
  now: number,
  pod: V1Pod | undefined = rt.pod,
): Plan {
  return planHeal({
    verdicts,
    owner,
    podConfigHash: pod?.metadata?.annotations?.[ANNOTATION.configHash],
    podCreatedAt: pod?.metadata?.creationTimestamp
      ? new Date(pod.metadata.creationTimestamp).getTime()
      : undefined,
    podTerminating: Boolean(pod?.metadata?.deletionTimestamp),
    podOrdinal: podOrdinalOf(pod),
    expectedConfigHash: configVersion(lookup, rt.sources),
    policy: rt.config.heal,
    now,
  });
}
