// The heal planner's input as this Pod gives it, for the agent and the one-shot commands alike.
import type { V1Pod } from '@kubernetes/client-node';
import { neverRestartTargets } from '../heal/never-restart.ts';
import { podOrdinalOf } from '../heal/owner.ts';
import { type OwnerState, type Plan, planHeal } from '../heal/planner.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import { configVersion, type SourceLookup } from '../verify/expected.ts';
import type { Verdict } from '../verify/verdict.ts';
import type { Runtime } from './runtime.ts';

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
    neverRestart: neverRestartTargets(rt.targets, verdicts, lookup),
    policy: rt.config.heal,
    now,
  });
}
