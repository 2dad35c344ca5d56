// Measure 9: restart mode, a ConfigMap change (a subPath key, --debounce 0s) -> the workload's
// restart patch, against bare processes that patch on the same change.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { AppsV1Api, type KubeConfig, type V1Deployment, Watch } from '@kubernetes/client-node';
import { applyRbac, bin, webDeployment } from '../test/cluster/app.ts';
import { createServiceAccountIdentity, grantRole } from '../test/cluster/identities.ts';
import { layInClusterDir } from '../test/cluster/in-cluster.ts';
import { writeSubPathFile } from '../test/cluster/kubelet-volume.ts';
import { freeLoopbackPort } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { Arrivals } from './lib/arrivals.ts';
import type { ProcessBench } from './lib/process-bench.ts';
import { inPodEnv, mainThreadWaitSeconds, perSampleMs, ready, spawnAgent } from './lib/processes.ts';
import { latencySamples, QUIET_SECONDS, quietSamples, sidecarEnv, work } from './lib/settings.ts';
import {
  fmt,
  latencyRelation,
  latencyRow,
  log,
  median,
  perChangeRow,
  percentile,
  rows,
  signed,
} from './lib/table.ts';

// What a restart-mode user sees: from the ConfigMap change to the workload's restart patch,
// seen through a raw watch of the Deployments in this process. The baseline does the same
// job with nothing but the API: bench/baselines/raw-restart.mjs, a bare `node` process of
// its own like the agent, watches the same ConfigMap and patches a second Deployment at
// once (what Reloader does: no read, no precondition, no look at the files). Each sample
// pairs the two on the same change; both pay the watch delivery, one API write and its
// delivery to this process. What the agent adds is its pass, the quorum read of the source
// before acting (issue 12) with the workload and Pod read beside it, and the test in its
// patch. The raw watch of the change itself is shown too.
// The agent runs in a Pod of a Deployment with exactly the shipped RBAC base; its token is
// not bound to the Pod, since each restart replaces that Pod (there is no kubelet) and a
// bound token would die with it. Each change is a new config, so each is one restart
// (--min-restart-interval 0s).
export async function restartRows({ kc, core, plane }: ProcessBench): Promise<void> {
  const rs = 'restart';
  await core.createNamespace({ body: { metadata: { name: rs } } });
  applyRbac(plane.info, rs);
  await core.createNamespacedConfigMap({
    namespace: rs,
    body: { metadata: { name: 'web-config' }, data: { 'app.yaml': 'level: info\n' } },
  });
  const deployment = webDeployment(1);
  const appContainer = deployment.spec?.template.spec?.containers[0];
  if (appContainer)
    appContainer.volumeMounts = [{ name: 'config', mountPath: '/etc/app.yaml', subPath: 'app.yaml' }];
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace: rs, body: deployment });
  const webPod = await waitFor(
    async () =>
      (await core.listNamespacedPod({ namespace: rs, labelSelector: 'app=web' })).items[0]?.metadata?.name,
    { what: 'a pod of web' },
  );
  const restartMount = path.join(work, 'restart-mount');
  writeSubPathFile(path.join(restartMount, 'etc/app.yaml'), {
    data: Buffer.from('level: info\n'),
    mode: 0o644,
  });
  const restartIdentity = await createServiceAccountIdentity(kc, {
    namespace: rs,
    name: 'config-sync-agent',
    existingServiceAccount: true,
  });
  const restartLayout = layInClusterDir(path.join(work, 'restart-pod'), plane.info, {
    token: restartIdentity.token,
    namespace: rs,
  });
  const restartPort = await freeLoopbackPort();
  const { child: restarter, lines: restartLines } = spawnAgent(
    [
      bin,
      'agent',
      '--mount-root',
      restartMount,
      '--debounce',
      '0s',
      '--min-restart-interval',
      '0s',
      '--listen',
      `127.0.0.1:${restartPort}`,
    ],
    inPodEnv(restartLayout, work, rs, webPod),
  );
  await ready(restartPort);
  await waitFor(() => restartLines.find((l) => l.state === 'InSync'), {
    what: 'the restart agent InSync',
  });
  // Three baselines, each patching a Deployment of its own: `raw` patches at once, `raw-read`
  // reads the ConfigMap first, both as the admin; `raw-agent` makes the agent's requests
  // (the ConfigMap, its Deployment and the agent's Pod read at once, then the agent's
  // test-and-patch) with no decision between them, as the agent's ServiceAccount, so that
  // RBAC and the agent's admission policy weigh on its requests as on the agent's (a Role
  // of the bench's lets that identity read and patch `raw-agent`). Paused: their patches
  // roll out nothing, so the baselines' work does not load the API server and etcd while
  // the agent reads and patches (their own rollouts would).
  const admin: { ca?: Buffer; cert?: Buffer; key?: Buffer; headers?: Record<string, string> } = {};
  await kc.applyToHTTPSOptions(admin);
  const asAgent = {
    tls: { ca: admin.ca?.toString() },
    headers: { authorization: `Bearer ${restartIdentity.token}` },
  };
  const asAdmin = {
    tls: { ca: admin.ca?.toString(), cert: admin.cert?.toString(), key: admin.key?.toString() },
    headers: admin.headers ?? {},
  };
  await grantRawAgent(kc, rs, 'config-sync-agent', 'raw-agent');
  const rawRestarters: ReturnType<typeof spawn>[] = [];
  let rawAgentPid = 0;
  for (const [name, reads] of [
    ['raw', 'none'],
    ['raw-read', 'source'],
    ['raw-agent', 'agent'],
  ] as const) {
    const raw: V1Deployment = {
      metadata: { name },
      spec: {
        replicas: 1,
        paused: true,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: 'app', image: 'config-sync.invalid/app:never-pulled' }] },
        },
      },
    };
    await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace: rs, body: raw });
    const child = spawn(process.execPath, [path.join(import.meta.dirname, 'baselines/raw-restart.mjs')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: {
        PATH: process.env.PATH ?? '',
        ...sidecarEnv,
        RAW_RESTART: JSON.stringify({
          server: kc.getCurrentCluster()?.server,
          ...(reads === 'agent' ? asAgent : asAdmin),
          namespace: rs,
          configMap: 'web-config',
          deployment: name,
          pod: webPod,
          reads,
        }),
      },
    });
    await new Promise((resolve) => child.stdout?.once('data', resolve));
    rawRestarters.push(child);
    if (reads === 'agent') rawAgentPid = child.pid as number;
  }
  const lastHash: Record<string, string> = {};
  const patchedAt: Record<string, number> = {};
  let changedAt = 0;
  const arrivals = new Arrivals();
  const deployments = await patientWatch(kc).watch(
    `/apis/apps/v1/namespaces/${rs}/deployments`,
    {},
    (
      _type,
      obj: {
        metadata?: { name?: string };
        spec?: { template?: { metadata?: { annotations?: Record<string, string> } } };
      },
    ) => {
      const name = obj.metadata?.name ?? '';
      const hash = obj.spec?.template?.metadata?.annotations?.['config-sync.io/config-hash'];
      if (hash && hash !== lastHash[name]) {
        lastHash[name] = hash;
        patchedAt[name] ||= performance.now();
        arrivals.poke();
      }
    },
    () => {},
  );
  const configMaps = await patientWatch(kc).watch(
    `/api/v1/namespaces/${rs}/configmaps`,
    { fieldSelector: 'metadata.name=web-config' },
    () => {
      changedAt = performance.now();
      arrivals.poke();
    },
    () => {},
  );
  const patchLatency: number[] = [];
  const rawPatchLatency: number[] = [];
  const rawReadPatchLatency: number[] = [];
  const rawAgentPatchLatency: number[] = [];
  const apiWatchLatency: number[] = [];
  const waitSince = perSampleMs(mainThreadWaitSeconds, {
    agent: restarter.pid as number,
    raw: rawAgentPid,
  });
  /** One change, and when each patch and the raw watch's event came, in ms after it was sent. */
  const sample = async (i: number) => {
    for (const name of Object.keys(patchedAt)) delete patchedAt[name];
    changedAt = 0;
    const t = performance.now();
    await core.replaceNamespacedConfigMap({
      name: 'web-config',
      namespace: rs,
      body: { metadata: { name: 'web-config' }, data: { 'app.yaml': `level: debug ${i}\n` } },
    });
    await arrivals
      .wait(
        () =>
          patchedAt.web && patchedAt.raw && patchedAt['raw-read'] && patchedAt['raw-agent'] && changedAt
            ? true
            : undefined,
        'the restart patches of the agent and the raw baselines, and the raw ConfigMap event',
      )
      .catch((error: Error) => {
        // Which change, what arrived, and what the agent last said: what explains a miss.
        const lines = restartLines.slice(-8).map((l) => JSON.stringify(l));
        throw new Error(
          `${error.message} (change ${i}; arrived: ${Object.keys(patchedAt).join(', ') || 'none'}${changedAt ? ', the ConfigMap event' : ''}); the agent's last lines:\n${lines.join('\n')}`,
        );
      });
    return {
      agent: (patchedAt.web as number) - t,
      raw: (patchedAt.raw as number) - t,
      rawRead: (patchedAt['raw-read'] as number) - t,
      rawAgent: (patchedAt['raw-agent'] as number) - t,
      watch: changedAt - t,
    };
  };
  for (let i = 0; i < latencySamples; i += 1) {
    const s = await sample(i);
    patchLatency.push(s.agent);
    rawPatchLatency.push(s.raw);
    rawReadPatchLatency.push(s.rawRead);
    rawAgentPatchLatency.push(s.rawAgent);
    apiWatchLatency.push(s.watch);
  }
  const waitPerChangeMs = waitSince(latencySamples);
  // After a quiet spell, as a ConfigMap usually changes: hours apart. kube-apiserver closes an
  // HTTP/1.1 connection idle for 90 s, so a client whose requests go over a keep-alive pool
  // (the raw baselines) opens new ones first; the agent's requests are streams of the HTTP/2
  // connection its watches keep busy. The bench's own change is a request of its own, the same
  // for all; the paired differences are what tells them apart.
  const quiet: Awaited<ReturnType<typeof sample>>[] = [];
  for (let q = 0; q < quietSamples; q += 1) {
    log(`restart after ${QUIET_SECONDS} s of quiet, ${q + 1} of ${quietSamples}`);
    await new Promise((resolve) => setTimeout(resolve, QUIET_SECONDS * 1000));
    quiet.push(await sample(latencySamples + q));
  }
  deployments.abort();
  configMaps.abort();
  restarter.kill('SIGTERM');
  for (const child of rawRestarters) child.kill('SIGTERM');
  rows.push(
    latencyRow(
      'API change -> restart patch (subPath)',
      patchLatency,
      { name: 'raw watch -> patch', samples: rawPatchLatency },
      { overBaselineMs: 5, why: 'issue 13' },
    ),
  );
  rows.push({
    what: '  against a raw client that reads first',
    ours: '',
    baseline: `raw watch -> GET -> patch ${fmt(percentile(rawReadPatchLatency, 50))} / ${fmt(percentile(rawReadPatchLatency, 99))} ms`,
    relation: latencyRelation(patchLatency, rawReadPatchLatency),
    target: '(report: the floor issue 12 sets)',
    ok: true,
  });
  // Issue 12 has the agent read the source again (a quorum read) before it restarts anything,
  // so no client that honours it can patch sooner than the raw client that reads first. This row
  // holds that client itself to issue 13's goal: where it misses, the goal cannot be met by any
  // agent that keeps issue 12's read, however little work of its own it does.
  const floorOverAtP99 = percentile(rawReadPatchLatency, 99) - percentile(rawPatchLatency, 99);
  rows.push({
    what: '  the floor itself, against the raw patch',
    ours: `${fmt(percentile(rawReadPatchLatency, 50))} / ${fmt(percentile(rawReadPatchLatency, 99))} ms`,
    baseline: `raw watch -> patch ${fmt(percentile(rawPatchLatency, 50))} / ${fmt(percentile(rawPatchLatency, 99))} ms`,
    relation: latencyRelation(rawReadPatchLatency, rawPatchLatency),
    target: `(report: the floor ${floorOverAtP99 <= 5 ? 'meets' : 'misses'} p99 <= raw + 5 ms)`,
    ok: true,
  });
  rows.push({
    what: '  against a raw client making its requests',
    ours: '',
    baseline: `raw watch -> 3 GETs -> test-and-patch ${fmt(percentile(rawAgentPatchLatency, 50))} / ${fmt(percentile(rawAgentPatchLatency, 99))} ms`,
    relation: latencyRelation(patchLatency, rawAgentPatchLatency),
    target: "(report: the agent's own work)",
    ok: true,
  });
  rows.push(
    perChangeRow(
      '  waited for a core per change (main thread)',
      waitPerChangeMs,
      'the raw client making its requests',
      "(report: the machine's contention)",
    ),
  );
  if (quiet.length > 0) {
    const med = (f: (s: (typeof quiet)[number]) => number) => fmt(median(quiet.map(f)));
    rows.push({
      what: `  after ${QUIET_SECONDS} s of quiet (${quiet.length} changes), median`,
      ours: `${med((s) => s.agent)} ms`,
      baseline: `raw watch -> patch ${med((s) => s.raw)}, 3 GETs -> test-and-patch ${med((s) => s.rawAgent)} ms`,
      relation: `${signed(median(quiet.map((s) => s.agent - s.raw)))} / ${signed(median(quiet.map((s) => s.agent - s.rawAgent)))} ms paired`,
      target: '(report: what a change hours apart meets)',
      ok: true,
    });
  }
  rows.push({
    what: '  (the raw watch of the change itself)',
    ours: '',
    baseline: `${fmt(percentile(apiWatchLatency, 50))} / ${fmt(percentile(apiWatchLatency, 99))} ms`,
    relation: '',
    target: '(report)',
    ok: true,
  });
}

/**
 * Lets the agent's ServiceAccount read and patch the `raw-agent` Deployment, as its own Role
 * lets it read and patch `web`: the baseline that makes the agent's requests makes them as the
 * agent, under the same RBAC and admission policy.
 */
async function grantRawAgent(kc: KubeConfig, namespace: string, serviceAccount: string, deployment: string) {
  await grantRole(kc, {
    namespace,
    name: `bench-${deployment}`,
    serviceAccount: { namespace, name: serviceAccount },
    rules: [
      {
        apiGroups: ['apps'],
        resources: ['deployments'],
        verbs: ['get', 'patch'],
        resourceNames: [deployment],
      },
    ],
  });
}

/**
 * client-node's Watch, made to outlast the quiet spells: it aborts a stream silent for 30 s (its
 * private `requestTimeoutMs`), and the bench's observers of the patches must still be there
 * after QUIET_SECONDS without an event.
 */
function patientWatch(kc: KubeConfig): Watch {
  return Object.assign(new Watch(kc), { requestTimeoutMs: (QUIET_SECONDS + 60) * 1000 });
}
