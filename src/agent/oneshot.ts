// One pass without watches, for `check` and `heal` (not the agent): read every source once,
// verify, find the owner and plan. Stateless: the grace window is measured from the API's own
// change time.
import { resolveOwner } from '../heal/owner.ts';
import type { OwnerState, Plan } from '../heal/planner.ts';
import { namespaceAbsentError, namespacePresence } from '../kube/namespace-presence.ts';
import { readSource } from '../read/source.ts';
import { readVolume } from '../read/volume.ts';
import { refKey, type SourceState } from '../verify/source.ts';
import type { Verdict } from '../verify/verdict.ts';
import { containerStarts, verifyPass } from './pass.ts';
import { planFor } from './pod-plan.ts';
import { gateRestart } from './policy-gate.ts';
import type { Runtime } from './runtime.ts';

export interface OneShotResult {
  readonly verdicts: readonly Verdict[];
  readonly plan: Plan;
  readonly sources: ReadonlyMap<string, SourceState>;
}

export async function readAllSources(rt: Runtime): Promise<Map<string, SourceState>> {
  const states = await Promise.all(rt.sources.map((ref) => readSource(rt.client, rt.namespace, ref)));
  return new Map(states.map((s, i) => [refKey(rt.sources[i] as (typeof rt.sources)[number]), s]));
}

export async function runOnce(rt: Runtime, now: number): Promise<OneShotResult> {
  const sources = await readAllSources(rt);
  const lookup = (ref: { kind: 'ConfigMap' | 'Secret'; name: string }) => sources.get(refKey(ref));
  const { verdicts } = verifyPass({
    targets: rt.targets,
    lookup,
    readVolume,
    volumePath: rt.volumePath,
    baselines: rt.baselines,
    // The app containers' starts, so a baseline recorded for the app's current start decides as
    // it does in the agent; no agent start, so the agent's copy stands for the app's otherwise.
    starts: { agent: undefined, byContainer: containerStarts(rt.pod, 0).byContainer },
    memory: new Map(),
    windows: rt.config.verify,
    fingerprint: rt.fingerprint,
    now,
  });
  // A source missing when no Pod was read (a Pod read proves its namespace): the namespace may
  // be the thing that is missing, and then no source is "gone" (kube/namespace-presence.ts).
  if (!rt.pod && verdicts.some((v) => v.reason === 'SourceMissing')) {
    if ((await namespacePresence(rt.client, rt.namespace)) === 'absent') throw namespaceAbsentError(rt.scope);
  }
  const needsOwner = verdicts.some((v) => v.state === 'Drifted' || v.state === 'Missing');
  const owner: OwnerState = needsOwner
    ? await resolveOwner(rt.client, rt.namespace, rt.pod)
    : { type: 'unsupported', description: 'not needed' };
  const plan = await gateRestart(rt, planFor(rt, verdicts, owner, lookup, now), owner, lookup, now);
  return { verdicts, plan, sources };
}
