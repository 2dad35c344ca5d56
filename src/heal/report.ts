// What the agent tells about a heal plan once it is carried out: the metric, the log line and
// the Event, and when it says it at all. Pure: the agent performs it.
//
// Steps:
//  (1) a plan's key is its decision, its alert and the config it is for: the same key again is
//      the same news, and is not told twice (a persistent drift is re-planned every pass);
//  (2) a restart is told by its outcome: restarted -> Healed, or WorkloadPaused where the
//      workload is paused (the restart rolls out only when it is resumed: nothing is healed yet);
//      a 409 (the workload changed while planning) -> a log line only, the agent re-reads and
//      plans again; failed -> HealFailed, whose Event is not repeated for the same key;
//  (3) deduped and alert plans are told once per key; an alert's Event reason names what kept
//      the agent from restarting (CircuitOpen, SourceMissing, PolicyDenied, and why a restart
//      would not replace the Pod: WorkloadPaused, UpdateOnDelete, UpdatePartitioned) or is Drifted;
//  (4) a plan with nothing to do tells nothing.
import type { EventReason } from './executor.ts';
import { type AlertReason, HOLD_ALERTS, isHoldAlert, type Plan } from './planner.ts';
import { policyRefusal } from './policy.ts';

export interface HealReport {
  readonly metric: { readonly action: string; readonly result: string };
  readonly log: { readonly level: 'info' | 'warn' | 'error'; readonly msg: string; readonly fields: object };
  readonly event?: {
    readonly reason: EventReason;
    readonly message: string;
    readonly type: 'Normal' | 'Warning';
  };
}

export type RestartOutcome = { type: 'restarted' } | { type: 'conflict' } | { type: 'failed'; error: Error };

// (1)
export function actionKey(plan: Plan): string {
  return `${plan.decision}:${plan.alert ?? ''}:${plan.configHash}`;
}

/** (2) How a restart went, told; `repeated`: the last plan told had the same key. */
export function restartReport(plan: Plan, outcome: RestartOutcome, repeated: boolean): HealReport {
  if (outcome.type === 'conflict')
    return {
      metric: { action: 'restart', result: 'conflict' },
      log: {
        level: 'info',
        msg: 'workload changed while planning (409): re-reading',
        fields: { workload: plan.workload },
      },
    };
  if (outcome.type === 'failed') {
    const e = outcome.error as Error & { code?: string; hint?: string };
    return {
      metric: { action: 'restart', result: 'failed' },
      log: { level: 'error', msg: e.message, fields: { code: e.code, hint: e.hint } },
      ...(repeated ? {} : { event: { reason: 'HealFailed', message: e.message, type: 'Warning' } }),
    };
  }
  const fields = {
    decision: 'restart',
    workload: plan.workload,
    configHash: plan.configHash,
    reasons: plan.reasons,
  };
  const what = `${plan.workload?.kind} ${plan.workload?.name} for config ${plan.configHash}`;
  // A paused Deployment's restart is recorded and rolls out only when it is resumed: nothing is
  // healed yet.
  if (plan.paused)
    return {
      metric: { action: 'restart', result: 'paused' },
      log: { level: 'warn', msg: 'restart recorded on a paused workload', fields },
      event: {
        reason: 'WorkloadPaused',
        message: `recorded the restart of ${what}: ${plan.paused}`,
        type: 'Warning',
      },
    };
  return {
    metric: { action: 'restart', result: 'ok' },
    log: { level: 'info', msg: 'restarted workload', fields },
    event: { reason: 'Healed', message: `restarted ${what}: ${plan.reasons[0]}`, type: 'Normal' },
  };
}

/** (3) The alerts whose Event is named after them; the others' is Drifted. */
const EVENT_ALERTS = [
  'CircuitOpen',
  'SourceMissing',
  'PolicyDenied',
  'NeverRestart',
  ...Object.values(HOLD_ALERTS),
] as const satisfies readonly (AlertReason & EventReason)[];

function isEventAlert(alert: AlertReason | undefined): alert is (typeof EVENT_ALERTS)[number] {
  return (EVENT_ALERTS as readonly (AlertReason | undefined)[]).includes(alert);
}

/** (3) and (4): a plan that restarts nothing, told once per key. */
export function planReport(plan: Plan, repeated: boolean): HealReport | undefined {
  if (repeated) return undefined;
  if (plan.decision === 'deduped')
    return {
      metric: { action: 'deduped', result: 'ok' },
      log: {
        level: 'info',
        msg: plan.rollingOut
          ? 'a rollout of a newer pod template replaces this pod'
          : 'a sibling already restarted the workload',
        fields: {
          decision: 'deduped',
          workload: plan.workload,
          configHash: plan.configHash,
          reasons: plan.reasons,
        },
      },
      event: { reason: 'Deduped', message: plan.reasons.at(-1) ?? '', type: 'Normal' },
    };
  if (plan.decision === 'alert') {
    const reason: EventReason = isEventAlert(plan.alert) ? plan.alert : 'Drifted';
    return {
      metric: { action: 'alert', result: plan.alert ?? 'unknown' },
      log: {
        level: 'warn',
        msg: `not restarting: ${plan.alert}`,
        fields: { decision: 'alert', alert: plan.alert, reasons: plan.reasons },
      },
      event: { reason, message: plan.reasons.join('; '), type: 'Warning' },
    };
  }
  return undefined;
}

/**
 * Why the last plan did not restart, for the InSync condition's message, where an operator must
 * act: the refusing policy's line (PolicyDenied), the source that rules a restart out
 * (NeverRestart), or why a restart would not replace the Pod and
 * what would (HOLD_ALERTS, and a restart recorded on a paused Deployment). Undefined otherwise.
 */
export function conditionNote(plan: Plan): string | undefined {
  if (plan.alert === 'PolicyDenied') return policyRefusal(plan);
  if (plan.alert === 'NeverRestart') return plan.reasons.at(-1);
  if (plan.paused) return plan.paused;
  if (isHoldAlert(plan.alert)) return plan.reasons.at(-1);
  return undefined;
}
