// Measure 11, the node agent past this machine's one node, by simulation: BENCH_SIM_PODS Pods
// (500 by default) bound to a Node object with no kubelet, whose kubelet directory the bench lays
// out itself as kubelet does (test/cluster/node-sim.ts), reading 150 distinct objects, and one
// node agent process against the real API server. Rows (report, beside a bare `node` process
// in the same run):
//  - its memory (RSS and anonymous) once every Pod is InSync, then after the idle window;
//  - the API watches it holds (one per distinct object: 150) and its requests at idle, per hour;
//  - the time from its start until every Pod's InSync condition is written;
//  - one shared ConfigMap changed under 200 of the Pods, kubelet's new files laid out at once:
//    the status writes it cost, and the time until every one of the 200 matched the new version.
// The layout: Pods 0..199 mount `shared-big`; the others one of 9 `shared-<n>`; every Pod one of
// 140 `own-<n>` besides: 150 objects.
import fs from 'node:fs';
import path from 'node:path';
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { bin } from '../test/cluster/app.ts';
import type { ControlPlane } from '../test/cluster/control-plane.ts';
import { createServiceAccountIdentity } from '../test/cluster/identities.ts';
import { layInClusterDir, podEnv } from '../test/cluster/in-cluster.ts';
import { atomicWrite, configMapPayload } from '../test/cluster/kubelet-volume.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { apiRequestsByVerb, metricsOf, processMemory, ready, spawnAgent } from './lib/processes.ts';
import { idleSeconds, sidecarEnv, work } from './lib/settings.ts';
import { fmt, log, rows } from './lib/table.ts';

const PODS = Number(process.env.BENCH_SIM_PODS ?? 500);
const SHARED_BIG_PODS = Math.min(200, PODS);
const OWN = 140;
const SHARED = 9;

function podSpec(i: number, node: string): V1Pod {
  const shared = i < SHARED_BIG_PODS ? 'shared-big' : `shared-${i % SHARED}`;
  return {
    metadata: { name: `sim-${i}`, annotations: { 'config-sync.io/node-agent': 'enabled' } },
    spec: {
      nodeName: node,
      automountServiceAccountToken: false,
      volumes: [
        { name: 'shared', configMap: { name: shared } },
        { name: 'own', configMap: { name: `own-${i % OWN}` } },
      ],
      containers: [
        {
          name: 'app',
          image: 'config-sync.invalid/app:never-pulled',
          volumeMounts: [
            { name: 'shared', mountPath: '/etc/shared' },
            { name: 'own', mountPath: '/etc/own' },
          ],
        },
      ],
    },
  };
}

/** Runs `task` over `items`, `width` at a time. */
async function inBatches<T>(
  items: readonly T[],
  width: number,
  task: (item: T) => Promise<unknown>,
): Promise<void> {
  for (let i = 0; i < items.length; i += width) await Promise.all(items.slice(i, i + width).map(task));
}

export async function nodeSimRows(kc: KubeConfig, plane: ControlPlane): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const namespace = 'bench-sim';
  const node = 'bench-sim-node';
  log(`node agent by simulation: ${PODS} Pods, ${OWN + SHARED + 1} objects`);
  await core.createNamespace({ body: { metadata: { name: namespace } } });
  await core.createNode({ body: { metadata: { name: node } } });
  const data = (name: string) => ({ 'app.yaml': `name: ${name}\n`, 'extra.yaml': 'x: 1\n' });
  const names = [
    'shared-big',
    ...Array.from({ length: SHARED }, (_, n) => `shared-${n}`),
    ...Array.from({ length: OWN }, (_, n) => `own-${n}`),
  ];
  await inBatches(names, 20, (name) =>
    core.createNamespacedConfigMap({ namespace, body: { metadata: { name }, data: data(name) } }),
  );
  const root = path.join(work, 'sim-kubelet');
  const startedAt = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const pods: V1Pod[] = [];
  await inBatches(
    Array.from({ length: PODS }, (_, i) => i),
    25,
    async (i) => {
      const pod = await core.createNamespacedPod({ namespace, body: podSpec(i, node) });
      pods[i] = pod;
      await core.patchNamespacedPodStatus({
        name: pod.metadata?.name ?? '',
        namespace,
        // client-node sends a JSON patch.
        body: [
          {
            op: 'replace',
            path: '/status',
            value: {
              phase: 'Running',
              containerStatuses: [
                {
                  name: 'app',
                  image: 'x',
                  imageID: '',
                  ready: true,
                  restartCount: 0,
                  state: { running: { startedAt } },
                },
              ],
            },
          },
        ],
      });
      for (const v of pod.spec?.volumes ?? []) {
        const dir = path.join(
          root,
          'pods',
          pod.metadata?.uid ?? '',
          'volumes/kubernetes.io~configmap',
          v.name,
        );
        fs.mkdirSync(dir, { recursive: true });
        atomicWrite(dir, configMapPayload({ data: data(v.configMap?.name ?? '') }));
      }
    },
  );

  // The node agent's identity: the shipped ClusterRole's rules in this namespace, and namespaces.
  const identity = await createServiceAccountIdentity(kc, {
    namespace,
    name: 'config-sync-node',
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'patch'] },
      { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
      { apiGroups: [''], resources: ['configmaps', 'secrets'], verbs: ['get', 'list', 'watch'] },
    ],
  });
  // Its namespace, by name, for the opt-in label (cluster-scoped: a ClusterRole, as deploy/node's).
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.createClusterRole({
    body: {
      metadata: { name: 'bench-sim-namespaces' },
      rules: [
        {
          apiGroups: [''],
          resources: ['namespaces'],
          verbs: ['get', 'list', 'watch'],
          resourceNames: [namespace],
        },
      ],
    },
  });
  await rbac.createClusterRoleBinding({
    body: {
      metadata: { name: 'bench-sim-namespaces' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'bench-sim-namespaces' },
      subjects: [{ kind: 'ServiceAccount', name: 'config-sync-node', namespace }],
    },
  });
  const layout = layInClusterDir(path.join(work, 'sim-agent'), plane.info, {
    token: identity.token,
    namespace,
  });
  fs.mkdirSync(path.join(work, 'sim-state'), { recursive: true });
  const port = 9700;
  const t0 = performance.now();
  const { child: agent } = spawnAgent(
    [bin, 'node', '--listen', `127.0.0.1:${port}`, '--grace', '10m', '--log-level', 'warn'],
    {
      ...podEnv(layout, namespace, 'node-agent'),
      ...sidecarEnv,
      NODE_NAME: node,
      CONFIG_SYNC_NAMESPACES: namespace,
      CONFIG_SYNC_KUBELET_ROOT: root,
      CONFIG_SYNC_STATE_DIR: path.join(work, 'sim-state'),
    },
  );
  try {
    await ready(port);
    const inSync = async (selected: readonly V1Pod[], version?: (p: V1Pod) => boolean) => {
      const list = await core.listNamespacedPod({ namespace });
      const want = new Set(selected.map((p) => p.metadata?.name));
      return list.items.filter(
        (p) =>
          want.has(p.metadata?.name) &&
          p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True') &&
          (version?.(p) ?? true),
      ).length;
    };
    await waitFor(async () => ((await inSync(pods)) === PODS ? true : undefined), {
      what: `all ${PODS} Pods InSync`,
      timeoutMs: 600_000,
      intervalMs: 1000,
    });
    const toInSync = (performance.now() - t0) / 1000;
    const url = `http://127.0.0.1:${port}/metrics`;
    const metricsNow = await metricsOf(url);
    const watches = Number(/^config_sync_node_source_watches (\S+)$/m.exec(metricsNow)?.[1]);
    const memInSync = processMemory(agent.pid ?? 0);
    const before = apiRequestsByVerb(metricsNow);
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const after = apiRequestsByVerb(await metricsOf(url));
    const memIdle = processMemory(agent.pid ?? 0);
    const idleRequests = Object.entries(after)
      .filter(([verb]) => verb !== 'watch')
      .reduce((sum, [verb, n]) => sum + n - (before[verb] ?? 0), 0);
    rows.push({
      what: `node agent, simulated node: ${PODS} Pods, ${names.length} objects: RSS InSync / after ${idleSeconds} s idle`,
      ours: `${fmt(memInSync.total)} / ${fmt(memIdle.total)} MiB (anonymous ${fmt(memIdle.anonymous)})`,
      baseline: '-',
      relation: `${fmt((memIdle.total * 1024) / PODS, 0)} KiB a Pod`,
      target: 'reported',
      ok: true,
    });
    rows.push({
      what: `node agent, simulated node: API watches held; requests at idle`,
      ours: `${watches} watches; ${fmt((idleRequests * 3600) / idleSeconds, 0)} requests/hour`,
      baseline: `${names.length} distinct objects`,
      relation: `${fmt(watches / names.length, 2)} watches an object`,
      target: 'one watch per object',
      ok: watches === names.length,
    });
    rows.push({
      what: `node agent, simulated node: start -> all ${PODS} InSync written`,
      ours: `${fmt(toInSync)} s`,
      baseline: '-',
      relation: '-',
      target: 'reported',
      ok: true,
    });

    // One shared ConfigMap changed under SHARED_BIG_PODS Pods, kubelet's files at once.
    const big = pods.slice(0, SHARED_BIG_PODS);
    const patchesBefore = apiRequestsByVerb(await metricsOf(url)).patch ?? 0;
    const updated = await core.replaceNamespacedConfigMap({
      name: 'shared-big',
      namespace,
      body: {
        metadata: { name: 'shared-big' },
        data: { ...data('shared-big'), 'app.yaml': 'name: changed\n' },
      },
    });
    const t1 = performance.now();
    for (const p of big)
      atomicWrite(
        path.join(root, 'pods', p.metadata?.uid ?? '', 'volumes/kubernetes.io~configmap/shared'),
        configMapPayload({ data: { ...data('shared-big'), 'app.yaml': 'name: changed\n' } }),
      );
    const rv = updated.metadata?.resourceVersion ?? '';
    const matched = (p: V1Pod) =>
      (p.metadata?.annotations?.['config-sync.io/matched-versions'] ?? '').includes(
        `ConfigMap/shared-big@${rv}`,
      );
    await waitFor(async () => ((await inSync(big, matched)) === big.length ? true : undefined), {
      what: `the ${big.length} Pods matched on the new version`,
      timeoutMs: 300_000,
      intervalMs: 500,
    });
    const toNew = (performance.now() - t1) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 3000));
    const writes = (apiRequestsByVerb(await metricsOf(url)).patch ?? 0) - patchesBefore;
    rows.push({
      what: `node agent, simulated node: a shared ConfigMap changed under ${big.length} Pods`,
      ours: `${writes} status writes; every verdict new in ${fmt(toNew)} s`,
      baseline: `${big.length} Pods`,
      relation: `${fmt(writes / big.length, 2)} writes a Pod`,
      target: `<= ${big.length} writes`,
      ok: writes <= big.length,
    });
  } finally {
    agent.kill('SIGTERM');
    await core.deleteNamespace({ name: namespace }).catch(() => {});
    await core.deleteNode({ name: node }).catch(() => {});
    await rbac.deleteClusterRoleBinding({ name: 'bench-sim-namespaces' }).catch(() => {});
    await rbac.deleteClusterRole({ name: 'bench-sim-namespaces' }).catch(() => {});
  }
}
