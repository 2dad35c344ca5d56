// What the agent tells about a heal plan (src/heal/report.ts): the metric, the log line, the
// Event, and that the same news is not told twice.
import { describe, expect, it } from 'vitest';
import { planText } from '../../src/cli/plan-format.ts';
import { eventName } from '../../src/heal/executor.ts';
import type { Plan } from '../../src/heal/planner.ts';
import { actionKey, conditionNote, planReport, restartReport } from '../../src/heal/report.ts';

const plan = (p: Partial<Plan>): Plan =>
  ({
    decision: 'restart',
    configHash: 'c0ffee',
    reasons: ['app:/etc/log.yaml: SubPathStale: ...', 'restart Deployment web'],
    workload: { kind: 'Deployment', name: 'web', resourceVersion: '7', restartAnnotations: {} },
    ...p,
  }) as Plan;

describe('actionKey', () => {
  it('is the decision, the alert and the config', () => {
    expect(actionKey(plan({}))).toBe('restart::c0ffee');
    expect(actionKey(plan({ decision: 'alert', alert: 'RateLimited' } as Partial<Plan>))).toBe(
      'alert:RateLimited:c0ffee',
    );
  });
});

describe('restartReport', () => {
  it('restarted: ok, the log line operators grep for, and a Healed Event naming the workload and the first reason', () => {
    const r = restartReport(plan({}), { type: 'restarted' }, false);
    expect(r.metric).toEqual({ action: 'restart', result: 'ok' });
    expect(r.log).toMatchObject({ level: 'info', msg: 'restarted workload' });
    expect(r.event).toEqual({
      reason: 'Healed',
      message: 'restarted Deployment web for config c0ffee: app:/etc/log.yaml: SubPathStale: ...',
      type: 'Normal',
    });
  });
  it('a 409: counted as a conflict, logged, no Event (the agent plans again)', () => {
    const r = restartReport(plan({}), { type: 'conflict' }, false);
    expect(r.metric.result).toBe('conflict');
    expect(r.event).toBeUndefined();
  });
  it('failed: HealFailed with the error, but not again for the same key', () => {
    const error = Object.assign(new Error('patch refused'), { code: 'CS_API_FORBIDDEN' });
    expect(restartReport(plan({}), { type: 'failed', error }, false).event).toEqual({
      reason: 'HealFailed',
      message: 'patch refused',
      type: 'Warning',
    });
    const again = restartReport(plan({}), { type: 'failed', error }, true);
    expect(again.event).toBeUndefined();
    expect(again.metric.result).toBe('failed'); // every failure still counts
  });
});

describe('restartReport of a paused workload', () => {
  it('tells the recorded restart as WorkloadPaused, never as Healed: nothing is replaced until the resume', () => {
    const paused =
      'Deployment web is paused: a restart rolls out only when it is resumed (kubectl rollout resume deployment/web)';
    const report = restartReport(plan({ paused }), { type: 'restarted' }, false);
    expect(report.metric).toEqual({ action: 'restart', result: 'paused' });
    expect(report.log).toMatchObject({ level: 'warn', msg: 'restart recorded on a paused workload' });
    expect(report.event).toEqual({
      reason: 'WorkloadPaused',
      message: `recorded the restart of Deployment web for config c0ffee: ${paused}`,
      type: 'Warning',
    });
    expect(conditionNote(plan({ paused }))).toBe(paused);
    // Refused or failed, it is told as any restart.
    expect(restartReport(plan({ paused }), { type: 'conflict' }, false).metric.result).toBe('conflict');
  });
});

describe('planReport', () => {
  it('deduped: a Deduped Event with the last reason, once', () => {
    const p = plan({ decision: 'deduped', reasons: ['x', 'Deployment web was already restarted'] });
    expect(planReport(p, false)?.event).toEqual({
      reason: 'Deduped',
      message: 'Deployment web was already restarted',
      type: 'Normal',
    });
    expect(planReport(p, true)).toBeUndefined();
    expect(planReport(p, false)?.log.msg).toBe('a sibling already restarted the workload');
    // Deduped since a rollout of a newer template replaces the Pod: the log line says that.
    const rolling = plan({
      decision: 'deduped',
      rollingOut: true,
      reasons: ['x', 'Deployment web is rolling out'],
    });
    expect(planReport(rolling, false)?.log.msg).toBe('a rollout of a newer pod template replaces this pod');
    expect(planReport(rolling, false)?.event).toMatchObject({
      reason: 'Deduped',
      message: 'Deployment web is rolling out',
    });
    expect(planText(rolling, []).split('\n')[0]).toBe(
      'plan: nothing to do, Deployment web is rolling out a newer pod template, which replaces this pod',
    );
    expect(planText(p, []).split('\n')[0]).toBe(
      'plan: nothing to do, Deployment web was already restarted for this config',
    );
  });
  it('alert: the Event reason names what kept it from restarting, else Drifted', () => {
    const alert = (a: string) => planReport(plan({ decision: 'alert', alert: a } as Partial<Plan>), false);
    expect(alert('CircuitOpen')?.event?.reason).toBe('CircuitOpen');
    expect(alert('SourceMissing')?.event?.reason).toBe('SourceMissing');
    expect(alert('PolicyDenied')?.event?.reason).toBe('PolicyDenied');
    expect(alert('WorkloadPaused')?.event).toMatchObject({ reason: 'WorkloadPaused', type: 'Warning' });
    expect(alert('UpdateOnDelete')?.event).toMatchObject({ reason: 'UpdateOnDelete', type: 'Warning' });
    expect(alert('UpdateOnDelete')?.metric).toEqual({ action: 'alert', result: 'UpdateOnDelete' });
    expect(alert('UpdatePartitioned')?.event?.reason).toBe('UpdatePartitioned');
    expect(alert('RateLimited')?.event?.reason).toBe('Drifted');
    expect(alert('AlertOnly')?.event?.reason).toBe('Drifted');
    expect(alert('AlertOnly')?.metric).toEqual({ action: 'alert', result: 'AlertOnly' });
    expect(alert('AlertOnly')?.event?.message).toBe(
      'app:/etc/log.yaml: SubPathStale: ...; restart Deployment web',
    );
  });
  it('nothing to do: nothing told', () => {
    expect(planReport(plan({ decision: 'none' }), false)).toBeUndefined();
  });
});

describe('conditionNote', () => {
  it("carries, into the InSync condition, what an operator must do: a held rollout's way through, a policy's refusal", () => {
    const held = plan({
      decision: 'alert',
      alert: 'WorkloadPaused',
      reasons: ['app:/etc/log.yaml: SubPathStale: ...', 'not restarting: Deployment web is paused, ...'],
    });
    expect(conditionNote(held)).toBe('not restarting: Deployment web is paused, ...');
    for (const alert of ['UpdateOnDelete', 'UpdatePartitioned'] as const)
      expect(conditionNote({ ...held, alert })).toBe('not restarting: Deployment web is paused, ...');
    expect(
      conditionNote(
        plan({ decision: 'alert', alert: 'PolicyDenied', reasons: ['x', 'window closed', 'denied'] }),
      ),
    ).toBe('window closed');
  });

  it('is nothing for the other plans', () => {
    expect(conditionNote(plan({ decision: 'alert', alert: 'AlertOnly' }))).toBeUndefined();
    expect(conditionNote(plan({ decision: 'deduped' }))).toBeUndefined();
    expect(conditionNote(plan({ decision: 'restart' }))).toBeUndefined();
  });
});

describe('eventName', () => {
  it("is the Pod's name and the time in nanoseconds, hex, as client-go names them; unique within a millisecond", () => {
    const at = new Date('2026-12-07T02:00:00.123Z');
    const names = Array.from({ length: 5 }, () => eventName('web-7d9f-abcde', at));
    expect(new Set(names).size).toBe(5);
    for (const n of names) {
      const [pod, hex] = n.split(/\.(?=[0-9a-f]+$)/);
      expect(pod).toBe('web-7d9f-abcde');
      expect(BigInt(`0x${hex}`) / 1_000_000n).toBe(BigInt(at.getTime()));
    }
  });
});
