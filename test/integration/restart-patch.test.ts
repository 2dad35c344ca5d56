// The restart patch (heal/executor.ts) against the real API server, sent in the agent's own
// identity (a token bound to its Pod, the shipped Role and admission policies). It applies while
// the restart annotations are as the plan read them, whatever else changed on the workload since
// (a rolling workload's status is updated all the time); a sibling's restart refuses it, as a
// conflict to re-plan; a patch the server refuses for any other reason is an error, never a
// conflict (which would re-plan and send it again forever).
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { restartWorkload } from '../../src/heal/executor.ts';
import { readWorkload } from '../../src/heal/owner.ts';
import type { Plan } from '../../src/heal/planner.ts';
import { ANNOTATION } from '../../src/kube/annotations.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { controlPlane, inClusterClient, useNamespace } from './support.ts';
import { applyRbac, firstPod, webDeployment } from './support-app.ts';

const ns = useNamespace('restart-patch');
let client: KubeClient;

beforeAll(async () => {
  applyRbac(ns.name);
  await ns.admin.makeApiClient(CoreV1Api).createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'web-config' }, data: { 'app.yaml': 'level: info\n' } },
  });
  // webDeployment's template has labels and no annotations.
  await ns.admin
    .makeApiClient(AppsV1Api)
    .createNamespacedDeployment({ namespace: ns.name, body: webDeployment(1) });
  const pod = await firstPod(ns.admin, ns.name, 'web');
  const agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'config-sync-agent',
    existingServiceAccount: true,
    bindToPod: pod,
  });
  const layout = layInClusterDir(tempDir('restart-patch-'), controlPlane(), {
    token: agent.token,
    namespace: ns.name,
  });
  client = await inClusterClient(layout, ns.name);
});

/** A restart plan for `configHash`, made from the Deployment as the agent reads it now. */
async function restartPlan(configHash: string): Promise<Plan> {
  const owner = await readWorkload(client, ns.name, 'Deployment', 'web');
  if (owner.type !== 'workload') throw new Error('web is not readable as a workload');
  const w = owner.workload;
  const history = w.restartAnnotations?.[ANNOTATION.restarts];
  return {
    decision: 'restart',
    workload: {
      kind: w.kind,
      name: w.name,
      resourceVersion: w.resourceVersion,
      annotations: w.restartAnnotations,
      ...(history === undefined ? {} : { history }),
    },
    configHash,
    reasons: [],
    drifted: [],
  };
}

const deployment = () =>
  ns.admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: 'web', namespace: ns.name });

describe('the restart patch', () => {
  it('a template with no annotations: restarted, the restart annotations added', async () => {
    const plan = await restartPlan('cfg-1');
    expect(plan.workload?.annotations).toBeNull();
    const now = new Date();
    expect(await restartWorkload(client, ns.name, plan, now)).toBe('restarted');
    const annotations = (await deployment()).spec?.template.metadata?.annotations;
    expect(annotations).toEqual({
      [ANNOTATION.restartedAt]: now.toISOString(),
      [ANNOTATION.configHash]: 'cfg-1',
      [ANNOTATION.restarts]: now.toISOString(),
    });
  });

  it('the workload changed elsewhere since the read (its status): still restarted, not a conflict', async () => {
    const plan = await restartPlan('cfg-2');
    const before = (await deployment()).metadata?.resourceVersion;
    await ns.admin.makeApiClient(AppsV1Api).patchNamespacedDeploymentStatus({
      name: 'web',
      namespace: ns.name,
      body: [
        {
          op: 'add',
          path: '/status/conditions',
          value: [{ type: 'ConfigSyncTest', status: 'True', reason: 'Test', message: 'a status update' }],
        },
      ],
    });
    expect((await deployment()).metadata?.resourceVersion).not.toBe(before);
    expect(await restartWorkload(client, ns.name, plan, new Date())).toBe('restarted');
    expect((await deployment()).spec?.template.metadata?.annotations?.[ANNOTATION.configHash]).toBe('cfg-2');
  });

  it('two siblings planned from the same read: one restart, the other refused as a conflict', async () => {
    const first = await restartPlan('cfg-3');
    const second = await restartPlan('cfg-3');
    const firstAt = new Date();
    expect(await restartWorkload(client, ns.name, first, firstAt)).toBe('restarted');
    expect(await restartWorkload(client, ns.name, second, new Date(firstAt.getTime() + 1000))).toBe(
      'conflict',
    );
    const annotations = (await deployment()).spec?.template.metadata?.annotations;
    expect(annotations?.[ANNOTATION.restartedAt]).toBe(firstAt.toISOString());
    expect(annotations?.[ANNOTATION.restarts]?.split(' ')).toHaveLength(3);
  });

  it('a patch refused for another reason (an annotation too long): an error, not a conflict', async () => {
    const plan = await restartPlan('x'.repeat(300_000));
    const before = (await deployment()).spec?.template.metadata?.annotations;
    await expect(restartWorkload(client, ns.name, plan, new Date())).rejects.toThrow(/422|Too long|too long/);
    expect((await deployment()).spec?.template.metadata?.annotations).toEqual(before);
  });
});
