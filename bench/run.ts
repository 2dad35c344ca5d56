// config-sync benchmarks: every figure beside a baseline measured in the same run, on the same
// machine, so the ratios mean something on any machine. Run with `npm run bench` (it builds
// first and starts its own control plane). BENCH_IDLE_SECONDS (default 60) sets the idle window;
// BENCH_SAMPLES=1 also prints every API change -> verdict sample and every reload row's pairs
// (agent/raw ms), in order; BENCH_ONLY=reload,restart runs only the measures named (hash, idle,
// file, api, reload, restart, sim, node, nodeagent); BENCH_SIM_PODS (default 500) the simulated node's Pods;
// BENCH_LATENCY_SAMPLES (default 300) sets the samples of the reload and restart rows;
// BENCH_QUIET_SAMPLES (default 3) the restart row's changes after 100 s of quiet each;
// BENCH_RELOAD_KEYS (default 100, at most 100) the keys of the reload row's ConfigMap;
// BENCH_CPU_PROF=<dir> profiles the agent in both reload rows (cpuProfDir, lib/settings.ts);
// BENCH_COMPARE_SECONDS (default: the idle window) how long the real node's busy agent compares.
//
//  1. verify throughput: read + sha256 of a 256 MiB file by config-sync's reader, against
//     `openssl dgst -sha256` on the same file;
//  2. a verify pass over a realistic volume (100 keys, 1 MiB in all, kubelet layout), against
//     `openssl dgst -sha256` over the same 100 files;
//  3. start -> ready (/readyz) of the agent, against a bare `node` HTTP server;
//  4. idle RSS and idle CPU of the agent, against that bare `node` process. The agent runs as it
//     does in a Pod: in-cluster, as a ServiceAccount with a namespaced Role. A second agent, on
//     the admin kubeconfig, idles in the same window, for the off-cluster figure; a third,
//     whose 1 MiB ConfigMap was updated ten times first, for what an update leaves resident;
//  5. API requests per agent-hour at idle (config_sync_api_requests_total, watches excluded);
//  6. file change -> verdict latency: from the kubelet-style `..data` swap (the rename that makes
//     the new content visible) to the agent's verdict, against raw inotify (fs.watch) seeing
//     that rename in this process;
//  7. API change -> verdict latency, against a raw client-node watch in this process;
//  8. reload mode: `..data` swap -> the app's reload endpoint called (what the user sees), the
//     app a process of its own (bench/reload-app.mjs), against a bare `node` process that POSTs
//     on the same swap (bench/baselines/raw-reload.mjs);
//  9. restart mode: a ConfigMap change (a subPath key) -> the workload's restart patch, seen
//     through a raw watch, against bare `node` processes that patch on the same change, at once,
//     after one quorum read, or after the agent's three reads with its test-and-patch
//     (bench/baselines/raw-restart.mjs); and a few changes after 100 s of quiet each, past the
//     API server's idle close of an HTTP/1.1 connection;
// 10. on a real node (root on Linux; test/cluster/node.ts), cost as Kubernetes counts it: the
//     agent container's memory working set and idle CPU from its own cgroup (what kubelet and
//     the metrics API report), against an idle bare `node` HTTP server container from the same
//     image with the sidecar's probes, in the same run, measured the same way; and kubelet's
//     real propagation delay (the agent's config_sync_propagation_seconds), with the
//     syncFrequency named; the working set of an agent in a Pod after an hour's worth of
//     compares (comparesOnRealNode); then reload mode in a real Pod: kubelet's own swap -> the app
//     container's reload POST from the shipped agent, against a raw inotify -> POST container
//     in the same Pod, without and with an fsGroup (reloadOnRealNode).
//
// 11. the node agent past this machine's one node, by simulation: 500 Pods bound to a Node object
//     with no kubelet, 150 objects, one node agent against the real API server (node-sim.ts);
// 12. on the real node, the node agent's container working set and watches for 1, 10 and 30
//     Pods beside as many sidecars, and its status writes for a change kubelet propagates to 30
//     Pods (real-node-agent.ts).
//
// Each measure is a module of its own: hash.ts (1, 2), idle.ts (3 to 5), verdicts.ts (6, 7),
// reload.ts (8), restart.ts (9), real-node.ts and real-node-reload.ts (10); lib/ holds what
// they share (settings, the table, /proc and cgroup readings, agent processes). This file sets
// up the control plane they share and runs them in order.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { bin } from '../test/cluster/app.ts';
import { resolveAssets } from '../test/cluster/assets.ts';
import { ControlPlane } from '../test/cluster/control-plane.ts';
import { createServiceAccountIdentity } from '../test/cluster/identities.ts';
import { layInClusterDir } from '../test/cluster/in-cluster.ts';
import { atomicWrite, configMapPayload } from '../test/cluster/kubelet-volume.ts';
import { realisticVolume, throughput } from './hash.ts';
import { idleRows } from './idle.ts';
import type { ProcessBench } from './lib/process-bench.ts';
import { only, work } from './lib/settings.ts';
import { fmt, formatTable, log, rows } from './lib/table.ts';
import { nodeSimRows } from './node-sim.ts';
import { onRealNode } from './real-node.ts';
import { reloadRows } from './reload.ts';
import { restartRows } from './restart.ts';
import { verdictRows } from './verdicts.ts';

async function main(): Promise<void> {
  log(`machine: ${os.cpus().length} cores, ${fmt(os.totalmem() / 2 ** 30)} GiB, node ${process.version}`);
  if (only('hash')) {
    throughput();
    realisticVolume();
  }

  log('starting a control plane');
  const plane = await ControlPlane.start({ assets: resolveAssets(), log });
  try {
    const kc = new KubeConfig();
    kc.loadFromFile(plane.info.adminKubeconfig);
    const core = kc.makeApiClient(CoreV1Api);
    const namespace = 'bench';
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    const data: Record<string, string> = {};
    for (let i = 0; i < 100; i += 1) data[`key-${String(i).padStart(3, '0')}.yaml`] = `value ${i}\n`;
    await core.createNamespacedConfigMap({ namespace, body: { metadata: { name: 'app' }, data } });
    const mount = path.join(work, 'mount');
    fs.mkdirSync(path.join(mount, 'etc/app'), { recursive: true });
    atomicWrite(path.join(mount, 'etc/app'), configMapPayload({ data }));

    // The agent's identity in a Pod: a ServiceAccount token, the CA and the namespace file.
    const identity = await createServiceAccountIdentity(kc, {
      namespace,
      name: 'config-sync-agent',
      rules: [
        {
          apiGroups: [''],
          resources: ['configmaps'],
          resourceNames: ['app', 'big'],
          verbs: ['get', 'list', 'watch'],
        },
      ],
    });
    const layout = layInClusterDir(path.join(work, 'pod'), plane.info, { token: identity.token, namespace });
    const agentArgs = (port: number, watch = '/etc/app=configmap/app', mountRoot = mount) => [
      bin,
      'agent',
      '--watch',
      watch,
      '--mount-root',
      mountRoot,
      '--grace',
      '10m',
      '--listen',
      `127.0.0.1:${port}`,
    ];

    const bench: ProcessBench = { kc, core, plane, namespace, data, mount, layout, agentArgs };
    const { agent, lines } = await idleRows(bench);
    await verdictRows(lines, bench);
    agent.kill('SIGTERM');
    if (only('reload')) await reloadRows(bench);
    if (only('restart')) await restartRows(bench);
    if (only('sim')) await nodeSimRows(kc, plane);
  } finally {
    await plane.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }

  if (only('node') || only('nodeagent')) await onRealNode();

  process.stdout.write(formatTable(rows));
}

await main();
