// One table of workload kinds (kube/resources.ts) and what follows from a row of it: the owner
// walk, the restart patch, the planner's circuit, the permissions, inject. Argo Rollouts is the
// row that shows a new kind needs nothing else.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { restartPatch } from '../../src/heal/executor.ts';
import {
  ownerResolver,
  podOrdinalOf,
  podOwnerStep,
  replicaSetOwnerStep,
  rolloutHeldBy,
  supersededRevisions,
  updatePartitionOf,
  workloadState,
} from '../../src/heal/owner.ts';
import { type PlanInput, planHeal } from '../../src/heal/planner.ts';
import { injectManifests } from '../../src/inject/inject.ts';
import { DEFAULT_SIDECAR } from '../../src/inject/sidecar.ts';
import { ANNOTATION } from '../../src/kube/annotations.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { requiredAccess, rulesFor } from '../../src/kube/permissions.ts';
import {
  RESTARTABLE_KINDS,
  WORKLOADS,
  workloadNamedByReplicaSet,
  workloadRef,
  workloadType,
} from '../../src/kube/resources.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const owned = (apiVersion: string, kind: string, name: string) => ({
  ownerReferences: [{ apiVersion, kind, name, uid: 'u', controller: true }],
});
const pod = (apiVersion: string, kind: string, name: string): V1Pod => ({
  metadata: { name: 'p', ...owned(apiVersion, kind, name) },
});

describe('the workload table', () => {
  it('names each kind by its group, so a Rollout of another group is not one', () => {
    expect(workloadType('apps/v1', 'Deployment')?.resource).toBe('deployments');
    expect(workloadType('argoproj.io/v1alpha1', 'Rollout')?.resource).toBe('rollouts');
    expect(workloadType('example.com/v1', 'Rollout')).toBeUndefined();
    expect(workloadType('batch/v1', 'Job')).toBeUndefined();
    // A manifest without apiVersion (inject's input) is matched by kind alone.
    expect(workloadType(undefined, 'StatefulSet')?.group).toBe('apps');
  });

  it('gives the REST reference of a workload from its row', () => {
    expect(workloadRef('Rollout', 'shop', 'web')).toEqual({
      group: 'argoproj.io',
      version: 'v1alpha1',
      resource: 'rollouts',
      namespace: 'shop',
      name: 'web',
    });
  });

  it('names every kind in messages', () => {
    expect(RESTARTABLE_KINDS).toBe('Deployment, StatefulSet, DaemonSet or Rollout');
  });
});

describe('a workload whose rollout is held, from its row', () => {
  it('is a paused Deployment, and a StatefulSet or DaemonSet updating on delete', () => {
    expect(rolloutHeldBy('Deployment', { spec: { paused: true } })).toBe('paused');
    expect(rolloutHeldBy('Deployment', { spec: { paused: false } })).toBeUndefined();
    expect(rolloutHeldBy('Deployment', {})).toBeUndefined();
    for (const kind of ['StatefulSet', 'DaemonSet'] as const) {
      expect(rolloutHeldBy(kind, { spec: { updateStrategy: { type: 'OnDelete' } } })).toBe('on-delete');
      expect(rolloutHeldBy(kind, { spec: { updateStrategy: { type: 'RollingUpdate' } } })).toBeUndefined();
      expect(rolloutHeldBy(kind, { spec: {} })).toBeUndefined();
      // Only a Deployment's controller reads spec.paused.
      expect(rolloutHeldBy(kind, { spec: { paused: true } })).toBeUndefined();
    }
    expect(rolloutHeldBy('Deployment', { spec: { updateStrategy: { type: 'OnDelete' } } })).toBeUndefined();
  });

  it("is never a Rollout: Argo's restart deletes its pods one by one, paused or not", () => {
    expect(WORKLOADS.Rollout.rolloutGate).toBeUndefined();
    expect(
      rolloutHeldBy('Rollout', { spec: { paused: true, updateStrategy: { type: 'OnDelete' } } }),
    ).toBeUndefined();
  });
});

describe("a StatefulSet's staged rollout (its update partition)", () => {
  it('is the partition above 0 of a rolling update, for a StatefulSet only', () => {
    const sts = (updateStrategy: object) => ({ spec: { updateStrategy } });
    expect(updatePartitionOf('StatefulSet', sts({ rollingUpdate: { partition: 3 } }))).toBe(3);
    expect(
      updatePartitionOf('StatefulSet', sts({ type: 'RollingUpdate', rollingUpdate: { partition: 3 } })),
    ).toBe(3);
    expect(updatePartitionOf('StatefulSet', sts({ rollingUpdate: { partition: 0 } }))).toBeUndefined();
    expect(updatePartitionOf('StatefulSet', sts({}))).toBeUndefined();
    // OnDelete holds every Pod already (rolloutHeldBy); its partition means nothing.
    expect(
      updatePartitionOf('StatefulSet', sts({ type: 'OnDelete', rollingUpdate: { partition: 3 } })),
    ).toBeUndefined();
    expect(updatePartitionOf('DaemonSet', sts({ rollingUpdate: { partition: 3 } }))).toBeUndefined();
  });

  it("reads a pod's ordinal from its pod-index label, else from the number its name ends in", () => {
    expect(
      podOrdinalOf({ metadata: { name: 'db-4', labels: { 'apps.kubernetes.io/pod-index': '7' } } }),
    ).toBe(7);
    expect(podOrdinalOf({ metadata: { name: 'db-4' } })).toBe(4);
    expect(podOrdinalOf({ metadata: { name: 'web-7d9f-abcde' } })).toBeUndefined();
    expect(
      podOrdinalOf({ metadata: { name: 'db', labels: { 'apps.kubernetes.io/pod-index': 'x' } } }),
    ).toBeUndefined();
    expect(podOrdinalOf(undefined)).toBeUndefined();
  });
});

describe('the owner walk', () => {
  it.each([
    [
      'a StatefulSet directly',
      pod('apps/v1', 'StatefulSet', 'db'),
      { type: 'workload', kind: 'StatefulSet', name: 'db' },
    ],
    [
      'a DaemonSet directly',
      pod('apps/v1', 'DaemonSet', 'agent'),
      { type: 'workload', kind: 'DaemonSet', name: 'agent' },
    ],
    [
      'a ReplicaSet, to be read',
      pod('apps/v1', 'ReplicaSet', 'web-7d9f'),
      { type: 'replicaset', name: 'web-7d9f' },
    ],
    [
      'a Job: unsupported',
      pod('batch/v1', 'Job', 'migrate'),
      { type: 'unsupported', description: 'Job migrate' },
    ],
    [
      'a Rollout directly (it owns ReplicaSets, never Pods): unsupported',
      pod('argoproj.io/v1alpha1', 'Rollout', 'web'),
      { type: 'unsupported', description: 'Rollout web' },
    ],
    [
      'no controller',
      { metadata: { name: 'p' } },
      { type: 'unsupported', description: 'Pod p (no controller)' },
    ],
  ] as const)('from the Pod: %s', (_, p, step) => {
    expect(podOwnerStep(p as V1Pod)).toEqual(step);
  });

  it.each([
    [
      'a Deployment',
      owned('apps/v1', 'Deployment', 'web'),
      { type: 'workload', kind: 'Deployment', name: 'web' },
    ],
    [
      'a Rollout',
      owned('argoproj.io/v1alpha1', 'Rollout', 'web'),
      { type: 'workload', kind: 'Rollout', name: 'web' },
    ],
    [
      'a StatefulSet (never owns a ReplicaSet): unsupported',
      owned('apps/v1', 'StatefulSet', 'db'),
      { type: 'unsupported', description: 'ReplicaSet rs-1 (owned by StatefulSet db)' },
    ],
    ['no owner', {}, { type: 'unsupported', description: 'ReplicaSet rs-1 (no owner)' }],
  ] as const)('from the ReplicaSet: %s', (_, meta, step) => {
    expect(replicaSetOwnerStep('rs-1', meta)).toEqual(step);
  });
});

describe('a pod of an older pod template (supersededRevisions)', () => {
  it("takes the Pod's revision from its ReplicaSet (a Deployment) or its own label (a StatefulSet)", () => {
    const rs = {
      ...owned('apps/v1', 'Deployment', 'web'),
      annotations: { 'deployment.kubernetes.io/revision': '4' },
    };
    expect(replicaSetOwnerStep('web-4', rs)).toEqual({
      type: 'workload',
      kind: 'Deployment',
      name: 'web',
      podRevision: '4',
    });
    const p = pod('apps/v1', 'StatefulSet', 'db') as V1Pod;
    p.metadata = { ...p.metadata, labels: { 'controller-revision-hash': 'db-7c9d' } };
    expect(podOwnerStep(p)).toEqual({
      type: 'workload',
      kind: 'StatefulSet',
      name: 'db',
      podRevision: 'db-7c9d',
    });
    // A DaemonSet's Pods carry the label too, but its status names no update revision.
    const d = pod('apps/v1', 'DaemonSet', 'agent') as V1Pod;
    d.metadata = { ...d.metadata, labels: { 'controller-revision-hash': 'agent-1' } };
    expect(podOwnerStep(d)).toEqual({ type: 'workload', kind: 'DaemonSet', name: 'agent' });
  });

  it("compares it with the workload's current one: a Deployment's revision, a StatefulSet's update revision", () => {
    const deployment = { metadata: { annotations: { 'deployment.kubernetes.io/revision': '5' } } };
    expect(supersededRevisions('Deployment', deployment, '4')).toEqual({ podRevision: '4', revision: '5' });
    expect(supersededRevisions('Deployment', deployment, '5')).toBeUndefined();
    expect(supersededRevisions('Deployment', {}, '4')).toBeUndefined();
    expect(supersededRevisions('Deployment', deployment, undefined)).toBeUndefined();
    const sts = { status: { updateRevision: 'db-8e1f' } };
    expect(supersededRevisions('StatefulSet', sts, 'db-7c9d')).toEqual({
      podRevision: 'db-7c9d',
      revision: 'db-8e1f',
    });
    expect(supersededRevisions('StatefulSet', sts, 'db-8e1f')).toBeUndefined();
    expect(supersededRevisions('Rollout', deployment, '4')).toBeUndefined();
    // And the state the planner gets carries it.
    const state = workloadState('Deployment', 'web', deployment, '4');
    expect(state.type === 'workload' && state.workload.podSuperseded).toEqual({
      podRevision: '4',
      revision: '5',
    });
  });
});

describe("the agent's owner lookup (ownerResolver)", () => {
  // A client that answers the ReplicaSet and the Deployment, and records what it was asked.
  function apiWith(deployment: object, rsRevision: string) {
    const asked: string[] = [];
    const client = {
      get: async (target: { resource: string }) => {
        asked.push(target.resource);
        if (target.resource === 'replicasets')
          return {
            metadata: {
              ...owned('apps/v1', 'Deployment', 'web'),
              annotations: { 'deployment.kubernetes.io/revision': rsRevision },
            },
          };
        return deployment;
      },
    } as unknown as KubeClient;
    return { client, asked };
  }
  const webPod = pod('apps/v1', 'ReplicaSet', 'web-5d8f');
  const atRevision = (revision: string) => ({
    metadata: { resourceVersion: '9', annotations: { 'deployment.kubernetes.io/revision': revision } },
  });

  it('finds the chain at the start, then reads the workload alone', async () => {
    const { client, asked } = apiWith(atRevision('2'), '2');
    const owner = ownerResolver(client, 'shop', webPod);
    await owner.warm();
    expect(asked).toEqual(['replicasets']);
    const state = await owner.read();
    expect(state).toMatchObject({ type: 'workload', workload: { kind: 'Deployment', name: 'web' } });
    expect(asked).toEqual(['replicasets', 'deployments']);
  });

  it('a newer revision: superseded by the cached revision, marked so; the ReplicaSet is read again when asked', async () => {
    const { client, asked } = apiWith(atRevision('3'), '2');
    const owner = ownerResolver(client, 'shop', webPod);
    await owner.warm();
    const cached = await owner.read();
    expect(cached.type === 'workload' && cached.workload.podSuperseded).toEqual({
      podRevision: '2',
      revision: '3',
      cached: true,
    });
    expect(asked).toEqual(['replicasets', 'deployments']);
    const checked = await owner.read({ recheckRevision: true });
    expect(checked.type === 'workload' && checked.workload.podSuperseded).toEqual({
      podRevision: '2',
      revision: '3',
    });
    expect(asked).toEqual(['replicasets', 'deployments', 'deployments', 'replicasets']);
  });

  it('a ReplicaSet that could not be read at the start is read at the first use', async () => {
    const { client, asked } = apiWith(atRevision('2'), '2');
    let refuse = true;
    const flaky = {
      get: async (target: { resource: string }) => {
        if (refuse) throw new Error('no answer');
        return client.get(target as never);
      },
    } as unknown as KubeClient;
    const owner = ownerResolver(flaky, 'shop', webPod);
    await owner.warm();
    refuse = false;
    expect(await owner.read()).toMatchObject({ type: 'workload' });
    expect(asked).toEqual(['replicasets', 'deployments']);
  });
});

describe('the restart patch', () => {
  const now = new Date('2026-12-03T12:00:00.500Z');
  const t = now.toISOString();
  it('for the apps kinds: tests the pod template annotations as read, then adds the three', () => {
    const asRead = { team: 'a', [ANNOTATION.configHash]: 'cfg-0' };
    expect(restartPatch(WORKLOADS.Deployment.restart, asRead, 'cfg-1', now)).toEqual([
      { op: 'test', path: '/spec/template/metadata/annotations', value: asRead },
      { op: 'add', path: '/spec/template/metadata/annotations/kubectl.kubernetes.io~1restartedAt', value: t },
      { op: 'add', path: '/spec/template/metadata/annotations/config-sync.io~1config-hash', value: 'cfg-1' },
      { op: 'add', path: '/spec/template/metadata/annotations/config-sync.io~1restarts', value: t },
    ]);
  });

  it('a template with no annotations: tests that there are none, then adds the map', () => {
    expect(restartPatch(WORKLOADS.StatefulSet.restart, null, 'cfg-1', now)).toEqual([
      { op: 'test', path: '/spec/template/metadata/annotations', value: null },
      {
        op: 'add',
        path: '/spec/template/metadata/annotations',
        value: { [ANNOTATION.restartedAt]: t, [ANNOTATION.configHash]: 'cfg-1', [ANNOTATION.restarts]: t },
      },
    ]);
  });

  it('for a Rollout: the annotations on the Rollout itself and spec.restartAt, its template untouched', () => {
    const asRead = { [ANNOTATION.restarts]: '2026-12-03T11:30:00.000Z' };
    expect(restartPatch(WORKLOADS.Rollout.restart, asRead, 'cfg-1', now, '2026-12-03T11:30:00.000Z')).toEqual(
      [
        { op: 'test', path: '/metadata/annotations', value: asRead },
        { op: 'add', path: '/metadata/annotations/kubectl.kubernetes.io~1restartedAt', value: t },
        { op: 'add', path: '/metadata/annotations/config-sync.io~1config-hash', value: 'cfg-1' },
        {
          op: 'add',
          path: '/metadata/annotations/config-sync.io~1restarts',
          value: `2026-12-03T11:30:00.000Z ${t}`,
        },
        { op: 'add', path: '/spec/restartAt', value: t },
      ],
    );
  });
});

describe('the circuit for a Rollout, whose Pods do not inherit the config hash', () => {
  const drifted: Verdict = {
    target: 'app:/etc/app',
    state: 'Drifted',
    reason: 'ContentDrift',
    message: 'files differ',
    mismatches: [],
  };
  const restartedAt = Date.parse('2026-12-03T12:00:00.500Z');
  const input = (podCreatedAt: number | undefined): PlanInput => ({
    verdicts: [drifted],
    owner: {
      type: 'workload',
      workload: {
        kind: 'Rollout',
        name: 'web',
        resourceVersion: '7',
        restartAnnotations: {
          [ANNOTATION.configHash]: 'cfg-1',
          [ANNOTATION.restartedAt]: new Date(restartedAt).toISOString(),
        },
      },
    },
    podConfigHash: undefined,
    podCreatedAt,
    expectedConfigHash: 'cfg-1',
    policy: { mode: 'restart', minRestartIntervalMs: 0 },
    now: restartedAt + 60_000,
  });

  it('a Pod created before the restart: a sibling restarted it already (deduped)', () => {
    expect(planHeal(input(restartedAt - 5_000)).decision).toBe('deduped');
  });

  it('a Pod created by the restart (its second, whole seconds as the API gives them) that still drifts: CircuitOpen', () => {
    const plan = planHeal(input(Math.floor(restartedAt / 1000) * 1000));
    expect(plan.decision).toBe('alert');
    expect(plan.alert).toBe('CircuitOpen');
  });

  it('a Deployment Pod without the hash is never taken for one made by the restart', () => {
    const deployment = input(restartedAt + 10_000);
    const owner = deployment.owner as Extract<PlanInput['owner'], { type: 'workload' }>;
    const plan = planHeal({
      ...deployment,
      owner: { ...owner, workload: { ...owner.workload, kind: 'Deployment' } },
    });
    expect(plan.decision).toBe('deduped');
  });
});

describe('permissions and inject from the same row', () => {
  it("a Rollout's Role: get and patch on rollouts.argoproj.io by name, get on its ReplicaSet", () => {
    const rules = rulesFor(
      requiredAccess({
        namespace: 'x',
        sources: [],
        replicaSet: 'web-5c8f',
        workload: { kind: 'Rollout', name: 'web' },
      }),
    );
    expect(rules).toContainEqual({
      apiGroups: ['argoproj.io'],
      resources: ['rollouts'],
      verbs: ['get', 'patch'],
      resourceNames: ['web'],
    });
    expect(rules).toContainEqual({ apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] });
  });

  it('inject adds the sidecar to the pod template of a Rollout', () => {
    const manifest = `apiVersion: argoproj.io/v1alpha1
kind: Rollout
metadata:
  name: web
spec:
  template:
    spec:
      volumes:
        - name: config
          configMap:
            name: web-config
      containers:
        - name: app
          image: app:1
          volumeMounts:
            - name: config
              mountPath: /etc/app
`;
    const result = injectManifests(manifest, 'rollout.yaml', DEFAULT_SIDECAR);
    expect(result.injected).toEqual(['Rollout web']);
    expect(result.output).toContain('name: config-sync');
  });
});

describe('a workload named from its ReplicaSet, without reading it (fleet, doctor)', () => {
  it.each([
    ['web-5c8f7d', { 'pod-template-hash': '5c8f7d' }, { kind: 'Deployment', name: 'web' }],
    ['web-5c8f7d', { 'rollouts-pod-template-hash': '5c8f7d' }, { kind: 'Rollout', name: 'web' }],
    ['my-app-v2-6d4b', { 'pod-template-hash': '6d4b' }, { kind: 'Deployment', name: 'my-app-v2' }],
    // a hash the name does not end in, a name that is only the hash, no label: not named
    ['web-5c8f7d', { 'pod-template-hash': 'aaaa' }, undefined],
    ['5c8f7d', { 'pod-template-hash': '5c8f7d' }, undefined],
    ['web-5c8f7d', {}, undefined],
    ['web-5c8f7d', undefined, undefined],
  ] as const)('%s with labels %j: %j', (replicaSet, labels, named) => {
    expect(workloadNamedByReplicaSet(replicaSet, labels)).toEqual(named);
  });
});
