// Acts on a drift for one Pod: plans (heal/planner.ts, through the policy gate), performs the
// plan once per distinct plan (the restart patch, or nothing but telling), and says how it went.
// It keeps what it needs to tell a plan only once (the last plan's key), why the last plan did
// not restart (for the InSync condition), and its failures in a row.
//
// act(), step by step:
//  (1) the owning workload as read beside the sources' confirmation (given by the caller, so the
//      restart waits for one round trip fewer), or read now; plan with the Pod as last read;
//  (2) the reads only some plans rest on, made for those alone, then plan again: the Pod, for a
//      restart (a deletion comes long after the start, and a Pod being deleted does not restart
//      its workload, planner step 3b); the ReplicaSet's revision, for a dedupe because a rollout
//      replaces the Pod (6d: a rollback renumbers it). Most replicas of a drift find a sibling's
//      restart made, and need neither;
//  (2b) gate; a read the plan needed that failed is a HealFailed Event (once per kind of failure)
//      and a failed heal;
//  (3) restart: the patch; a 409 wakes the reconciler to plan again at once; a refusal or no
//      answer is a failed heal;
//  (4) anything else (dedupe, alert, hold): told once per distinct plan; a plan the policy
//      server could not decide is a failed heal. A sibling's restart that heals this drift is
//      told by log line and metric, with no Event: every replica but one finds it, at once.
// A failed heal is tried again after a backoff of 5 s doubling to 5 min (retry.ts), not at the
// next --resync; `failed` also tells reload mode its fallback restart is still owed.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { restartWorkload } from '../heal/executor.ts';
import type { OwnerReadOptions } from '../heal/owner.ts';
import { healedBySibling, type OwnerState, type Plan } from '../heal/planner.ts';
import {
  actionKey,
  conditionNote,
  type HealReport,
  planReport,
  type RestartOutcome,
  restartReport,
} from '../heal/report.ts';
import type { SourceLookup } from '../verify/expected.ts';
import type { Verdict } from '../verify/verdict.ts';
import type { EventOutbox } from './event-outbox.ts';
import type { PodMetrics } from './pod-metrics.ts';
import { planFor } from './pod-plan.ts';
import { gateRestart } from './policy-gate.ts';
import { Backoff } from './retry.ts';
import type { Runtime } from './runtime.ts';

/**
 * How the act went: `conflict`, a 409 (plan again); `failed`, tried again at `retryAt`;
 * `siblingRestarted`, a sibling replica's restart for this config heals the drift.
 */
export interface HealOutcome {
  readonly retryAt?: number;
  readonly conflict?: boolean;
  readonly failed?: boolean;
  readonly siblingRestarted?: boolean;
}

export interface HealActorDeps {
  readonly rt: Runtime;
  readonly lookup: SourceLookup;
  readonly events: EventOutbox;
  readonly metrics: Pick<PodMetrics, 'heals'>;
  readonly log: Logger;
  readonly clock: () => number;
  /** The owning workload as the API has it now (heal/owner.ts, ownerResolver). */
  readonly currentOwner: (options?: OwnerReadOptions) => Promise<OwnerState>;
  /** The Pod as the API has it now; undefined if it could not be read. */
  readonly readPod: () => Promise<V1Pod | undefined>;
  /** Plan again at once (a 409). */
  readonly wake: () => void;
  readonly signal: AbortSignal;
}

export class HealActor {
  private lastKey = '';
  private refusal: string | undefined;
  private readonly backoff = new Backoff();
  private readonly deps: HealActorDeps;

  constructor(deps: HealActorDeps) {
    this.deps = deps;
  }

  /** Why the last plan did not restart, where an operator must act: for the condition's message. */
  note(): string | undefined {
    return this.refusal;
  }

  /** Every target is in sync: the next drift is news again, and its heal starts a new backoff. */
  settled(): void {
    this.lastKey = '';
    this.refusal = undefined;
    this.backoff.succeeded();
  }

  async act(
    verdicts: readonly Verdict[],
    now: number,
    owner?: Promise<OwnerState>,
    pod?: Promise<V1Pod | undefined>,
  ): Promise<HealOutcome> {
    const { rt, lookup, log, metrics } = this.deps;
    let plan: Plan;
    try {
      // (1)
      let ownerState = await (owner ?? this.deps.currentOwner());
      let ownPod = (await pod) ?? rt.pod;
      const planned = () => planFor(rt, verdicts, ownerState, lookup, now, ownPod);
      plan = planned();
      // (2)
      if (plan.rollingOut && ownerState.type === 'workload' && ownerState.workload.podSuperseded?.cached) {
        ownerState = await this.deps.currentOwner({ recheckRevision: true });
        plan = planned();
      }
      if (plan.decision === 'restart' && pod === undefined) {
        ownPod = (await this.deps.readPod()) ?? rt.pod;
        plan = planned();
      }
      // (2b)
      plan = await gateRestart(rt, plan, ownerState, lookup, now, this.deps.signal);
      this.refusal = conditionNote(plan);
    } catch (error) {
      const key = `failed:${(error as { code?: string }).code}`;
      if (key !== this.lastKey) {
        this.lastKey = key;
        metrics.heals.inc({ action: 'restart', result: 'failed' });
        log.error(
          { code: (error as { code?: string }).code, hint: (error as { hint?: string }).hint },
          (error as Error).message,
        );
        await this.deps.events.emit('HealFailed', (error as Error).message, 'Warning');
      }
      return this.failed();
    }
    const key = actionKey(plan);
    const repeated = key === this.lastKey;
    // (3)
    if (plan.decision === 'restart') {
      let outcome: RestartOutcome;
      try {
        outcome = { type: await restartWorkload(rt.client, rt.namespace, plan, new Date(now)) };
      } catch (error) {
        outcome = { type: 'failed', error: error as Error };
      }
      await this.tell(restartReport(plan, outcome, repeated));
      if (outcome.type === 'conflict') {
        this.deps.wake();
        return { conflict: true };
      }
      this.lastKey = key;
      if (outcome.type === 'failed') return this.failed();
      this.backoff.succeeded();
      return {};
    }
    // (4)
    const report = planReport(plan, repeated);
    const bySibling = healedBySibling(plan);
    this.lastKey = key;
    if (report) await this.tell(report, !bySibling);
    if (plan.undecided) return this.failed();
    this.backoff.succeeded();
    return {
      ...(plan.retryAt === undefined ? {} : { retryAt: plan.retryAt }),
      ...(bySibling ? { siblingRestarted: true } : {}),
    };
  }

  /** Performs a heal report (heal/report.ts): the metric, the log line, the Event (where `withEvent`). */
  private async tell(report: HealReport, withEvent = true): Promise<void> {
    this.deps.metrics.heals.inc(report.metric);
    this.deps.log[report.log.level](report.log.fields, report.log.msg);
    if (report.event && withEvent)
      await this.deps.events.emit(report.event.reason, report.event.message, report.event.type);
  }

  private failed(): HealOutcome {
    const { failures, delayMs, retryInSeconds } = this.backoff.failed();
    this.deps.log.info({ failures, retryInSeconds }, 'the heal failed: trying again');
    return { failed: true, retryAt: this.deps.clock() + delayMs };
  }
}
