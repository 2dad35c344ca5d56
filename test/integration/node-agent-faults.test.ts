// The stale-view rules hold for every Pod the node agent serves, as for the sidecar
// (stale-view.test.ts): a change made while the node agent cannot see the API, which kubelet
// delivers at once, must not be called drift, and a real drift must still be healed exactly once
// when the node agent itself restarts in the middle of it. Two Pods of web on a node with no
// kubelet (test/integration/support-node.ts), the node agent through the test's proxy.
import fs from 'node:fs';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Deployment } from '@kubernetes/client-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { AgentProcess } from '../cluster/app.ts';
import { podsOf, propagateVolume } from '../cluster/node-sim.ts';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import { sample, templateAnnotations, updateConfig } from './support-app.ts';
import { type SimNodeAgent, simNodeAgent } from './support-node.ts';

const ns = useNamespace('node-faults');
let sim: SimNodeAgent;
let agent: AgentProcess | undefined;

/** web: 2 replicas, opted in by annotation, reading web-config as a volume and, by subPath, its log.yaml. */
function web(subPath: boolean): V1Deployment {
  const labels = { app: 'web' };
  return {
    metadata: { name: 'web' },
    spec: {
      replicas: 2,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels, annotations: { 'config-sync.io/node-agent': 'enabled' } },
        spec: {
          volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
          containers: [
            {
              name: 'app',
              image: 'config-sync.invalid/app:never-pulled',
              volumeMounts: [
                { name: 'config', mountPath: '/etc/app' },
                ...(subPath ? [{ name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml' }] : []),
              ],
            },
          ],
        },
      },
    },
  };
}

async function setUp(admin: KubeConfig, subPath: boolean, args: string[]) {
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: ns.name,
    body: {
      metadata: { name: 'web-config' },
      data: { 'app.yaml': 'level: info\n', 'log.yaml': 'format: json\n' },
    },
  });
  await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace: ns.name, body: web(subPath) });
  const pods = [];
  for (const p of await podsOf(admin, ns.name, 'web', 2))
    pods.push(await sim.place(ns.name, p.metadata?.name ?? ''));
  agent = sim.start(args);
  await waitFor(
    async () => {
      const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
      return list.items.every((p) =>
        p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True'),
      ) && list.items.length === 2
        ? true
        : undefined;
    },
    { what: 'both Pods InSync', timeoutMs: 30_000 },
  );
  return pods;
}

beforeEach(async () => {
  sim = await simNodeAgent(ns.admin, [ns.name], 'faults');
});

afterEach(async () => {
  if (agent) expect(await agent.stop()).toBe(0);
  agent = undefined;
  await sim.remove();
  const apps = ns.admin.makeApiClient(AppsV1Api);
  await apps.deleteNamespacedDeployment({ name: 'web', namespace: ns.name }).catch(() => {});
  await ns.admin
    .makeApiClient(CoreV1Api)
    .deleteCollectionNamespacedPod({ namespace: ns.name, gracePeriodSeconds: 0 })
    .catch(() => {});
  await ns.admin
    .makeApiClient(CoreV1Api)
    .deleteNamespacedConfigMap({ name: 'web-config', namespace: ns.name })
    .catch(() => {});
});

/** No drift reported and no restart, for every Pod: the central promise of a stale view. */
async function expectNoDriftActedOn(admin: KubeConfig, a: AgentProcess) {
  expect(a.lines.filter((l) => l.state === 'Drifted' || l.msg === 'restarted workload')).toEqual([]);
  expect(await templateAnnotations(admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);
}

/**
 * Until both Pods of web record a match with `version` of web-config (the annotation the node
 * agent writes with InSync): however the node agent got there (propagated within grace, or a
 * drift its fresh read did not confirm), it caught up.
 */
async function bothMatched(version: string, a: AgentProcess): Promise<void> {
  await waitFor(
    async () => {
      const list = await ns.admin
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
      return list.items.every(
        (p) =>
          p.metadata?.annotations?.['config-sync.io/matched-versions'] === `ConfigMap/web-config@${version}`,
      )
        ? true
        : undefined;
    },
    {
      what: 'both Pods matched on the new version',
      timeoutMs: 40_000,
      onTimeout: () => a.raw.slice(-25).join('\n'),
    },
  );
}

describe('the node agent under API faults', () => {
  it('a partition while a change is made and kubelet delivers it: no drift, no restart, for either Pod', async () => {
    const pods = await setUp(ns.admin, false, ['--grace', '2s']);
    const a = agent as AgentProcess;
    sim.proxy.stall();
    const version = await updateConfig(ns.admin, ns.name, {
      'app.yaml': 'level: debug\n',
      'log.yaml': 'format: json\n',
    });
    for (const p of pods) await propagateVolume(ns.admin, sim.kubeletRoot, p, 'config');
    // Past the grace, with the API unreachable: the files changed, the node agent's copy is old,
    // and it cannot confirm: Unknown, never Drifted.
    await new Promise((resolve) => setTimeout(resolve, 5_000));
    sim.proxy.resume();
    await bothMatched(version, a);
    await expectNoDriftActedOn(ns.admin, a);
  }, 90_000);

  it('410 Gone on every watch while a change is made and delivered: relisted, no drift, no restart', async () => {
    const pods = await setUp(ns.admin, false, ['--grace', '2s']);
    const a = agent as AgentProcess;
    sim.proxy.answerGone(5);
    sim.proxy.endWatches();
    const version = await updateConfig(ns.admin, ns.name, {
      'app.yaml': 'level: warn\n',
      'log.yaml': 'format: json\n',
    });
    for (const p of pods) await propagateVolume(ns.admin, sim.kubeletRoot, p, 'config');
    await waitFor(() => (sim.proxy.requests.some((r) => r.gone) ? true : undefined), {
      what: 'a watch answered 410',
    });
    await bothMatched(version, a);
    expect(
      sample(await a.metrics(), 'config_sync_api_watch_restarts_total', {
        kind: 'ConfigMap',
        reason: 'gone',
      }),
    ).toBeGreaterThan(0);
    await expectNoDriftActedOn(ns.admin, a);
  }, 90_000);

  it('the node agent restarted in the middle of a subPath drift: the workload restarted exactly once', async () => {
    await setUp(ns.admin, true, ['--debounce', '3s']);
    const first = agent as AgentProcess;
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: info\n', 'log.yaml': 'format: text\n' });
    // It saw the change (within the debounce: not yet drift), then it is gone.
    await first.waitFor(
      (l) => l.state === 'Propagating' && l.target === 'app:/etc/log.yaml',
      'the change seen',
    );
    first.kill();
    agent = sim.start(['--debounce', '3s']);
    const second = agent;
    await second.waitFor((l) => l.msg === 'restarted workload', 'the restart by the new node agent', 30_000);
    await waitFor(
      () =>
        second.lines.filter((l) => l.pod?.toString().startsWith('web-') && typeof l.decision === 'string')
          .length >= 2
          ? true
          : undefined,
      { what: "both Pods' heal decisions", timeoutMs: 20_000 },
    );
    expect(second.lines.filter((l) => l.msg === 'restarted workload')).toHaveLength(1);
    expect(first.lines.filter((l) => l.msg === 'restarted workload')).toHaveLength(0);
    const history = (await templateAnnotations(ns.admin, ns.name))['config-sync.io/restarts'] ?? '';
    expect(history.split(' ').filter(Boolean)).toHaveLength(1);
  }, 90_000);

  it("a file tampered with in kubelet's directory: found by the next --resync, ContentDrift on that Pod", async () => {
    const pods = await setUp(ns.admin, false, ['--grace', '2s', '--resync', '3s']);
    const a = agent as AgentProcess;
    const victim = pods[0];
    const volume = path.join(
      sim.kubeletRoot,
      'pods',
      victim?.metadata?.uid ?? '',
      'volumes/kubernetes.io~configmap/config',
    );
    fs.writeFileSync(path.join(volume, '..data', 'app.yaml'), 'level: tampered\n');
    await a.waitFor(
      (l) => l.pod === victim?.metadata?.name && l.state === 'Drifted' && l.reason === 'ContentDrift',
      'ContentDrift on the tampered Pod',
      20_000,
    );
    expect(a.lines.some((l) => l.pod === pods[1]?.metadata?.name && l.state === 'Drifted')).toBe(false);
  }, 60_000);
});
