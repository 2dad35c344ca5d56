// Drift is an accusation that leads to a restart, so before it stands, the pass that made it is
// checked against fresher reads, and decided again where they differ.
//
// Steps:
//  (1) no target drifted: nothing to confirm;
//  (2) read, all at once: every source behind a drifted target with a quorum read (which corrects
//      a stale cached copy), the Pod's container starts where a drifted target depends on them
//      (env and subPath targets), and the owning workload. A restart needs the workload, and
//      reading it after the confirmation was one more round trip before the restart. The Pod is
//      not read for the plan here: only a restart needs its deletion, and the heal actor reads it
//      then (most replicas of a drift find a sibling's restart made, and need no Pod read);
//  (3) decide again if a read changed anything: a copy corrected, a source the API could not
//      confirm (Unknown for this pass), a container start, or a cached state the pass used
//      (`seen`) replaced since. A view shared with other Pods (the node agent's) may be
//      corrected by another Pod's confirmation first, and this one then corrects nothing:
//      deciding on the stale pass was a false restart, before.
import type { V1Pod } from '@kubernetes/client-node';
import { referencedSources } from '../discover/targets.ts';
import type { OwnerState } from '../heal/planner.ts';
import type { SourceLookup } from '../verify/expected.ts';
import { refKey } from '../verify/source.ts';
import { targetId } from '../verify/verdict.ts';
import type { ContainerStartsTracker } from './container-starts.ts';
import { isDrift, type PassResult, readsContainerStarts } from './pass.ts';
import type { SourceView } from './reconciler.ts';
import type { Runtime } from './runtime.ts';

export interface ConfirmDeps {
  readonly rt: Runtime;
  readonly view: SourceView;
  readonly currentOwner: () => Promise<OwnerState>;
  readonly readPod: () => Promise<V1Pod | undefined>;
  readonly starts: ContainerStartsTracker;
  /** The pass again, on these sources. */
  readonly runPass: (sources: SourceLookup, now: number) => PassResult;
}

export interface ConfirmedPass {
  readonly pass: PassResult;
  /** The owning workload, read beside the confirmation (for the heal actor). */
  readonly owner?: Promise<OwnerState>;
  /** The Pod, where its container starts were read again. */
  readonly pod?: Promise<V1Pod | undefined>;
  /** A source the API could not confirm: asked about again soon. */
  readonly unconfirmed?: boolean;
}

export async function confirmDrift(
  deps: ConfirmDeps,
  pass: PassResult,
  now: number,
  seen: readonly unknown[],
): Promise<ConfirmedPass> {
  const { rt, view } = deps;
  // (1)
  const drifted = new Set(pass.verdicts.filter(isDrift).map((v) => v.target));
  if (drifted.size === 0) return { pass };
  // (2)
  const driftedTargets = rt.targets.filter((t) => drifted.has(targetId(t)));
  const owner = deps.currentOwner();
  owner.catch(() => {}); // act() reports a failed read; unawaited when the drift goes away
  const pod = driftedTargets.some((t) => readsContainerStarts(t, rt.seesAppMounts))
    ? deps.readPod()
    : undefined;
  const [{ corrected, unconfirmed }, restarted] = await Promise.all([
    view.confirm(referencedSources(driftedTargets)),
    pod ? pod.then((p) => deps.starts.refresh(p)) : false,
  ]);
  // (3)
  const replaced = rt.sources.some((ref, i) => view.lookup(ref) !== seen[i]);
  const withPod = pod ? { pod } : {};
  if (!corrected && !replaced && !restarted && unconfirmed.size === 0) return { pass, owner, ...withPod };
  return {
    pass: deps.runPass((ref) => unconfirmed.get(refKey(ref)) ?? view.lookup(ref), now),
    owner,
    ...withPod,
    unconfirmed: unconfirmed.size > 0,
  };
}
