// The heal planner: every decision step, with the reasons a person reads in heal --dry-run.
import { describe, expect, it } from 'vitest';
import { type OwnerState, type PlanInput, planHeal, restartHeldLine } from '../../src/heal/planner.ts';
import { ANNOTATION } from '../../src/kube/annotations.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const NOW = Date.parse('2026-12-02T10:00:00Z');
const drifted: Verdict = {
  target: 'app:/etc/app',
  state: 'Drifted',
  reason: 'ContentDrift',
  message: 'files differ',
  mismatches: [],
};
const inSync: Verdict = {
  target: 'app:/etc/app',
  state: 'InSync',
  reason: 'InSync',
  message: 'ok',
  mismatches: [],
};
const propagating: Verdict = {
  ...drifted,
  state: 'Propagating',
  reason: 'Propagating',
  message: 'within grace',
};
const sourceMissing: Verdict = {
  target: 'app:/etc/db',
  state: 'Missing',
  reason: 'SourceMissing',
  message: 'Secret/db is gone',
  mismatches: [],
};
const fileMissing: Verdict = { ...drifted, state: 'Missing', reason: 'FileMissing' };
const unknown: Verdict = { ...drifted, state: 'Unknown', reason: 'ApiUnreadable' };

const deployment = (annotations: Record<string, string> = {}): OwnerState => ({
  type: 'workload',
  workload: { kind: 'Deployment', name: 'web', resourceVersion: '42', restartAnnotations: annotations },
});

const input = (over: Partial<PlanInput> = {}): PlanInput => ({
  verdicts: [drifted],
  owner: deployment(),
  podConfigHash: 'old',
  expectedConfigHash: 'new',
  policy: { mode: 'restart', minRestartIntervalMs: 300_000 },
  now: NOW,
  ...over,
});

describe('planHeal', () => {
  it.each([
    ['in sync', [inSync], 'none'],
    ['propagating waits', [propagating], 'none'],
    ['unknown waits', [unknown], 'none'],
    ['drifted restarts', [drifted], 'restart'],
    ['missing files restart', [fileMissing], 'restart'],
  ] as const)('%s', (_, verdicts, decision) => {
    expect(planHeal(input({ verdicts: [...verdicts] })).decision).toBe(decision);
  });

  it('restarts conditional on the restart annotations as read, and says so', () => {
    const plan = planHeal(input());
    expect(plan).toMatchObject({
      decision: 'restart',
      workload: { kind: 'Deployment', name: 'web', resourceVersion: '42', annotations: {} },
      configHash: 'new',
    });
    expect(plan.reasons).toEqual([
      'app:/etc/app: ContentDrift: files differ',
      'restart Deployment web with config new, if its restart annotations are still as read at resourceVersion 42 (no restart by config-sync yet); a replica that restarts it first makes this one dedupe',
    ]);
  });

  it('tests for no annotations at all where the workload has none, and names the last restart where it has one', () => {
    const bare: OwnerState = {
      type: 'workload',
      workload: { kind: 'Deployment', name: 'web', resourceVersion: '42', restartAnnotations: null },
    };
    expect(planHeal(input({ owner: bare })).workload?.annotations).toBeNull();
    const restarted = planHeal(
      input({
        owner: deployment({
          [ANNOTATION.configHash]: 'old',
          [ANNOTATION.restartedAt]: '2020-01-01T00:00:00Z',
        }),
      }),
    );
    expect(restarted.workload?.annotations).toEqual({
      [ANNOTATION.configHash]: 'old',
      [ANNOTATION.restartedAt]: '2020-01-01T00:00:00Z',
    });
    expect(restarted.reasons.at(-1)).toContain('(last restarted for config old)');
  });

  it('never restarts into a broken state: a source gone from the API alerts, even with other drift', () => {
    const plan = planHeal(input({ verdicts: [drifted, sourceMissing] }));
    expect(plan).toMatchObject({ decision: 'alert', alert: 'SourceMissing' });
    expect(plan.reasons.at(-1)).toContain('new pods could not mount a source that is gone');
  });

  it('dedupes when a sibling already restarted for this config', () => {
    const plan = planHeal(input({ owner: deployment({ [ANNOTATION.configHash]: 'new' }) }));
    expect(plan.decision).toBe('deduped');
    expect(plan.reasons.at(-1)).toBe(
      'Deployment web was already restarted for config new (by a sibling); new pods are on their way',
    );
  });

  it('says how far that rollout is, and that it stalled where its controller gave up on it', () => {
    const restarted = (health: { settled: boolean; detail: string; stalled?: string }): OwnerState => ({
      type: 'workload',
      workload: {
        kind: 'Deployment',
        name: 'web',
        resourceVersion: '42',
        restartAnnotations: { [ANNOTATION.configHash]: 'new' },
        health,
      },
    });
    expect(
      planHeal(
        input({ owner: restarted({ settled: false, detail: '3/3 available, 1/3 updated, 1 old' }) }),
      ).reasons.at(-1),
    ).toBe(
      'Deployment web was already restarted for config new (by a sibling); new pods are on their way (3/3 available, 1/3 updated, 1 old)',
    );
    const stalled = planHeal(
      input({
        owner: restarted({
          settled: false,
          detail: '3/3 available, 1/3 updated, 1 old',
          stalled: 'ReplicaSet "web-5d4f" has timed out progressing.',
        }),
      }),
    );
    // Still no second restart: it would not mend a rollout that cannot progress.
    expect(stalled.decision).toBe('deduped');
    expect(stalled.reasons.at(-1)).toBe(
      'Deployment web was already restarted for config new (by a sibling); but its rollout has stalled (ProgressDeadlineExceeded: ReplicaSet "web-5d4f" has timed out progressing.): new pods are not becoming available (kubectl rollout status deployment/web)',
    );
  });

  describe('a pod of an older pod template than the workload rolls out', () => {
    const rolling = (
      over: Partial<Extract<OwnerState, { type: 'workload' }>['workload']> = {},
    ): OwnerState => ({
      type: 'workload',
      workload: {
        kind: 'Deployment',
        name: 'web',
        resourceVersion: '42',
        restartAnnotations: {},
        health: { settled: false, detail: '1/2 available, 1/2 updated, 1 old' },
        podSuperseded: { podRevision: '4', revision: '5' },
        ...over,
      },
    });

    it('is not restarted from: that rollout replaces it (a deploy that changed the config as well)', () => {
      const plan = planHeal(input({ owner: rolling() }));
      expect(plan.decision).toBe('deduped');
      expect(plan.rollingOut).toBe(true);
      expect(plan.reasons.at(-1)).toBe(
        'Deployment web is rolling out a newer pod template (revision 5; this pod is of revision 4), which replaces this pod with pods that mount the sources afresh (1/2 available, 1/2 updated, 1 old)',
      );
      // Where the newer template is a sibling's restart for this config, the plan says that.
      const sibling = planHeal(
        input({ owner: rolling({ restartAnnotations: { [ANNOTATION.configHash]: 'new' } }) }),
      );
      expect(sibling.decision).toBe('deduped');
      expect(sibling.reasons.at(-1)).toMatch(
        /^Deployment web was already restarted for config new \(by a sibling\)/,
      );
    });

    it('says so where the rollout stalled, and still does not start a second one over it', () => {
      const plan = planHeal(
        input({
          owner: rolling({
            health: {
              settled: false,
              detail: '1/2 available',
              stalled: 'ReplicaSet "web-5" has timed out progressing.',
            },
          }),
        }),
      );
      expect(plan.decision).toBe('deduped');
      expect(plan.reasons.at(-1)).toBe(
        'Deployment web is rolling out a newer pod template (revision 5; this pod is of revision 4), but that rollout has stalled (ProgressDeadlineExceeded: ReplicaSet "web-5" has timed out progressing.); a restart would not mend it (kubectl rollout status deployment/web)',
      );
    });

    it('is left to the holds where the rollout would not replace it: paused, OnDelete, a partition above it', () => {
      expect(planHeal(input({ owner: rolling({ rolloutHeld: 'paused' }) })).paused).toContain('is paused');
      const partition = planHeal(
        input({
          owner: rolling({
            kind: 'StatefulSet',
            updatePartition: 2,
            podSuperseded: { podRevision: 'web-a', revision: 'web-b' },
          }),
          podOrdinal: 0,
        }),
      );
      expect(partition.alert).toBe('UpdatePartitioned');
    });

    it('alert-only and a pod being deleted come first, as before', () => {
      expect(
        planHeal(input({ owner: rolling(), policy: { mode: 'alert-only', minRestartIntervalMs: 0 } })).alert,
      ).toBe('AlertOnly');
      expect(planHeal(input({ owner: rolling(), podTerminating: true })).alert).toBe('PodTerminating');
    });
  });

  it('opens the circuit when this pod came from that restart and still drifts', () => {
    const plan = planHeal(
      input({ owner: deployment({ [ANNOTATION.configHash]: 'new' }), podConfigHash: 'new' }),
    );
    expect(plan).toMatchObject({ decision: 'alert', alert: 'CircuitOpen' });
  });

  it('waits out the minimum interval between restarts', () => {
    const recent = new Date(NOW - 60_000).toISOString();
    const plan = planHeal(
      input({ owner: deployment({ [ANNOTATION.restartedAt]: recent, [ANNOTATION.configHash]: 'older' }) }),
    );
    expect(plan).toMatchObject({ decision: 'alert', alert: 'RateLimited', retryAt: NOW + 240_000 });
  });

  it('restarts again once the interval has passed and the config changed', () => {
    const long = new Date(NOW - 600_000).toISOString();
    expect(
      planHeal(
        input({ owner: deployment({ [ANNOTATION.restartedAt]: long, [ANNOTATION.configHash]: 'older' }) }),
      ).decision,
    ).toBe('restart');
  });

  it('alert-only never restarts', () => {
    expect(planHeal(input({ policy: { mode: 'alert-only', minRestartIntervalMs: 0 } }))).toMatchObject({
      decision: 'alert',
      alert: 'AlertOnly',
    });
  });

  it('a pod being deleted never restarts its workload, however its files drift; and with nothing drifted it does nothing', () => {
    const plan = planHeal(input({ podTerminating: true }));
    expect(plan).toMatchObject({ decision: 'alert', alert: 'PodTerminating' });
    expect(plan.reasons).toEqual([
      'app:/etc/app: ContentDrift: files differ',
      'not restarting: this pod is being deleted; the pods that replace it mount the sources afresh',
    ]);
    expect(planHeal(input({ podTerminating: true, verdicts: [inSync] })).decision).toBe('none');
    // A source gone from the API still says so first: it is what breaks the pods to come.
    expect(planHeal(input({ podTerminating: true, verdicts: [drifted, sourceMissing] })).alert).toBe(
      'SourceMissing',
    );
  });

  it('reports, never touches, an owner it does not restart', () => {
    const plan = planHeal(input({ owner: { type: 'unsupported', description: 'Job batch-1' } }));
    expect(plan).toMatchObject({ decision: 'alert', alert: 'UnsupportedOwner' });
    expect(plan.reasons.at(-1)).toBe(
      'not restarting: Job batch-1 is not a Deployment, StatefulSet, DaemonSet or Rollout',
    );
  });

  describe('a workload that would replace no pod (WorkloadPaused, UpdateOnDelete)', () => {
    const held = (
      kind: 'Deployment' | 'StatefulSet',
      rolloutHeld: 'paused' | 'on-delete',
      annotations: Record<string, string> = {},
    ): OwnerState => ({
      type: 'workload',
      workload: { kind, name: 'web', resourceVersion: '42', restartAnnotations: annotations, rolloutHeld },
    });

    it('restarts a paused Deployment, so that its resume brings one rollout, and says the restart waits for the resume', () => {
      const plan = planHeal(input({ owner: held('Deployment', 'paused') }));
      const paused =
        'Deployment web is paused: a restart rolls out only when it is resumed (kubectl rollout resume deployment/web)';
      expect(plan).toMatchObject({ decision: 'restart', paused });
      expect(plan.alert).toBeUndefined();
      expect(plan.reasons).toEqual([
        'app:/etc/app: ContentDrift: files differ',
        'restart Deployment web with config new, if its restart annotations are still as read at resourceVersion 42 (no restart by config-sync yet); a replica that restarts it first makes this one dedupe',
        paused,
      ]);
      // Not paused: no such line.
      expect(planHeal(input()).paused).toBeUndefined();
    });

    it('does not restart a StatefulSet that replaces pods only when they are deleted', () => {
      const plan = planHeal(input({ owner: held('StatefulSet', 'on-delete') }));
      expect(plan).toMatchObject({ decision: 'alert', alert: 'UpdateOnDelete' });
      expect(plan.reasons.at(-1)).toBe(
        'not restarting: StatefulSet web replaces a pod only when the pod is deleted (updateStrategy OnDelete), so a restart would replace none; delete this pod for one with the current config',
      );
    });

    it('never says new pods are on their way where none come: a restart for this config already made is held too', () => {
      const paused = planHeal(
        input({ owner: held('Deployment', 'paused', { [ANNOTATION.configHash]: 'new' }) }),
      );
      expect(paused).toMatchObject({ decision: 'alert', alert: 'WorkloadPaused' });
      expect(paused.reasons.at(-1)).toBe(
        'Deployment web was restarted for config new, but it is paused: no new pods come until it is resumed (kubectl rollout resume deployment/web)',
      );
      const onDelete = planHeal(
        input({ owner: held('StatefulSet', 'on-delete', { [ANNOTATION.configHash]: 'new' }) }),
      );
      expect(onDelete).toMatchObject({ decision: 'alert', alert: 'UpdateOnDelete' });
      expect(onDelete.reasons.at(-1)).toBe(
        'StatefulSet web was restarted for config new, but it replaces a pod only when the pod is deleted (updateStrategy OnDelete): delete this pod for one with that config',
      );
    });

    it('still opens the circuit for a pod that came from the restart, and still waits for nothing drifted', () => {
      expect(
        planHeal(
          input({
            owner: held('Deployment', 'paused', { [ANNOTATION.configHash]: 'new' }),
            podConfigHash: 'new',
          }),
        ).alert,
      ).toBe('CircuitOpen');
      expect(planHeal(input({ owner: held('Deployment', 'paused'), verdicts: [inSync] })).decision).toBe(
        'none',
      );
    });

    it("does not restart a StatefulSet whose rolling update partition is above this pod's ordinal; at or below it, restarts", () => {
      const staged = (annotations: Record<string, string> = {}): OwnerState => ({
        type: 'workload',
        workload: {
          kind: 'StatefulSet',
          name: 'db',
          resourceVersion: '42',
          restartAnnotations: annotations,
          updatePartition: 2,
        },
      });
      const below = planHeal(input({ owner: staged(), podOrdinal: 1 }));
      expect(below).toMatchObject({ decision: 'alert', alert: 'UpdatePartitioned' });
      expect(below.reasons.at(-1)).toBe(
        'not restarting: a restart of StatefulSet db would not replace this pod: only its pods of ordinal 2 and above are replaced (rolling update partition 2), and this pod is ordinal 1; lower the partition, or delete this pod for one with the current config',
      );
      expect(planHeal(input({ owner: staged(), podOrdinal: 2 })).decision).toBe('restart');
      // A sibling at ordinal 2 or above restarted it: here no new pod comes.
      const restarted = planHeal(input({ owner: staged({ [ANNOTATION.configHash]: 'new' }), podOrdinal: 0 }));
      expect(restarted).toMatchObject({ decision: 'alert', alert: 'UpdatePartitioned' });
      expect(restarted.reasons.at(-1)).toBe(
        'StatefulSet db was restarted for config new, but only its pods of ordinal 2 and above are replaced (rolling update partition 2), and this pod is ordinal 0: lower the partition, or delete this pod for one with that config',
      );
      expect(
        planHeal(input({ owner: staged({ [ANNOTATION.configHash]: 'new' }), podOrdinal: 3 })).decision,
      ).toBe('deduped');
      // An ordinal not known: planned as before.
      expect(planHeal(input({ owner: staged() })).decision).toBe('restart');
    });

    it('is told before any drift (doctor), as the plan would say it, and is nothing where a restart would replace the pod', () => {
      const workload = (over: object) => ({
        kind: 'StatefulSet' as const,
        name: 'db',
        resourceVersion: '1',
        restartAnnotations: null,
        ...over,
      });
      expect(restartHeldLine(workload({ rolloutHeld: 'on-delete' }), undefined)).toBe(
        'StatefulSet db replaces a pod only when the pod is deleted (updateStrategy OnDelete), so a restart would replace none; delete this pod for one with the current config',
      );
      expect(restartHeldLine(workload({ updatePartition: 2 }), 1)).toContain('this pod is ordinal 1');
      expect(restartHeldLine(workload({ updatePartition: 2 }), 2)).toBeUndefined();
      expect(restartHeldLine(workload({}), 0)).toBeUndefined();
    });

    it('is named before a rate limit (which no wait would lift) and after alert-only and a pod being deleted', () => {
      const recent = new Date(NOW - 60_000).toISOString();
      const restartedRecently = { [ANNOTATION.restartedAt]: recent, [ANNOTATION.configHash]: 'older' };
      expect(planHeal(input({ owner: held('StatefulSet', 'on-delete', restartedRecently) })).alert).toBe(
        'UpdateOnDelete',
      );
      // A paused Deployment is restarted, so the rate limit applies to it as to any restart.
      expect(planHeal(input({ owner: held('Deployment', 'paused', restartedRecently) })).alert).toBe(
        'RateLimited',
      );
      expect(
        planHeal(
          input({
            owner: held('Deployment', 'paused'),
            policy: { mode: 'alert-only', minRestartIntervalMs: 0 },
          }),
        ).alert,
      ).toBe('AlertOnly');
      expect(planHeal(input({ owner: held('Deployment', 'paused'), podTerminating: true })).alert).toBe(
        'PodTerminating',
      );
    });
  });
});

describe('planHeal: a source that says never restart for it (step 5b)', () => {
  const other: Verdict = { ...drifted, target: 'app:/etc/other' };
  const never = new Map([['app:/etc/app', ['ConfigMap/shared-ca says config-sync.io/restart=never']]]);

  it('alerts, never restarts, where every drifted target drifts only in such sources', () => {
    const plan = planHeal(input({ neverRestart: never }));
    expect(plan).toMatchObject({ decision: 'alert', alert: 'NeverRestart' });
    expect(plan.reasons.at(-1)).toBe(
      'not restarting: ConfigMap/shared-ca says config-sync.io/restart=never; the drift is reported, and healed when its Pods are replaced for another reason',
    );
  });

  it('restarts where another target drifts too: that restart heals both', () => {
    expect(planHeal(input({ verdicts: [drifted, other], neverRestart: never })).decision).toBe('restart');
  });

  it('says nothing of it in alert-only mode, where nothing restarts anyway', () => {
    const plan = planHeal(
      input({ neverRestart: never, policy: { mode: 'alert-only', minRestartIntervalMs: 0 } }),
    );
    expect(plan.alert).toBe('AlertOnly');
    expect(plan.reasons.at(-1)).toBe('not restarting: --on-drift alert-only');
  });

  it('names a Pod annotation as where alert-only came from', () => {
    const plan = planHeal(
      input({
        policy: {
          mode: 'alert-only',
          minRestartIntervalMs: 0,
          modeFrom: 'config-sync.io/on-drift=alert-only on the Pod',
        },
      }),
    );
    expect(plan.reasons.at(-1)).toBe('not restarting: config-sync.io/on-drift=alert-only on the Pod');
  });
});
