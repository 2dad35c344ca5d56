// An Argo Rollout (argoproj.io/v1alpha1), the workload kind added by one row of the workload
// table: its CRD installed in the real API server, its ReplicaSet made as the Rollout controller
// makes it (no Argo controller runs here), the ReplicaSet controller making the Pods. Two agents
// see one drift: exactly one restart, through spec.restartAt, the template untouched; doctor
// finds the owner and prints the Role for it; the agent's token may restart the Rollout and
// nothing else; a Pod made by the restart that still drifts opens the circuit.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  type V1ReplicaSet,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKubeClient } from '../../src/kube/client.ts';
import { resolveScope } from '../../src/kube/scope.ts';
import { gatherScopeFacts } from '../../src/kube/scope-facts.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, rejection, useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  applyRbac,
  cli,
  expectOneRestart,
  prepareAgentPod,
  root,
  SECRET_VALUE,
  updateConfig,
  webDeployment,
} from './support-app.ts';

const ns = useNamespace('rollout');
const running: AgentProcess[] = [];
afterAll(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

function kubectl(args: string[], input?: string): string {
  const run = spawnSync(controlPlane().kubectl, ['--kubeconfig', controlPlane().adminKubeconfig, ...args], {
    encoding: 'utf8',
    ...(input === undefined ? {} : { input }),
  });
  if (run.status !== 0) throw new Error(`kubectl ${args.join(' ')}: ${run.stderr}`);
  return run.stdout;
}

const rollouts = (admin: KubeConfig) => admin.makeApiClient(CustomObjectsApi);
const rolloutRef = () => ({
  group: 'argoproj.io',
  version: 'v1alpha1',
  namespace: ns.name,
  plural: 'rollouts',
  name: 'web',
});

interface Rollout {
  metadata: { uid: string; resourceVersion: string; annotations?: Record<string, string> };
  spec: { restartAt?: string; template: { metadata?: { annotations?: Record<string, string> } } };
}

const readRollout = async () => (await rollouts(ns.admin).getNamespacedCustomObject(rolloutRef())) as Rollout;

/** What the Rollout controller does for a revision: a ReplicaSet it owns, labelled with a hash. */
async function replicaSetOf(rollout: Rollout, hash: string, replicas: number): Promise<string> {
  const template = webDeployment(replicas).spec?.template;
  const labels = { app: 'web', 'rollouts-pod-template-hash': hash };
  const rs: V1ReplicaSet = {
    metadata: {
      name: `web-${hash}`,
      labels,
      ownerReferences: [
        {
          apiVersion: 'argoproj.io/v1alpha1',
          kind: 'Rollout',
          name: 'web',
          uid: rollout.metadata.uid,
          controller: true,
          blockOwnerDeletion: true,
        },
      ],
    },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: { ...template, metadata: { labels } },
    },
  };
  await ns.admin.makeApiClient(AppsV1Api).createNamespacedReplicaSet({ namespace: ns.name, body: rs });
  return `web-${hash}`;
}

async function podsOf(replicaSet: string, replicas: number): Promise<string[]> {
  return waitFor(
    async () => {
      const list = await ns.admin.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ns.name });
      const names = list.items
        .filter((p) => p.metadata?.ownerReferences?.some((o) => o.name === replicaSet))
        .map((p) => p.metadata?.name ?? '');
      return names.length === replicas ? names : undefined;
    },
    { what: `${replicas} Pods of ReplicaSet ${replicaSet}` },
  );
}

async function agentClient(pod: AppPod) {
  const facts = await gatherScopeFacts(
    { serviceAccountDir: pod.env.CONFIG_SYNC_SERVICE_ACCOUNT_DIR },
    pod.env,
  );
  return createKubeClient(resolveScope(facts, 'agent'));
}

beforeAll(() => {
  kubectl(['apply', '-f', path.join(root, 'test/fixtures/rollout-crd.yaml')]);
  kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/rollouts.argoproj.io']);
});

describe('an Argo Rollout', () => {
  let pods: AppPod[] = [];
  let rollout: Rollout;

  it('doctor finds it as the owner and prints the Role that lets the agent restart it', async () => {
    applyRbac(ns.name);
    const core = ns.admin.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'web-config' }, data: { 'app.yaml': 'level: info\n' } },
    });
    await core.createNamespacedSecret({
      namespace: ns.name,
      body: { metadata: { name: 'web-secrets' }, stringData: { password: SECRET_VALUE } },
    });
    await rollouts(ns.admin).createNamespacedCustomObject({
      ...rolloutRef(),
      body: {
        apiVersion: 'argoproj.io/v1alpha1',
        kind: 'Rollout',
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: { app: 'web' } },
          template: webDeployment(2).spec?.template,
          strategy: { canary: { steps: [{ setWeight: 50 }] } },
        },
      },
    });
    rollout = await readRollout();
    const names = await podsOf(await replicaSetOf(rollout, '5c8f7d', 2), 2);
    pods = await Promise.all(
      names.map((name) => prepareAgentPod(ns.admin, ns.name, name, { 'app.yaml': 'level: info\n' })),
    );

    const first = pods[0] as AppPod;
    const run = await cli(['doctor', '--fix', '-o', 'json'], first.env);
    const report = JSON.parse(run.stdout) as { ownerChain: string[]; fix?: string };
    expect(report.ownerChain).toEqual(['ReplicaSet web-5c8f7d', 'Rollout web']);
    expect(report.fix).toContain('argoproj.io');
    expect(report.fix).toContain('rollouts');
    kubectl(['apply', '-f', '-'], report.fix);
    const again = await cli(['doctor'], first.env);
    expect(again.status).toBe(0);
  });

  it('two agents, one drift: exactly one restart, through spec.restartAt, the template untouched', async () => {
    for (const p of pods) running.push(AgentProcess.start(p, ['--grace', '1s']));
    await Promise.all(running.map((a) => a.waitFor((l) => l.state === 'InSync', 'InSync')));
    const templateBefore = rollout.spec.template;

    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const restarted = await expectOneRestart(running, 60_000);
    expect(restarted.workload).toMatchObject({ kind: 'Rollout', name: 'web' });

    rollout = await readRollout();
    expect(rollout.spec.restartAt).toBe(rollout.metadata.annotations?.['kubectl.kubernetes.io/restartedAt']);
    expect(rollout.metadata.annotations?.['config-sync.io/config-hash']).toBe(restarted?.configHash);
    // A changed template would be a new revision: a whole canary rollout, not a restart.
    expect(rollout.spec.template).toEqual(templateBefore);
  });

  it("the agent's token may restart the Rollout and change nothing else in it (admission policy)", async () => {
    const client = await agentClient(pods[0] as AppPod);
    const target = {
      group: 'argoproj.io',
      version: 'v1alpha1',
      resource: 'rollouts',
      namespace: ns.name,
      name: 'web',
    };
    for (const [patch, message] of [
      [{ spec: { replicas: 0 } }, 'may change only spec.restartAt'],
      [{ spec: { template: { spec: { serviceAccountName: 'default' } } } }, 'may change only spec.restartAt'],
      [{ spec: { strategy: null } }, 'may change only spec.restartAt'],
      [{ metadata: { annotations: { 'other.io/x': 'y' } } }, 'may change only the Rollout annotations'],
      [{ metadata: { labels: { team: 'attacker' } } }, "may not change a Rollout's labels"],
    ] as const) {
      const refused = await rejection(client.patch(target, patch, 'merge'));
      expect(refused.code).toBe(403);
      expect(refused.message).toContain(message);
    }
    // A restart is allowed (a server-side dry run: the real one happened above).
    await client.patch(
      target,
      {
        metadata: {
          annotations: { 'kubectl.kubernetes.io/restartedAt': 'later', 'config-sync.io/config-hash': 'x' },
        },
        spec: { restartAt: new Date().toISOString() },
      },
      'merge',
      { dryRun: 'All' },
    );
  });

  it('a Pod made by the restart that still drifts opens the circuit: no second restart', async () => {
    // What the Rollout controller does for restartAt: new Pods, created after it.
    const names = await podsOf(await replicaSetOf(rollout, '7b9d2f', 1), 1);
    const fresh = await prepareAgentPod(ns.admin, ns.name, names[0] as string, {
      'app.yaml': 'level: info\n',
    });
    const agent = AgentProcess.start(fresh, ['--grace', '1s']);
    running.push(agent);
    await agent.waitFor((l) => l.alert === 'CircuitOpen', 'CircuitOpen', 60_000);
    expect((await readRollout()).metadata.resourceVersion).toBe(rollout.metadata.resourceVersion);
  });
});
