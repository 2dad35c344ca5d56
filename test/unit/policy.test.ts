// The policy gate before a restart (src/heal/policy.ts): the restart window, the settled
// workload, OPA's answer and its failure modes, and what the plan becomes.
import { describe, expect, it } from 'vitest';
import { restartHistory } from '../../src/heal/executor.ts';
import { workloadHealth } from '../../src/heal/owner.ts';
import type { Plan } from '../../src/heal/planner.ts';
import {
  builtInGate,
  gatedPlan,
  inRestartWindow,
  nextWindowOpening,
  opaGate,
  type PolicyConfig,
  parseRestartWindow,
  policyInput,
  policyRefusal,
  readOpaAnswer,
  restartsWithin,
} from '../../src/heal/policy.ts';
import { statusToWrite } from '../../src/status/condition.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

// Thursday 2026-12-03, 12:00 UTC = 13:00 in Berlin.
const THU_NOON_UTC = Date.parse('2026-12-03T12:00:00Z');
const berlinOffice = parseRestartWindow('Mon-Fri 08:00-18:00 Europe/Berlin');

describe('the restart window', () => {
  it('parses days as ranges and lists, a time range and an IANA time zone', () => {
    expect([...parseRestartWindow('Sat,Sun 02:00-05:00 UTC').days].sort()).toEqual([0, 6]);
    expect([...parseRestartWindow('Fri-Mon 22:00-06:00 UTC').days].sort()).toEqual([0, 1, 5, 6]);
    expect(berlinOffice).toMatchObject({ startMinute: 480, endMinute: 1080, timeZone: 'Europe/Berlin' });
  });

  it.each([
    ['Mon-Fri 08:00-18:00', 'expected three parts'],
    ['Mo-Fr 08:00-18:00 UTC', '"Mo-Fr" is not a day'],
    ['Mon 8-18 UTC', '"8" is not a time HH:MM'],
    ['Mon 08:00-25:00 UTC', '"25:00" is not a time HH:MM'],
    ['Mon 08:00-18:00 Mars/Olympus', '"Mars/Olympus" is not a time zone'],
    ['Mon 08:00-08:00 UTC', 'the window is empty'],
  ])('%j is refused: %s', (text, why) => {
    expect(() => parseRestartWindow(text)).toThrow(why);
  });

  it('is read in its own time zone', () => {
    expect(inRestartWindow(berlinOffice, THU_NOON_UTC)).toBe(true);
    // 17:30 UTC is 18:30 in Berlin: closed; 06:30 UTC is 07:30: not yet open.
    expect(inRestartWindow(berlinOffice, Date.parse('2026-12-03T17:30:00Z'))).toBe(false);
    expect(inRestartWindow(berlinOffice, Date.parse('2026-12-03T06:30:00Z'))).toBe(false);
    // Saturday.
    expect(inRestartWindow(berlinOffice, Date.parse('2026-12-05T12:00:00Z'))).toBe(false);
  });

  it('a window past midnight belongs to the day it opens', () => {
    const nights = parseRestartWindow('Fri 22:00-06:00 UTC');
    expect(inRestartWindow(nights, Date.parse('2026-12-04T23:00:00Z'))).toBe(true); // Friday night
    expect(inRestartWindow(nights, Date.parse('2026-12-05T05:00:00Z'))).toBe(true); // Saturday early
    expect(inRestartWindow(nights, Date.parse('2026-12-06T05:00:00Z'))).toBe(false); // Sunday early
  });

  it('says when it next opens', () => {
    // Thursday 18:30 Berlin -> Friday 08:00 Berlin = 07:00 UTC.
    expect(
      new Date(nextWindowOpening(berlinOffice, Date.parse('2026-12-03T17:30:00Z')) ?? 0).toISOString(),
    ).toBe('2026-12-04T07:00:00.000Z');
  });
});

const restartPlan: Plan = {
  decision: 'restart',
  workload: { kind: 'Deployment', name: 'web', resourceVersion: '7', annotations: {} },
  configHash: 'cfg-1',
  reasons: [
    'app:/etc/app: SubPathStale: stale',
    'restart Deployment web with config cfg-1, if its restart annotations are still as read at resourceVersion 7 (no restart by config-sync yet); a replica that restarts it first makes this one dedupe',
  ],
  drifted: [
    { target: 'app:/etc/app', state: 'Drifted', reason: 'SubPathStale', message: 'stale', mismatches: [] },
  ],
};
const none: PolicyConfig = { restartWindow: undefined, onlyWhenSettled: false, opa: undefined };
const opa = (failure: 'closed' | 'open'): PolicyConfig => ({
  ...none,
  opa: { url: 'http://127.0.0.1:8181/v1/data/configsync/restart', failure },
});

describe('the gate', () => {
  it('outside the window: denied, retried when it opens; the plan becomes a PolicyDenied alert', () => {
    const gate = builtInGate(
      { ...none, restartWindow: berlinOffice },
      undefined,
      Date.parse('2026-12-03T17:30:00Z'),
    );
    expect(gate.allowed).toBe(false);
    expect(gate.retryAt).toBe(Date.parse('2026-12-04T07:00:00Z'));
    const plan = gatedPlan(restartPlan, gate);
    expect(plan).toMatchObject({ decision: 'alert', alert: 'PolicyDenied', retryAt: gate.retryAt });
    expect(plan.reasons).toEqual([
      'app:/etc/app: SubPathStale: stale',
      'policy: outside the restart window Mon-Fri 08:00-18:00 Europe/Berlin; it opens 2026-12-04T07:00:00.000Z',
      'not restarting: the policy denied it',
    ]);
    // What the InSync condition's message names: the refusing policy's line.
    expect(policyRefusal(plan)).toBe(plan.reasons[1]);
    expect(policyRefusal(restartPlan)).toBeUndefined();
  });

  it('not while a rollout is in progress (--only-when-settled)', () => {
    const rolling = workloadHealth('Deployment', {
      metadata: { generation: 3 },
      spec: { replicas: 3 },
      status: { observedGeneration: 3, replicas: 4, updatedReplicas: 2, availableReplicas: 3 },
    });
    expect(rolling).toEqual({ settled: false, detail: '3/3 available, 2/3 updated, 1 old' });
    const gate = builtInGate({ ...none, onlyWhenSettled: true }, rolling, THU_NOON_UTC);
    expect(gate.allowed).toBe(false);
    expect(gate.lines.at(-1)).toContain('not settled (3/3 available, 2/3 updated, 1 old)');
    const settled = workloadHealth('DaemonSet', {
      metadata: { generation: 1 },
      status: {
        observedGeneration: 1,
        desiredNumberScheduled: 2,
        updatedNumberScheduled: 2,
        numberAvailable: 2,
      },
    });
    expect(builtInGate({ ...none, onlyWhenSettled: true }, settled, THU_NOON_UTC).allowed).toBe(true);
  });

  it('names a rollout its controller gave up on (Progressing False, ProgressDeadlineExceeded)', () => {
    const status = { observedGeneration: 3, replicas: 4, updatedReplicas: 1, availableReplicas: 3 };
    const progressing = (conditionStatus: string, reason: string) => ({
      metadata: { generation: 3 },
      spec: { replicas: 3 },
      status: {
        ...status,
        conditions: [
          { type: 'Available', status: 'True', reason: 'MinimumReplicasAvailable' },
          {
            type: 'Progressing',
            status: conditionStatus,
            reason,
            message: 'ReplicaSet "web-5d4f" has timed out progressing.',
          },
        ],
      },
    });
    expect(workloadHealth('Deployment', progressing('False', 'ProgressDeadlineExceeded'))).toEqual({
      settled: false,
      detail: '3/3 available, 1/3 updated, 1 old',
      stalled: 'ReplicaSet "web-5d4f" has timed out progressing.',
    });
    expect(workloadHealth('Deployment', progressing('True', 'ReplicaSetUpdated')).stalled).toBeUndefined();
  });

  it("OPA's answer decides after the built-ins; its reason goes into the plan", () => {
    const allowed = opaGate({ allowed: true, lines: [] }, opa('closed'), {
      type: 'answer',
      allow: true,
      reason: 'ok',
    });
    expect(allowed).toEqual({
      allowed: true,
      lines: ['policy http://127.0.0.1:8181/v1/data/configsync/restart: allowed: ok'],
    });
    const plan = gatedPlan(restartPlan, allowed);
    expect(plan.decision).toBe('restart');
    expect(plan.reasons.at(-1)).toContain('allowed: ok');
    const denied = opaGate({ allowed: true, lines: [] }, opa('closed'), {
      type: 'answer',
      allow: false,
      reason: 'web is frozen',
    });
    expect(gatedPlan(restartPlan, denied).reasons).toContain(
      'policy http://127.0.0.1:8181/v1/data/configsync/restart: denied: web is frozen',
    );
    // A refusal is a decision: not asked again before the next pass.
    expect(gatedPlan(restartPlan, denied).undecided).toBeUndefined();
  });

  it.each([
    ['closed', false, 'no restart'],
    ['open', true, 'restarting anyway'],
  ] as const)(
    'OPA cannot decide, --policy-failure %s: allowed %s, and the plan says so',
    (failure, allowed, says) => {
      const gate = opaGate({ allowed: true, lines: [] }, opa(failure), {
        type: 'failed',
        why: 'ECONNREFUSED',
      });
      expect(gate.allowed).toBe(allowed);
      expect(gate.lines[0]).toBe(
        `policy http://127.0.0.1:8181/v1/data/configsync/restart could not decide (ECONNREFUSED); --policy-failure ${failure}: ${says}`,
      );
      // Closed, the refusal is a failure the agent asks about again soon (agent/retry.ts); open,
      // the restart goes ahead.
      const plan = gatedPlan(restartPlan, gate);
      expect(plan.decision).toBe(allowed ? 'restart' : 'alert');
      expect(plan.undecided).toBe(allowed ? undefined : true);
    },
  );

  it.each([
    [{ result: { allow: true, reason: 'ok' } }, { type: 'answer', allow: true, reason: 'ok' }],
    [{ result: { allow: false } }, { type: 'answer', allow: false, reason: '' }],
    [{}, { type: 'failed', why: 'the answer has no result (is the policy loaded at that path?)' }],
    [{ result: { allow: 'yes' } }, { type: 'failed', why: 'result.allow is not a boolean' }],
    [null, { type: 'failed', why: 'the answer has no result (is the policy loaded at that path?)' }],
  ])("reads OPA's answer %j", (body, outcome) => {
    expect(readOpaAnswer(body)).toEqual(outcome);
  });
});

describe("OPA's input and the restart history", () => {
  it('names, versions, keyed digests and the restarts of the last hour; never a value', () => {
    const now = THU_NOON_UTC;
    const history = [now - 7_200_000, now - 1_800_000, now - 60_000]
      .map((t) => new Date(t).toISOString())
      .join(' ');
    const input = policyInput(
      restartPlan,
      {
        kind: 'Deployment',
        name: 'web',
        resourceVersion: '7',
        restartAnnotations: { 'config-sync.io/restarts': history },
        labels: { 'config-sync.io/frozen': 'true' },
      },
      'shop',
      'web-1',
      [{ kind: 'ConfigMap', name: 'web-config', resourceVersion: '41', digest: 'abcdef012345' }],
      now,
    );
    expect(input).toEqual({
      workload: {
        kind: 'Deployment',
        name: 'web',
        namespace: 'shop',
        labels: { 'config-sync.io/frozen': 'true' },
      },
      pod: { name: 'web-1', namespace: 'shop' },
      reasons: [{ target: 'app:/etc/app', reason: 'SubPathStale', message: 'stale' }],
      sources: [{ kind: 'ConfigMap', name: 'web-config', resourceVersion: '41', digest: 'abcdef012345' }],
      configHash: 'cfg-1',
      time: '2026-12-03T12:00:00.000Z',
      restartsLastHour: 2,
    });
  });

  it('the history kept on a restart: the last hour, then this restart', () => {
    const now = new Date(THU_NOON_UTC);
    const old = new Date(THU_NOON_UTC - 7_200_000).toISOString();
    const recent = new Date(THU_NOON_UTC - 600_000).toISOString();
    expect(restartHistory(`${old} ${recent}`, now)).toBe(`${recent} ${now.toISOString()}`);
    expect(restartHistory('', now)).toBe(now.toISOString());
    expect(
      restartsWithin({ 'config-sync.io/restarts': restartHistory(recent, now) }, THU_NOON_UTC + 1, 3_600_000),
    ).toBe(2);
  });
});

describe('the condition says why nothing was done', () => {
  it("a policy refusal is in the InSync condition's message, and a new one is written", () => {
    const drifted: Verdict[] = [
      {
        target: 'app:/etc/app',
        state: 'Drifted',
        reason: 'SubPathStale',
        message: 'stale',
        mismatches: [],
      },
    ];
    const first = statusToWrite(drifted, '', undefined, THU_NOON_UTC, 900_000);
    expect(first?.update.message).toBe('app:/etc/app: stale');
    const noted = statusToWrite(
      drifted,
      '',
      first?.written,
      THU_NOON_UTC + 1000,
      900_000,
      'policy: outside the window',
    );
    expect(noted?.update.message).toBe('app:/etc/app: stale; policy: outside the window');
    expect(
      statusToWrite(drifted, '', noted?.written, THU_NOON_UTC + 2000, 900_000, 'policy: outside the window'),
    ).toBeUndefined();
  });
});
