// Measure 10, on a real node (root on Linux; test/cluster/node.ts): cost as Kubernetes counts
// it, from each container's own cgroup, against a bare `node` container of the same image; the
// memory of an agent in a Pod after an hour's worth of compares; and reload mode in a real Pod.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { CoreV1Api, KubeConfig, type V1Deployment, type V1Pod } from '@kubernetes/client-node';
import { SIDECAR_NODE_OPTIONS } from '../src/inject/sidecar.ts';
import { bin } from '../test/cluster/app.ts';
import {
  buildNodeImages,
  ensureNodePackages,
  resolveAssets,
  resolveNodeAssets,
} from '../test/cluster/assets.ts';
import { ControlPlane } from '../test/cluster/control-plane.ts';
import { KubeNode, nodeUnsupported } from '../test/cluster/node.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { containerIdOf, containerMemory, cpuNanos } from './lib/cgroup.ts';
import { widenExampleConfig } from './lib/example-config.ts';
import { apiRequestsByVerb, metricsOf, watchRestartsByReason } from './lib/processes.ts';
import { compareSeconds, idleSeconds, only } from './lib/settings.ts';
import { fmt, log, memoryGoal, percentile, type Resident, rows, signed } from './lib/table.ts';
import { nodeAgentOnRealNode } from './real-node-agent.ts';
import { reloadOnRealNode } from './real-node-reload.ts';

const runAsync = promisify(execFile);

export async function onRealNode(): Promise<void> {
  const why = process.env.BENCH_NODE === '0' ? 'BENCH_NODE=0' : nodeUnsupported();
  if (why) {
    log(`no real-node measures: ${why}`);
    return;
  }
  if (process.env.BENCH_SIDECAR_ENV)
    log('BENCH_SIDECAR_ENV is not applied on the real node: its rows run the image as shipped');
  log('starting a control plane and a real node');
  ensureNodePackages();
  const nodeWork = fs.mkdtempSync(path.join(os.tmpdir(), 'config-sync-bench-node-'));
  const images = buildNodeImages(path.join(nodeWork, 'images'));
  const plane = await ControlPlane.start({ assets: resolveAssets(), log });
  let node: KubeNode | undefined;
  try {
    node = await KubeNode.start({ plane: plane.info, assets: resolveNodeAssets(), imagesDir: images, log });
    const kubectl = async (...args: string[]) =>
      (
        await runAsync(plane.info.kubectl, ['--kubeconfig', plane.info.adminKubeconfig, ...args], {
          encoding: 'utf8',
        })
      ).stdout;
    if (only('nodeagent')) {
      const kcAdmin = new KubeConfig();
      kcAdmin.loadFromFile(plane.info.adminKubeconfig);
      const apply = async (objects: readonly unknown[], namespace?: string) => {
        const file = path.join(nodeWork, `apply-${Date.now()}.json`);
        fs.writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
        await kubectl(...(namespace ? ['-n', namespace] : []), 'apply', '-f', file);
      };
      await nodeAgentOnRealNode(kcAdmin, plane.info, kubectl, apply);
    }
    if (!only('node')) return;
    const namespace = 'bench-node';
    await kubectl('create', 'namespace', namespace);
    await kubectl('apply', '-k', path.join(bin, '../../deploy/sidecar'), '-n', namespace);
    // The baseline: the same image's Node binary, idle, with the agent's NODE_OPTIONS, serving
    // HTTP on the sidecar's port with the sidecar's own probes (copied from the example as
    // applied): kubelet's probes cost any HTTP server CPU (about 0.03 % of a core at these
    // periods, measured), and that is the example's choice, not the agent's work.
    const applied = JSON.parse(
      await kubectl('get', 'deployment', 'web', '-n', namespace, '-o', 'json'),
    ) as V1Deployment;
    const sidecar = applied.spec?.template.spec?.initContainers?.find((c) => c.name === 'config-sync');
    if (!sidecar?.readinessProbe) throw new Error('the example has no config-sync sidecar with probes');
    const bare = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'bare-node' },
      spec: {
        securityContext: { runAsNonRoot: true, runAsUser: 65532 },
        containers: [
          {
            name: 'node',
            image: 'config-sync:0.1.0',
            command: [
              '/nodejs/bin/node',
              '-e',
              "require('http').createServer((q, s) => s.end('ok')).listen(9464)",
            ],
            env: [{ name: 'NODE_OPTIONS', value: SIDECAR_NODE_OPTIONS }],
            ports: sidecar.ports,
            startupProbe: sidecar.startupProbe,
            readinessProbe: sidecar.readinessProbe,
            livenessProbe: sidecar.livenessProbe,
          },
        ],
      },
    };
    const manifest = path.join(nodeWork, 'bare.json');
    fs.writeFileSync(manifest, JSON.stringify(bare));
    await kubectl('apply', '-n', namespace, '-f', manifest);
    const kc = new KubeConfig();
    kc.loadFromFile(plane.info.adminKubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const pods = await waitFor(
      async () => {
        const list = (await core.listNamespacedPod({ namespace })).items;
        const web = list.filter((p) => p.metadata?.labels?.app === 'web');
        const inSync = (p: V1Pod) =>
          p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True');
        const b = list.find((p) => p.metadata?.name === 'bare-node');
        return web.length === 2 && web.every(inSync) && b?.status?.phase === 'Running'
          ? { web, bare: b }
          : undefined;
      },
      { what: 'the example Pods InSync and the bare node Pod Running', timeoutMs: 120_000, intervalMs: 500 },
    );
    const agents = pods.web.map((p) => containerIdOf(p, 'config-sync') ?? '');
    const bareId = containerIdOf(pods.bare, 'node') ?? '';

    // Propagation first, then the idle window (so the window starts quiet).
    const propagation: number[] = [];
    for (let i = 0; i < 10; i += 1) {
      const before = propagation.length;
      await kubectl(
        '-n',
        namespace,
        'patch',
        'configmap',
        'web-config',
        '--type',
        'merge',
        '-p',
        JSON.stringify({ data: { 'app.yaml': `level: ${i}\n` } }),
      );
      await waitFor(
        async () => {
          const seen: number[] = [];
          for (const p of pods.web) {
            const text = await core.readNamespacedPodLog({
              name: p.metadata?.name ?? '',
              namespace,
              container: 'config-sync',
            });
            for (const line of text.split('\n'))
              if (line.includes('"propagated"'))
                seen.push(Number((JSON.parse(line) as { propagationSeconds: number }).propagationSeconds));
          }
          if (seen.length < before + pods.web.length) return undefined;
          propagation.splice(0, propagation.length, ...seen);
          return true;
        },
        { what: 'both agents to see kubelet propagate', timeoutMs: 60_000, intervalMs: 250 },
      );
    }

    await new Promise((resolve) => setTimeout(resolve, 5000));
    const metricsUrls = pods.web.map((p) => `http://${p.status?.podIP}:9464/metrics`);
    // Read before the CPU window and after it: a scrape is work, not idleness.
    const watchesBefore = await Promise.all(metricsUrls.map(metricsOf));
    const cpu0 = [...agents.map(cpuNanos), cpuNanos(bareId)];
    const t0 = performance.now();
    await new Promise((resolve) => setTimeout(resolve, idleSeconds * 1000));
    const elapsed = (performance.now() - t0) / 1000;
    const cpu1 = [...agents.map(cpuNanos), cpuNanos(bareId)];
    const watchesAfter = await Promise.all(metricsUrls.map(metricsOf));
    const pct = (i: number) => (((cpu1[i] as number) - (cpu0[i] as number)) / 1e9 / elapsed) * 100;
    const agentCpu = agents.map((_, i) => pct(i));
    const bareCpu = pct(agents.length);
    const agentMem = agents.map(containerMemory);
    const bareMem = containerMemory(bareId);
    const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const meanMem: Resident = {
      total: mean(agentMem.map((m) => m.total)),
      anonymous: mean(agentMem.map((m) => m.anonymous)),
    };
    const meanCpu = mean(agentCpu);
    rows.push({
      what: `real node: container working set (cgroup), idle`,
      ...memoryGoal(
        meanMem,
        bareMem,
        'bare node container',
        `${agentMem.map((m) => fmt(m.total)).join(', ')}; `,
      ),
    });
    rows.push({
      what: `real node: container CPU (cgroup), ${Math.round(elapsed)} s idle`,
      ours: `${fmt(meanCpu, 3)} % of a core`,
      baseline: `bare node container ${fmt(bareCpu, 3)} %`,
      relation: `${signed(meanCpu - bareCpu, 3)} points`,
      target: '<= bare + 0.05 % (issue 13: 0.05 %)',
      ok: meanCpu - bareCpu <= 0.05,
    });
    // What each agent's watches did in the window: resumed at the server's end (`closed`), or
    // failed (`error`: a watch taken for dead). A quiet watch taken for dead shows here only in
    // a window longer than 90 s.
    const inWindow = (of: (metrics: string) => Record<string, number>, i: number) => {
      const before = of(watchesBefore[i] ?? '');
      return Object.fromEntries(
        Object.entries(of(watchesAfter[i] ?? '')).map(([k, n]) => [k, n - (before[k] ?? 0)]),
      );
    };
    const watched = metricsUrls.map((_, i) => ({
      watches: inWindow(apiRequestsByVerb, i).watch ?? 0,
      restarts: inWindow(watchRestartsByReason, i),
    }));
    rows.push({
      what: `real node: watch requests per agent in the ${Math.round(elapsed)} s idle window (restarts)`,
      ours: watched
        .map(({ watches, restarts }) => {
          const seen = Object.entries(restarts)
            .filter(([, n]) => n > 0)
            .map(([reason, n]) => `${reason} ${n}`);
          return `${watches} (${seen.join(', ') || 'no restarts'})`;
        })
        .join('; '),
      baseline: '-',
      relation: '-',
      target: 'no error restarts',
      ok: watched.every(({ restarts }) => (restarts.error ?? 0) === 0),
    });
    rows.push({
      what: 'real node: ConfigMap change -> files (kubelet, Watch, syncFrequency 1s), p50 / p99',
      ours: `${fmt(percentile(propagation, 50) * 1000, 0)} / ${fmt(percentile(propagation, 99) * 1000, 0)} ms`,
      baseline: 'kubelet itself (not ours)',
      relation: `${propagation.length} samples`,
      target: 'reported',
      ok: true,
    });
    await comparesOnRealNode(kc, namespace, applied, bareId);
    await reloadOnRealNode(kc, namespace);
  } finally {
    await node?.stop();
    await plane.stop();
    fs.rmSync(nodeWork, { recursive: true, force: true });
  }
}

/**
 * Measure 10's memory after an hour's work, in a Pod: the process-level row "after N full
 * compares" counts the agent's RSS, which charges it every page of the Node binary it touched;
 * kubelet and the metrics API count the container's working set. A Pod of the example's own
 * template, not the Deployment's (its labels differ, so no ReplicaSet adopts it), whose agent
 * compares every second (`CONFIG_SYNC_RESYNC=1s`) over the example's ConfigMap with 100 keys,
 * like the process-level row's volume, for BENCH_COMPARE_SECONDS (the idle window unless set): as
 * many compares as an hour at the default `--resync` for the default 60 s. Its working set is read
 * beside the bare `node` container's, at the same moment.
 */
async function comparesOnRealNode(
  kc: KubeConfig,
  namespace: string,
  web: V1Deployment,
  bareId: string,
): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const { example, setData } = await widenExampleConfig(core, namespace, 100);
  const spec = structuredClone(web.spec?.template.spec);
  const agent = spec?.initContainers?.find((c) => c.name === 'config-sync');
  if (!spec || !agent) throw new Error('the example has no config-sync sidecar');
  agent.env = [...(agent.env ?? []), { name: 'CONFIG_SYNC_RESYNC', value: '1s' }];
  const name = 'busy-agent';
  await core.createNamespacedPod({ namespace, body: { metadata: { name, labels: { app: name } }, spec } });
  const pod = await waitFor(
    async () => {
      const p = await core.readNamespacedPod({ name, namespace });
      const inSync = p.status?.conditions?.some(
        (c) => c.type === 'config-sync.io/InSync' && c.status === 'True',
      );
      return inSync && p.status?.podIP ? p : undefined;
    },
    { what: 'the busy agent Pod InSync', timeoutMs: 120_000, intervalMs: 500 },
  );
  const agentId = containerIdOf(pod, 'config-sync') ?? '';
  log(`real node: the busy agent compares for ${compareSeconds}s`);
  await new Promise((resolve) => setTimeout(resolve, compareSeconds * 1000));
  const busyMem = containerMemory(agentId);
  const bareMem = containerMemory(bareId);
  const compares = Number(
    /^config_sync_duration_seconds_count (\d+)/m.exec(
      await metricsOf(`http://${pod.status?.podIP}:9464/metrics`),
    )?.[1] ?? Number.NaN,
  );
  rows.push({
    what: `real node: container working set (cgroup), after ${compares} full compares`,
    ...memoryGoal(busyMem, bareMem, 'bare node container'),
  });
  await core.deleteNamespacedPod({ name, namespace, gracePeriodSeconds: 0 });
  await setData(example);
}
