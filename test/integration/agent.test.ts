// The agent end to end, as separate processes against the real API, with exactly the shipped
// Role and kubelet-style mounts: the scenarios, each in a namespace of its own.
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  createApp,
  prepareAgentPod,
  SECRET_VALUE,
  sample,
  templateAnnotations,
  updateConfig,
  webDeployment,
  writeMount,
} from './support-app.ts';

const running: AgentProcess[] = [];
function agent(pod: AppPod, args: string[] = []): AgentProcess {
  const a = AgentProcess.start(pod, args);
  running.push(a);
  return a;
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

async function podCondition(admin: KubeConfig, namespace: string, name: string) {
  const pod = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name, namespace });
  return {
    condition: pod.status?.conditions?.find((c) => c.type === 'config-sync.io/InSync'),
    annotations: pod.metadata?.annotations ?? {},
  };
}

async function events(admin: KubeConfig, namespace: string, pod: string) {
  const list = await admin
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
  return list.items;
}

async function replicaSets(admin: KubeConfig, namespace: string): Promise<number> {
  return (
    await admin.makeApiClient(AppsV1Api).listNamespacedReplicaSet({ namespace, labelSelector: 'app=web' })
  ).items.length;
}

describe('in sync, then a normal propagation', () => {
  const ns = useNamespace('agent-sync');

  it('reports InSync, measures propagation, never restarts, and stops cleanly on SIGTERM', async () => {
    const [pod] = await createApp(ns.admin, ns.name, 1);
    const a = agent(pod as AppPod, ['--grace', '30s']);
    await a.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');

    await waitFor(
      async () =>
        (await podCondition(ns.admin, ns.name, (pod as AppPod).name)).condition?.status === 'True' ||
        undefined,
      {
        what: 'the InSync condition True',
      },
    );
    const { annotations } = await podCondition(ns.admin, ns.name, (pod as AppPod).name);
    expect(Date.parse(annotations['config-sync.io/last-config-sync'] ?? '')).toBeGreaterThan(
      Date.now() - 60_000,
    );
    expect(annotations['config-sync.io/matched-versions']).toMatch(/^ConfigMap\/web-config@\d+$/);
    let metrics = await a.metrics();
    expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
    expect(sample(metrics, 'config_hash_mismatch_total', { name: 'web-config' })).toBeUndefined();
    expect(
      sample(metrics, 'config_sync_checks_total', {
        namespace: ns.name,
        kind: 'ConfigMap',
        name: 'web-config',
      }),
    ).toBeGreaterThan(0);

    // The API changes; kubelet takes a moment, then swaps the files.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
    writeMount((pod as AppPod).mountRoot, { 'app.yaml': 'level: debug\n' });
    const propagated = await a.waitFor((l) => l.msg === 'propagated', 'the propagation time');
    expect(propagated.propagationSeconds).toBeGreaterThan(0);
    expect(propagated.propagationSeconds).toBeLessThan(30);
    metrics = await a.metrics();
    expect(sample(metrics, 'config_sync_propagation_seconds_count')).toBe(1);
    expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
    expect(await templateAnnotations(ns.admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);

    expect(await a.stop()).toBe(0);
    expect(a.lines.at(-1)?.msg).toBe('stopped');
  });
});
