// The heal planner's input as this Pod gives it, for the agent and the one-shot commands alike.
import { type OwnerState, type Plan, planHeal } from '../heal/planner.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import { configVersion, type SourceLookup } from '../verify/expected.ts';
import type { Verdict } from '../verify/verdict.ts';
import type { Runtime } from './runtime.ts';

/** The planner's input as this Pod gives it: its own config hash, the sources' digest, the policy. */
export function planFor(
  rt: Runtime,
  verdicts: readonly Verdict[],
  owner: OwnerState,
  lookup: SourceLookup,
  now: number,
): Plan {
  return planHeal({
    verdicts,
    owner,
    podConfigHash: rt.pod?.metadata?.annotations?.[ANNOTATION.configHash],
    podCreatedAt: rt.pod?.metadata?.creationTimestamp
      ? new Date(rt.pod.metadata.creationTimestamp).getTime()
      : undefined,
    expectedConfigHash: configVersion(lookup, rt.sources),
    policy: rt.config.heal,
    now,
  });
}
