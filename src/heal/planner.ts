// Decides what to do about the verdicts of one pod: nothing, restart its workload once, record
// that a sibling already did, or alert. Pure: the executor performs the plan, and re-plans after
// re-reading when the workload changed under it.
import type { Verdict } from '../verify/verdict.ts';

export type HealMode = 'restart' | 'alert-only';

import { ANNOTATION } from '../kube/annotations.ts';
import { RESTARTABLE_KINDS, type RolloutGate, WORKLOADS, type WorkloadKind } from '../kube/resources.ts';
import type { WorkloadHealth } from './policy.ts';

export type { WorkloadKind };

export interface WorkloadState {
  readonly kind: WorkloadKind;
  readonly name: string;
  readonly resourceVersion: string;
  /**
   * The annotations a restart writes (config hash, restartedAt), where its kind keeps them: the
   * pod template's, or the object's own for a kind restarted through spec.restartAt; null when
   * the object has no annotations there at all. The restart patch tests them as read.
   */
  readonly restartAnnotations: Readonly<Record<string, string>> | null;
  /** The workload's own labels (the policy gate's input). */
  readonly labels?: Readonly<Record<string, string>>;
  /** Its rollout state, from its status (the policy gate's --only-when-settled). */
  readonly health?: WorkloadHealth;
  /**
   * Set when a change of its pod template replaces none of its Pods now: paused (until it is
   * resumed), or updating only the Pods someone deletes (owner.ts, rolloutHeldBy).
   */
  readonly rolloutHeld?: RolloutGate;
  /**
   * A StatefulSet's rolling update partition, where above 0: a restart replaces only its Pods of
   * that ordinal and above (owner.ts, updatePartitionOf).
   */
  readonly updatePartition?: number;
  /**
   * Set when the Pod being planned for was made from an older pod template than the workload's
   * current one: a rollout to that template replaces it (owner.ts, supersededRevisions). The
   * revisions: a Deployment's numbers, a StatefulSet's revision names.
   */
  readonly podSuperseded?: {
    readonly podRevision: string;
    readonly revision: string;
    /** The Pod's revision as cached, not read again: a plan that rests on it reads it first. */
    readonly cached?: true;
  };
}

/** Why a restart of the workload would not replace this Pod (steps 6b, 6c). */
type RolloutHold =
  | { readonly by: RolloutGate }
  | { readonly by: 'partition'; readonly partition: number; readonly ordinal: number };

export type OwnerState =
  | { readonly type: 'workload'; readonly workload: WorkloadState }
  | { readonly type: 'unsupported'; readonly description: string };

export interface HealPolicy {
  readonly mode: HealMode;
  readonly minRestartIntervalMs: number;
  /** Where the mode came from, where not the agent's --on-drift: a Pod's annotation, or why. */
  readonly modeFrom?: string;
}

export interface PlanInput {
  readonly verdicts: readonly Verdict[];
  readonly owner: OwnerState;
  /** The pod's own config hash annotation, inherited from the template it was created from. */
  readonly podConfigHash: string | undefined;
  /** When the pod was created (ms): for a kind whose Pods do not inherit the config hash. */
  readonly podCreatedAt?: number | undefined;
  /** The pod is being deleted (its deletionTimestamp is set), as last read. */
  readonly podTerminating?: boolean;
  /** A StatefulSet pod's ordinal (owner.ts, podOrdinalOf), for its workload's update partition. */
  readonly podOrdinal?: number | undefined;
  /** The digest of every source as the API has it now. */
  readonly expectedConfigHash: string;
  /**
   * Drifted targets whose drift comes only from sources that say never restart for them
   * (never-restart.ts): target id -> the sources' lines.
   */
  readonly neverRestart?: ReadonlyMap<string, readonly string[]>;
  readonly policy: HealPolicy;
  readonly now: number;
}

/** Closed set: Event reasons, log fields, the `action` label of config_sync_heal_total. */
export type Decision = 'none' | 'restart' | 'deduped' | 'alert';
export type AlertReason =
  | 'SourceMissing'
  | 'CircuitOpen'
  | 'UnsupportedOwner'
  | 'PodTerminating'
  | 'AlertOnly'
  | 'RateLimited'
  | 'PolicyDenied'
  | 'WorkloadPaused'
  | 'UpdateOnDelete'
  | 'UpdatePartitioned'
  | 'NeverRestart';

export interface Plan {
  readonly decision: Decision;
  readonly alert?: AlertReason;
  readonly workload?: {
    readonly kind: WorkloadKind;
    readonly name: string;
    readonly resourceVersion: string;
    /** The restart history annotation as read (ANNOTATION.restarts), when there is one. */
    readonly history?: string;
    /**
     * The annotations where the restart writes them, exactly as read (null: there were none).
     * The restart patch applies only while they are unchanged (heal/executor.ts).
     */
    readonly annotations: Readonly<Record<string, string>> | null;
  };
  readonly configHash: string;
  /** Every line says why; printed by heal --dry-run and logged. */
  readonly reasons: readonly string[];
  /** For RateLimited: when a restart becomes possible. */
  readonly retryAt?: number;
  /**
   * A restart of a paused Deployment (step 8): the patch is recorded, and rolls out only when the
   * Deployment is resumed. The line that says so, for the report and the InSync condition.
   */
  readonly paused?: string;
  /**
   * Refused because the policy server could not decide (unreachable, too slow, a malformed
   * answer) under --policy-failure closed: a failure, not a decision, so it is asked again soon
   * (agent/retry.ts) rather than at the next resync.
   */
  readonly undecided?: true;
  /**
   * Deduped because a rollout of a newer pod template than this Pod's replaces it (step 6d), not
   * because a sibling restarted the workload: the plan's heading and log line say which.
   */
  readonly rollingOut?: true;
  readonly drifted: readonly Verdict[];
}

/**
 * Steps:
 *  (1) the drifted targets: Drifted, or Missing because files are missing;
 *  (2) a source gone from the API (SourceMissing): alert, never restart, even if others drift:
 *      new pods could not mount it, so a restart would break a working pod;
 *  (3) nothing drifted: nothing to do (InSync, Propagating and Unknown wait);
 *  (3b) this pod is being deleted: alert, never restart. Its files stop mattering when it is
 *      gone, and the pods that replace it mount the sources afresh and judge for themselves.
 *      A restart from here would come from a pod of a rollout already under way (the old pods
 *      of a template change, whose agents outlive their apps as native sidecars do) or of a
 *      scale-down, and would start a second rollout nobody needs;
 *  (4) an owner config-sync does not restart (kube/resources.ts, WORKLOADS): alert, never touch it;
 *  (5) mode alert-only: alert;
 *  (5b) every drifted target drifts only in sources that say never restart for them
 *      (config-sync.io/restart=never): alert (NeverRestart). Where another target drifts too,
 *      the restart it calls for goes ahead, and heals both;
 *  (6) the workload already carries the expected config hash: if this pod was created by that
 *      restart, the restart did not heal: open the circuit (alert, no second restart); otherwise
 *      a sibling restarted it already: deduped, saying how far its rollout is, or that its
 *      controller gave up on it (a second restart would not mend that either). Unless the
 *      restart does not replace this Pod (6b: paused, OnDelete, a partition above its ordinal):
 *      then no new Pod is on its way, and saying so would hide the drift: alert, with what would
 *      let it through. A pod was created
 *      by the restart when it carries the hash (inherited from the template), or, for a kind
 *      whose Pods do not inherit it (spec.restartAt), when it was created in the second of the
 *      restart or later;
 *  (6c) a restart of the workload would never replace this Pod: alert (UpdateOnDelete,
 *      UpdatePartitioned), never restart. A restart would change the template and leave this
 *      Pod as it is: the drift would stay, reported as healed. OnDelete: only deleting this Pod
 *      brings one with the current config. A StatefulSet's partition above this Pod's ordinal (a
 *      staged rollout): its Pods of the partition's ordinal and above are replaced, and their
 *      own agents restart it for themselves. A paused Deployment is not among these: see (8);
 *  (6d) the Pod was made from an older pod template than the workload's current one, and
 *      nothing holds the rollout (6b): that rollout is replacing it, and the Pods it makes mount
 *      the sources afresh: deduped. A restart from here would start a second rollout over the
 *      first (a deploy that changes the image and the config at once: the old Pods' subPath or
 *      env targets drift within the debounce, long before the new Pods replace them). A Pod of
 *      the current template made before the change still drifts, and restarts it for itself.
 *      (Where the newer template is a sibling's restart for this config, (6) has said so.)
 *  (7) a restart of this workload less than the minimum interval ago: wait (RateLimited);
 *  (8) restart, with a patch the API server applies only while the restart annotations are as
 *      read (executor.ts): the replica that restarts first changes them, and the others, which
 *      planned from the same read, are refused, read again and dedupe at (6). A paused
 *      Deployment is restarted too, and the plan says that the restart rolls out only when it is
 *      resumed (`paused`; told as WorkloadPaused, never as Healed). Template changes made while a
 *      Deployment is paused wait for its resume, which then rolls them out at once: recorded
 *      now, the restart joins the one rollout the resume brings. Left for the resume instead,
 *      it would start a second rollout a pass later, when the resume brought changes of its
 *      own. (kubectl refuses to restart a paused Deployment, since it restarts nothing now.)
 */
export function planHeal(input: PlanInput): Plan {
  const { verdicts, owner, policy, now, expectedConfigHash: configHash } = input;
  // (1)
  const drifted = verdicts.filter(
    (v) => v.state === 'Drifted' || (v.state === 'Missing' && v.reason === 'FileMissing'),
  );
  const base = { configHash, drifted };
  const lines = (vs: readonly Verdict[]) => vs.map((v) => `${v.target}: ${v.reason}: ${v.message}`);

  // (2)
  const missing = verdicts.filter((v) => v.reason === 'SourceMissing');
  if (missing.length > 0) {
    return {
      ...base,
      decision: 'alert',
      alert: 'SourceMissing',
      reasons: [
        ...lines(missing),
        'not restarting: new pods could not mount a source that is gone; restore it or make it optional',
      ],
    };
  }
  // (3)
  if (drifted.length === 0) {
    const waiting = verdicts.filter((v) => v.state !== 'InSync');
    return {
      ...base,
      decision: 'none',
      reasons: waiting.length ? lines(waiting) : ['every target matches the API'],
    };
  }
  const why = lines(drifted);
  // (3b)
  if (input.podTerminating) {
    return {
      ...base,
      decision: 'alert',
      alert: 'PodTerminating',
      reasons: [
        ...why,
        'not restarting: this pod is being deleted; the pods that replace it mount the sources afresh',
      ],
    };
  }
  // (4)
  if (owner.type === 'unsupported') {
    return {
      ...base,
      decision: 'alert',
      alert: 'UnsupportedOwner',
      reasons: [...why, `not restarting: ${owner.description} is not a ${RESTARTABLE_KINDS}`],
    };
  }
  const w = owner.workload;
  const kept = w.restartAnnotations ?? {};
  const history = kept[ANNOTATION.restarts];
  const workload = {
    kind: w.kind,
    name: w.name,
    resourceVersion: w.resourceVersion,
    ...(history === undefined ? {} : { history }),
    annotations: w.restartAnnotations,
  };
  // (5)
  if (policy.mode === 'alert-only') {
    return {
      ...base,
      workload,
      decision: 'alert',
      alert: 'AlertOnly',
      reasons: [...why, `not restarting: ${policy.modeFrom ?? '--on-drift alert-only'}`],
    };
  }
  // (5b)
  const never = input.neverRestart;
  if (never && drifted.every((v) => never.has(v.target))) {
    const sources = [...new Set(drifted.flatMap((v) => never.get(v.target) ?? []))];
    return {
      ...base,
      workload,
      decision: 'alert',
      alert: 'NeverRestart',
      reasons: [
        ...why,
        `not restarting: ${sources.join('; ')}; the drift is reported, and healed when its Pods are replaced for another reason`,
      ],
    };
  }
  // (6b), (6c), (6d): whether anything holds a rollout back from this Pod.
  const hold = rolloutHoldOf(w, input.podOrdinal);
  const heldPlan = (held: RolloutHold, line: string): Plan => ({
    ...base,
    workload,
    decision: 'alert',
    alert: HOLD_ALERTS[held.by],
    reasons: [...why, line],
  });
  // (6)
  const last = Date.parse(kept[ANNOTATION.restartedAt] ?? '');
  const lastHash = kept[ANNOTATION.configHash];
  if (lastHash === configHash) {
    const createdByRestart =
      input.podConfigHash === configHash ||
      (WORKLOADS[w.kind].restart === 'restart-at' &&
        input.podCreatedAt !== undefined &&
        !Number.isNaN(last) &&
        input.podCreatedAt >= Math.floor(last / 1000) * 1000);
    if (createdByRestart) {
      return {
        ...base,
        workload,
        decision: 'alert',
        alert: 'CircuitOpen',
        reasons: [
          ...why,
          `not restarting again: this pod was created by the restart for config ${configHash} and still drifts; a restart does not heal this (check the mount and kubelet)`,
        ],
      };
    }
    // (6b)
    if (hold) return heldPlan(hold, heldAfterRestartLine(w, hold, configHash));
    return {
      ...base,
      workload,
      decision: 'deduped',
      reasons: [
        ...why,
        `${w.kind} ${w.name} was already restarted for config ${configHash} (by a sibling); ${newPodsLine(w)}`,
      ],
    };
  }
  // (6c)
  if (hold && hold.by !== 'paused') return heldPlan(hold, `not restarting: ${heldLine(w, hold)}`);
  // (6d)
  if (!hold && w.podSuperseded) {
    const { podRevision, revision } = w.podSuperseded;
    return {
      ...base,
      workload,
      decision: 'deduped',
      rollingOut: true,
      reasons: [...why, supersededLine(w, podRevision, revision)],
    };
  }
  // (7)
  if (!Number.isNaN(last) && now - last < policy.minRestartIntervalMs) {
    const retryAt = last + policy.minRestartIntervalMs;
    return {
      ...base,
      workload,
      decision: 'alert',
      alert: 'RateLimited',
      retryAt,
      reasons: [
        ...why,
        `not restarting yet: ${w.kind} ${w.name} was restarted ${Math.round((now - last) / 1000)}s ago, less than --min-restart-interval; next possible in ${Math.ceil((retryAt - now) / 1000)}s`,
      ],
    };
  }
  // (8)
  // (6c) returned for every other hold.
  const paused = hold ? heldLine(w, hold) : undefined;
  return {
    ...base,
    workload,
    decision: 'restart',
    reasons: [
      ...why,
      `restart ${w.kind} ${w.name} with config ${configHash}, if its restart annotations are still as read at resourceVersion ${w.resourceVersion} (${lastHash === undefined ? 'no restart by config-sync yet' : `last restarted for config ${lastHash}`}); a replica that restarts it first makes this one dedupe`,
      ...(paused ? [paused] : []),
    ],
    ...(paused ? { paused } : {}),
  };
}

/** A sibling replica's restart for this config heals the drift: step (6)'s dedupe, not (6d)'s rollout. */
export function healedBySibling(plan: Plan): boolean {
  return plan.decision === 'deduped' && !plan.rollingOut;
}

/**
 * (6) Where the restart already made stands: new pods on their way, as far as its status shows,
 * or a rollout its controller gave up on, which a second restart would not mend either.
 */
function newPodsLine(w: WorkloadState): string {
  if (w.health?.stalled)
    return `but its rollout has stalled (ProgressDeadlineExceeded: ${w.health.stalled}): new pods are not becoming available (kubectl rollout status ${kubectlRef(w)})`;
  return `new pods are on their way${w.health ? ` (${w.health.detail})` : ''}`;
}

/** (6d) The rollout of a newer template under way, and whether it is getting anywhere. */
function supersededLine(w: WorkloadState, podRevision: string, revision: string): string {
  const rollout = `${w.kind} ${w.name} is rolling out a newer pod template (revision ${revision}; this pod is of revision ${podRevision})`;
  if (w.health?.stalled)
    return `${rollout}, but that rollout has stalled (ProgressDeadlineExceeded: ${w.health.stalled}); a restart would not mend it (kubectl rollout status ${kubectlRef(w)})`;
  return `${rollout}, which replaces this pod with pods that mount the sources afresh${w.health ? ` (${w.health.detail})` : ''}`;
}

/** The alert for each reason a restart would not replace this Pod (report.ts names its Event so). */
export const HOLD_ALERTS = {
  paused: 'WorkloadPaused',
  'on-delete': 'UpdateOnDelete',
  partition: 'UpdatePartitioned',
} as const satisfies Record<RolloutHold['by'], AlertReason>;

/** Whether an alert says that a restart would not replace this Pod (HOLD_ALERTS). */
export function isHoldAlert(
  alert: AlertReason | undefined,
): alert is (typeof HOLD_ALERTS)[keyof typeof HOLD_ALERTS] {
  return (Object.values(HOLD_ALERTS) as (AlertReason | undefined)[]).includes(alert);
}

/**
 * Why a restart of `w` would not replace the Pod of `podOrdinal` now, and what would let it
 * through, as the plan would say it (doctor tells it before any drift); undefined if it would.
 */
export function restartHeldLine(w: WorkloadState, podOrdinal: number | undefined): string | undefined {
  const hold = rolloutHoldOf(w, podOrdinal);
  return hold && heldLine(w, hold);
}

/** (6b), (6c) Why a restart of `w` would not replace this Pod, if it would not. */
function rolloutHoldOf(w: WorkloadState, podOrdinal: number | undefined): RolloutHold | undefined {
  if (w.rolloutHeld) return { by: w.rolloutHeld };
  if (w.updatePartition !== undefined && podOrdinal !== undefined && podOrdinal < w.updatePartition)
    return { by: 'partition', partition: w.updatePartition, ordinal: podOrdinal };
  return undefined;
}

/**
 * (6c), (8) What keeps a restart of `w` from replacing this Pod now, and what would let it
 * through.
 */
function heldLine(w: WorkloadState, hold: RolloutHold): string {
  switch (hold.by) {
    case 'paused':
      return `${w.kind} ${w.name} is paused: a restart rolls out only when it is resumed (kubectl rollout resume ${kubectlRef(w)})`;
    case 'on-delete':
      return `${w.kind} ${w.name} replaces a pod only when the pod is deleted (updateStrategy OnDelete), so a restart would replace none; delete this pod for one with the current config`;
    case 'partition':
      return `a restart of ${w.kind} ${w.name} would not replace this pod: ${partitionWords(hold)}; lower the partition, or delete this pod for one with the current config`;
  }
}

/** (6b) The same, where the workload already carries the config (restarted before it was held, or held since). */
function heldAfterRestartLine(w: WorkloadState, hold: RolloutHold, configHash: string): string {
  const restarted = `${w.kind} ${w.name} was restarted for config ${configHash}, but`;
  switch (hold.by) {
    case 'paused':
      return `${restarted} it is paused: no new pods come until it is resumed (kubectl rollout resume ${kubectlRef(w)})`;
    case 'on-delete':
      return `${restarted} it replaces a pod only when the pod is deleted (updateStrategy OnDelete): delete this pod for one with that config`;
    case 'partition':
      return `${restarted} ${partitionWords(hold)}: lower the partition, or delete this pod for one with that config`;
  }
}

function partitionWords(hold: { partition: number; ordinal: number }): string {
  return `only its pods of ordinal ${hold.partition} and above are replaced (rolling update partition ${hold.partition}), and this pod is ordinal ${hold.ordinal}`;
}

/** `deployment/web`, as kubectl names a workload. */
function kubectlRef(w: WorkloadState): string {
  return `${w.kind.toLowerCase()}/${w.name}`;
}
