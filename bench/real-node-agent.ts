// Measure 12, on the real node: the node agent's cost as Kubernetes counts it beside the
// sidecar's, in one run. For 1, 10 and 30 Pods: deploy/sidecar's example scaled to that many
// Pods (each with its sidecar) in one namespace, and as many Pods of the same shape without a
// sidecar in another, served by deploy/node's DaemonSet. Rows:
//  - the node agent's container working set (cgroup) against one sidecar's (the mean of the
//    sidecars), after a quiet spell at each size; goal with 30 Pods: one sidecar + 15 MiB;
//  - API watches: the sidecars' together (one per source per Pod) against the node agent's
//    (one per distinct object): goal, the node agent's equal to the distinct objects;
//  - with 30 Pods, a change kubelet propagates (a key of the ConfigMap volume): the node
//    agent's status writes; goal, at most one a Pod.
import path from 'node:path';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { root } from '../test/cluster/app.ts';
import type { ControlPlaneInfo } from '../test/cluster/control-plane.ts';
import { nodeAgentManifests } from '../test/cluster/node-agent-manifests.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { containerIdOf, containerMemory } from './lib/cgroup.ts';
import { apiRequestsByVerb, metricsOf } from './lib/processes.ts';
import { fmt, log, rows, signed } from './lib/table.ts';

const SIZES = [1, 10, 30] as const;
/** How long each size idles before its working sets are read. */
const QUIET_MS = 30_000;

/** A Pod template like the example's app: the ConfigMap volume, its subPath file, the Secret in env. */
function plainApp(replicas: number) {
  const labels = { app: 'plain' };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'plain' },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          automountServiceAccountToken: false,
          containers: [
            {
              name: 'app',
              image: 'registry.k8s.io/pause:3.10',
              env: [
                {
                  name: 'DB_PASSWORD',
                  valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'password' } },
                },
              ],
              volumeMounts: [
                { name: 'config', mountPath: '/etc/app', readOnly: true },
                { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml', readOnly: true },
              ],
            },
          ],
          volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
        },
      },
    },
  };
}

const inSync = (p: V1Pod) =>
  !p.metadata?.deletionTimestamp &&
  p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True');

export async function nodeAgentOnRealNode(
  kc: KubeConfig,
  plane: ControlPlaneInfo,
  kubectl: (...args: string[]) => Promise<string>,
  apply: (objects: readonly unknown[], namespace?: string) => Promise<void>,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const sidecars = 'bench-sidecars';
  const served = 'bench-node-agent';
  await kubectl('create', 'namespace', sidecars);
  await kubectl('create', 'namespace', served);
  await kubectl('label', 'namespace', served, 'config-sync.io/node-agent=enabled');
  const example = path.join(root, 'deploy/sidecar');
  await kubectl('apply', '-k', example, '-n', sidecars);
  await kubectl(
    'apply',
    '-n',
    served,
    '-f',
    path.join(example, 'example/configmap.yaml'),
    '-f',
    path.join(example, 'example/secret.yaml'),
  );
  await apply(nodeAgentManifests(plane, [served]));
  const agentPod = await waitFor(
    async () =>
      (await core.listNamespacedPod({ namespace: 'config-sync' })).items.find((p) =>
        p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
      ),
    { what: 'the node agent Ready', timeoutMs: 120_000, intervalMs: 500 },
  );
  const agentId = containerIdOf(agentPod, 'node') ?? '';
  const agentMetrics = `http://${agentPod.status?.podIP}:9464/metrics`;

  for (const size of SIZES) {
    log(`real node: ${size} Pods with sidecars, ${size} served by the node agent`);
    await kubectl('-n', sidecars, 'scale', 'deployment', 'web', `--replicas=${size}`);
    await apply([plainApp(size)], served);
    const { web } = await waitFor(
      async () => {
        const w = (
          await core.listNamespacedPod({ namespace: sidecars, labelSelector: 'app=web' })
        ).items.filter((p) => !p.metadata?.deletionTimestamp);
        const p = (
          await core.listNamespacedPod({ namespace: served, labelSelector: 'app=plain' })
        ).items.filter((x) => !x.metadata?.deletionTimestamp);
        return w.length === size && p.length === size && w.every(inSync) && p.every(inSync)
          ? { web: w, plain: p }
          : undefined;
      },
      { what: `${size} + ${size} Pods InSync`, timeoutMs: 300_000, intervalMs: 1000 },
    );
    await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
    const sidecarMem = web.map((p) => containerMemory(containerIdOf(p, 'config-sync') ?? ''));
    const meanSidecar = sidecarMem.reduce((a, m) => a + m.total, 0) / sidecarMem.length;
    const agentMem = containerMemory(agentId);
    const metrics = await metricsOf(agentMetrics);
    const watches = Number(/^config_sync_node_source_watches (\S+)$/m.exec(metrics)?.[1]);
    const goal = size === 30 ? meanSidecar + 15 : undefined;
    rows.push({
      what: `real node: node agent for ${size} Pod(s), container working set (cgroup) after ${QUIET_MS / 1000} s quiet`,
      ours: `${fmt(agentMem.total)} MiB (anonymous ${fmt(agentMem.anonymous)})`,
      baseline: `${size} sidecar(s): ${fmt(meanSidecar)} MiB each, ${fmt(meanSidecar * size)} in all`,
      relation: `${signed(agentMem.total - meanSidecar)} MiB against one sidecar`,
      target: goal === undefined ? 'reported' : '<= one sidecar + 15 MiB',
      ok: goal === undefined || agentMem.total <= goal,
    });
    rows.push({
      what: `real node: API watches for ${size} Pod(s) (2 objects: web-config, web-secrets)`,
      ours: `node agent ${watches}`,
      // Each sidecar watches each source of its own Pod.
      baseline: `sidecars ${2 * size} (one per source per Pod)`,
      relation: '-',
      target: 'one per distinct object',
      ok: watches === 2,
    });
  }

  // A change kubelet propagates to the 30 Pods' volume: the node agent's status writes.
  const before = apiRequestsByVerb(await metricsOf(agentMetrics)).patch ?? 0;
  const version = Number(Date.now());
  await kubectl(
    '-n',
    served,
    'patch',
    'configmap',
    'web-config',
    '--type',
    'merge',
    '-p',
    JSON.stringify({ data: { 'app.yaml': `level: ${version}\n` } }),
  );
  const rv = (await core.readNamespacedConfigMap({ name: 'web-config', namespace: served })).metadata
    ?.resourceVersion;
  await waitFor(
    async () => {
      const pods = (await core.listNamespacedPod({ namespace: served, labelSelector: 'app=plain' })).items;
      return pods.every((p) =>
        p.metadata?.annotations?.['config-sync.io/matched-versions']?.includes(`ConfigMap/web-config@${rv}`),
      )
        ? true
        : undefined;
    },
    { what: 'the 30 Pods matched on the new version', timeoutMs: 120_000, intervalMs: 500 },
  ).catch(() => log('the propagated change did not reach every Pod: its writes are counted anyway'));
  await new Promise((resolve) => setTimeout(resolve, 3000));
  const writes = (apiRequestsByVerb(await metricsOf(agentMetrics)).patch ?? 0) - before;
  rows.push({
    what: "real node: a change kubelet propagates to 30 Pods, the node agent's status writes",
    ours: `${writes}`,
    baseline: '30 Pods (was 2 a Pod: Propagating, then InSync)',
    relation: `${fmt(writes / 30, 2)} a Pod`,
    target: '<= 30',
    ok: writes <= 30,
  });
  await kubectl('delete', 'namespace', sidecars, served, '--wait=false');
}
