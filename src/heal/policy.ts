// The policy gate before a restart: the seed's policy-as-code arbitration. A restart (a planned
// one, or a reload's fallback) is first put to the built-in policies and then, if one is set, to
// an OPA server; a refusal turns the plan into a PolicyDenied alert, recorded like any other.
// Pure: the OPA answer (or its failure) is passed in (policy-opa.ts asks).
//
// The steps (builtInGate does (1) and (2), opaGate (3) and (4), gatedPlan applies the result):
//  (1) the restart window (--restart-window "Mon-Fri 08:00-18:00 Europe/Berlin"): outside it,
//      denied, and retried when it opens;
//  (2) --only-when-settled: not while the workload is not fully available or a rollout is in
//      progress (read from its status), retried at the next pass;
//  (3) OPA (--policy-url): its `allow` and `reason`; unreachable, too slow or a malformed answer
//      follows --policy-failure: closed (the default: no restart, an alert, and the plan is
//      `undecided`, so the agent asks again soon: agent/retry.ts) or open (restart), and the plan
//      says which;
//  (4) the first refusal wins; every step's line goes into the plan's reasons.
import { ConfigSyncError } from '../errors.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import type { Plan, WorkloadState } from './planner.ts';

const DAYS = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'] as const;

export interface RestartWindow {
  /** As the user wrote it, for messages. */
  readonly text: string;
  /** Weekdays (0 = Sunday) on which the window opens. */
  readonly days: ReadonlySet<number>;
  /** Minutes after local midnight; an end before the start runs past midnight. */
  readonly startMinute: number;
  readonly endMinute: number;
  readonly timeZone: string;
}

const windowError = (text: string, why: string) =>
  new ConfigSyncError('CS_USAGE_BAD_FLAG', `--restart-window "${text}": ${why}`, {
    hint: 'write DAYS HH:MM-HH:MM TIMEZONE, e.g. "Mon-Fri 08:00-18:00 Europe/Berlin" or "Sat,Sun 02:00-05:00 UTC"',
    details: { value: text },
  });

function minuteOf(hhmm: string, text: string): number {
  const m = hhmm.match(/^([01]\d|2[0-3]):([0-5]\d)$/);
  if (!m) throw windowError(text, `"${hhmm}" is not a time HH:MM`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** "Mon-Fri 08:00-18:00 Europe/Berlin": days (ranges and lists), a time range, an IANA time zone. */
export function parseRestartWindow(text: string): RestartWindow {
  const parts = text.trim().split(/\s+/);
  if (parts.length !== 3) throw windowError(text, 'expected three parts: days, a time range and a time zone');
  const [dayText = '', timeText = '', timeZone = ''] = parts;
  const days = new Set<number>();
  for (const item of dayText.split(',')) {
    const [from = '', to] = item.split('-');
    const a = DAYS.indexOf(from as (typeof DAYS)[number]);
    const b = to === undefined ? a : DAYS.indexOf(to as (typeof DAYS)[number]);
    if (a < 0 || b < 0)
      throw windowError(text, `"${item}" is not a day or a range of days (Mon, Tue, ... Sun)`);
    for (let d = a; ; d = (d + 1) % 7) {
      days.add(d);
      if (d === b) break;
    }
  }
  const [start = '', end = '', ...rest] = timeText.split('-');
  if (rest.length > 0 || !end) throw windowError(text, `"${timeText}" is not a time range HH:MM-HH:MM`);
  try {
    new Intl.DateTimeFormat('en-US', { timeZone });
  } catch {
    throw windowError(text, `"${timeZone}" is not a time zone (an IANA name such as Europe/Berlin or UTC)`);
  }
  const startMinute = minuteOf(start, text);
  const endMinute = minuteOf(end, text);
  if (startMinute === endMinute) throw windowError(text, 'the window is empty (start equals end)');
  return { text, days, startMinute, endMinute, timeZone };
}

/** The weekday and minute of the day of `now` in `timeZone`. */
function localTime(now: number, timeZone: string): { day: number; minute: number } {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone,
    weekday: 'short',
    hour: '2-digit',
    minute: '2-digit',
    hourCycle: 'h23',
  }).formatToParts(new Date(now));
  const get = (type: string) => parts.find((p) => p.type === type)?.value ?? '';
  return {
    day: DAYS.indexOf(get('weekday') as (typeof DAYS)[number]),
    minute: Number(get('hour')) * 60 + Number(get('minute')),
  };
}

/** Whether `now` falls in the window; a window past midnight belongs to the day it opens. */
export function inRestartWindow(window: RestartWindow, now: number): boolean {
  const { day, minute } = localTime(now, window.timeZone);
  if (window.startMinute < window.endMinute)
    return window.days.has(day) && minute >= window.startMinute && minute < window.endMinute;
  if (minute >= window.startMinute) return window.days.has(day);
  return minute < window.endMinute && window.days.has((day + 6) % 7);
}

/** When the window next opens after `now` (to the minute; within a week). */
export function nextWindowOpening(window: RestartWindow, now: number): number | undefined {
  const start = Math.ceil(now / 60_000) * 60_000;
  for (let t = start; t < now + 8 * 86_400_000; t += 60_000) if (inRestartWindow(window, t)) return t;
  return undefined;
}

/** The workload's rollout state, from its status (heal/owner.ts reads it). */
export interface WorkloadHealth {
  /** Every replica updated and available, and the controller has seen the latest spec. */
  readonly settled: boolean;
  /** e.g. "2/3 available, 3/3 updated". */
  readonly detail: string;
  /**
   * The controller gave up waiting for the rollout (its Progressing condition False,
   * ProgressDeadlineExceeded): that condition's message. New Pods are not becoming available.
   */
  readonly stalled?: string;
}

/** What OPA answered, or why it could not be asked. */
export type OpaOutcome =
  | { readonly type: 'answer'; readonly allow: boolean; readonly reason: string }
  | { readonly type: 'failed'; readonly why: string };

/** OPA's Data API answer: `{"result": {"allow": bool, "reason": string}}`; anything else is malformed. */
export function readOpaAnswer(body: unknown): OpaOutcome {
  const result = (body as { result?: unknown } | null)?.result as
    | { allow?: unknown; reason?: unknown }
    | undefined;
  if (result === undefined || result === null || typeof result !== 'object')
    return { type: 'failed', why: 'the answer has no result (is the policy loaded at that path?)' };
  if (typeof result.allow !== 'boolean') return { type: 'failed', why: 'result.allow is not a boolean' };
  return {
    type: 'answer',
    allow: result.allow,
    reason: typeof result.reason === 'string' ? result.reason : '',
  };
}

export interface PolicyConfig {
  readonly restartWindow: RestartWindow | undefined;
  readonly onlyWhenSettled: boolean;
  readonly opa: { readonly url: string; readonly failure: 'closed' | 'open' } | undefined;
}

export interface PolicyInput {
  readonly workload: {
    readonly kind: string;
    readonly name: string;
    readonly namespace: string;
    readonly labels: Readonly<Record<string, string>>;
  };
  readonly pod: { readonly name: string; readonly namespace: string } | undefined;
  readonly reasons: readonly { readonly target: string; readonly reason: string; readonly message: string }[];
  readonly sources: readonly {
    readonly kind: string;
    readonly name: string;
    readonly resourceVersion: string;
    /** Keyed, as every digest that leaves the agent. */
    readonly digest: string;
  }[];
  readonly configHash: string;
  readonly time: string;
  /** config-sync's restarts of this workload in the hour before `time`. */
  readonly restartsLastHour: number;
}

/** OPA's input document for a restart plan: names, versions and keyed digests; never a value. */
export function policyInput(
  plan: Plan,
  workload: WorkloadState,
  namespace: string,
  pod: string | undefined,
  sources: PolicyInput['sources'],
  now: number,
): PolicyInput {
  return {
    workload: { kind: workload.kind, name: workload.name, namespace, labels: workload.labels ?? {} },
    pod: pod === undefined ? undefined : { name: pod, namespace },
    reasons: plan.drifted.map((v) => ({ target: v.target, reason: v.reason, message: v.message })),
    sources,
    configHash: plan.configHash,
    time: new Date(now).toISOString(),
    restartsLastHour: restartsWithin(workload.restartAnnotations ?? {}, now, 3_600_000),
  };
}

/**
 * The times of a restart history (the ANNOTATION.restarts value: space-separated, newest last)
 * that fall in the `ms` before `now`, as written. The restart patch keeps these and adds its own
 * (executor.ts); the policy input counts them.
 */
export function recentRestarts(history: string, now: number, ms: number): string[] {
  return history.split(/\s+/).filter((t) => {
    const at = Date.parse(t);
    return !Number.isNaN(at) && now - at < ms && at <= now;
  });
}

/** How many restarts the history annotation holds in the `ms` before `now`. */
export function restartsWithin(
  annotations: Readonly<Record<string, string>>,
  now: number,
  ms: number,
): number {
  return recentRestarts(annotations[ANNOTATION.restarts] ?? '', now, ms).length;
}

export interface Gate {
  readonly allowed: boolean;
  readonly lines: readonly string[];
  readonly retryAt?: number;
  /** Refused because OPA could not decide (--policy-failure closed), not because it said no. */
  readonly undecided?: true;
}

/** (1) and (2): the built-in policies, which need nothing but the plan's workload and the clock. */
export function builtInGate(config: PolicyConfig, health: WorkloadHealth | undefined, now: number): Gate {
  const lines: string[] = [];
  if (config.restartWindow) {
    const w = config.restartWindow;
    if (!inRestartWindow(w, now)) {
      const opens = nextWindowOpening(w, now);
      return {
        allowed: false,
        lines: [
          `policy: outside the restart window ${w.text}${opens ? `; it opens ${new Date(opens).toISOString()}` : ''}`,
        ],
        ...(opens === undefined ? {} : { retryAt: opens }),
      };
    }
    lines.push(`policy: inside the restart window ${w.text}`);
  }
  if (config.onlyWhenSettled) {
    if (health && !health.settled)
      return {
        allowed: false,
        lines: [
          ...lines,
          `policy: the workload is not settled (${health.detail}): not while a rollout is in progress`,
        ],
      };
    lines.push(`policy: the workload is settled${health ? ` (${health.detail})` : ''}`);
  }
  return { allowed: true, lines };
}

/** (3) and (4): OPA's outcome after the built-ins allowed. */
export function opaGate(builtIn: Gate, config: PolicyConfig, outcome: OpaOutcome | undefined): Gate {
  if (!builtIn.allowed || !config.opa || !outcome) return builtIn;
  const at = `policy ${config.opa.url}`;
  if (outcome.type === 'answer')
    return {
      allowed: outcome.allow,
      lines: [
        ...builtIn.lines,
        `${at}: ${outcome.allow ? 'allowed' : 'denied'}${outcome.reason ? `: ${outcome.reason}` : ''}`,
      ],
    };
  const open = config.opa.failure === 'open';
  return {
    allowed: open,
    ...(open ? {} : { undecided: true }),
    lines: [
      ...builtIn.lines,
      `${at} could not decide (${outcome.why}); --policy-failure ${config.opa.failure}: ${open ? 'restarting anyway' : 'no restart'}`,
    ],
  };
}

const DENIED = 'not restarting: the policy denied it';

/** The plan after the gate: unchanged when allowed (its lines added), a PolicyDenied alert when not. */
export function gatedPlan(plan: Plan, gate: Gate): Plan {
  if (gate.allowed) return { ...plan, reasons: [...plan.reasons, ...gate.lines] };
  return {
    ...plan,
    decision: 'alert',
    alert: 'PolicyDenied',
    reasons: [...plan.reasons.slice(0, -1), ...gate.lines, DENIED],
    ...(gate.retryAt === undefined ? {} : { retryAt: gate.retryAt }),
    ...(gate.undecided ? { undecided: true } : {}),
  };
}

/** Why a gated plan was refused: the refusing policy's line (for the InSync condition); else undefined. */
export function policyRefusal(plan: Plan): string | undefined {
  return plan.alert === 'PolicyDenied' ? plan.reasons.at(-2) : undefined;
}
