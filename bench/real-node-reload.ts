// Measure 10's reload rows: reload mode in a real Pod on the real node (reloadOnRealNode below).
import fs from 'node:fs';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { SIDECAR_NODE_OPTIONS } from '../src/inject/sidecar.ts';
import { NODE_BASE } from '../test/cluster/node.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { agentProfile } from './lib/agent-profile.ts';
import { containerCgroup, containerCpuSeconds, containerIdOf } from './lib/cgroup.ts';
import { widenExampleConfig } from './lib/example-config.ts';
import {
  apiRequestsByVerb,
  mainThreadWaitSeconds,
  metricsOf,
  passesOf,
  passesRow,
  perSampleMs,
} from './lib/processes.ts';
import { APP_PORT, CPU_PROF_OPTIONS, cpuProfDir, latencySamples, reloadKeys } from './lib/settings.ts';
import { fmt, latencyRow, perChangeRow, rows } from './lib/table.ts';

/**
 * Measure 10's reload rows: what a reload-mode user sees in a real Pod. The example's `web` is
 * turned into a reload-mode workload of one replica: the shipped agent as its sidecar with
 * `--on-drift reload`, an app container (bench/reload-app.mjs) stamping each POST's arrival, and
 * beside them a third container running bench/baselines/raw-reload.mjs, which POSTs on every
 * `..data` swap of the same volume (configmap-reload's job) with the moment it saw the swap. All
 * three are the shipped image's Node, in the Pod's cgroups, on the node's two cores with
 * kubelet, containerd and the control plane. kubelet itself writes each update (100 keys, one
 * of them changed), at its syncFrequency (1s) after the API's change, so the agent has seen the
 * change (Propagating) when the swap comes. Each update gives one POST of each; both are timed
 * from the raw container's inotify callback (the swap as a reloader first sees it), and paired
 * on the same swap. Twice: without an fsGroup and with one (kubelet then chowns and chmods the
 * whole volume before each swap). CPU per update is the containers' own (cgroup); the wait for a
 * core is each container's Node main thread's (its host PID's schedstat).
 */
export async function reloadOnRealNode(kc: KubeConfig, namespace: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const apps = kc.makeApiClient(AppsV1Api);
  const samples = Math.max(3, Math.ceil(latencySamples / 3));
  // The example's two keys (log.yaml stays: the subPath target, never changed here) and more,
  // up to BENCH_RELOAD_KEYS in all.
  const { data, setData } = await widenExampleConfig(core, namespace, Math.max(reloadKeys, 2));

  const keysNamed = `${Object.keys(data).length} keys`;
  for (const { variant, fsGroup } of [
    { variant: '', fsGroup: undefined },
    { variant: ', fsGroup', fsGroup: 65532 },
  ]) {
    const pod = await rollOutReloadWeb(apps, core, namespace, fsGroup);
    const name = pod.metadata?.name ?? '';
    const agentId = containerIdOf(pod, 'config-sync') ?? '';
    const rawId = containerIdOf(pod, 'raw') ?? '';
    const stampsUrl = `http://${pod.status?.podIP}:${APP_PORT}/stamps`;
    const stamps = async () =>
      (await (await fetch(stampsUrl, { signal: AbortSignal.timeout(5000) })).json()) as {
        url: string;
        atNs: string;
        seenNs?: string;
      }[];
    const posts = (all: Awaited<ReturnType<typeof stamps>>, url: string) => all.filter((s) => s.url === url);
    const start = await stamps();
    const agentBefore = posts(start, '/agent').length;
    const rawBefore = posts(start, '/raw').length;
    const mainPid = (id: string) =>
      Number(
        fs.readFileSync(path.join(containerCgroup('cpuacct', id), 'cgroup.procs'), 'utf8').split('\n')[0],
      );
    const pids = { agent: mainPid(agentId), raw: mainPid(rawId) };
    const requestsUrl = `http://${pod.status?.podIP}:9464/metrics`;
    const metrics0 = await metricsOf(requestsUrl);
    const requests0 = apiRequestsByVerb(metrics0);
    const cpuSince = perSampleMs(containerCpuSeconds, { agent: agentId, raw: rawId });
    const waitSince = perSampleMs(mainThreadWaitSeconds, pids);
    const updatesFromUs = Number(process.hrtime.bigint() / 1000n);
    const agentMs: number[] = [];
    const rawMs: number[] = [];
    for (let i = 0; i < samples; i += 1) {
      await setData({ ...data, 'key-000.yaml': `reload ${i}${variant}\n` });
      const all = await waitFor(
        async () => {
          const now = await stamps();
          return posts(now, '/agent').length > agentBefore + i && posts(now, '/raw').length > rawBefore + i
            ? now
            : undefined;
        },
        {
          what: `kubelet's swap and both reload POSTs (${name}, update ${i})`,
          timeoutMs: 30_000,
          intervalMs: 50,
        },
      );
      // One POST of each per update, or the pairs below would pair different swaps.
      const agentPosts = posts(all, '/agent');
      const rawPosts = posts(all, '/raw');
      if (agentPosts.length !== agentBefore + i + 1 || rawPosts.length !== rawBefore + i + 1)
        throw new Error(
          `${i + 1} updates, ${agentPosts.length - agentBefore} reloads from the agent, ${rawPosts.length - rawBefore} from the raw reloader`,
        );
      const raw = rawPosts[rawBefore + i];
      const agent = agentPosts[agentBefore + i];
      if (!raw?.seenNs || !agent) throw new Error('a reload POST without its stamps');
      const seen = BigInt(raw.seenNs);
      agentMs.push(Number(BigInt(agent.atNs) - seen) / 1e6);
      rawMs.push(Number(BigInt(raw.atNs) - seen) / 1e6);
    }
    const cpuPerUpdateMs = cpuSince(samples);
    const waitPerUpdateMs = waitSince(samples);
    const updatesToUs = Number(process.hrtime.bigint() / 1000n);
    const metrics1 = await metricsOf(requestsUrl);
    const requests1 = apiRequestsByVerb(metrics1);
    if (cpuProfDir) {
      // SIGTERM: node writes the profile as it exits, and kubelet starts the sidecar again.
      process.kill(pids.agent, 'SIGTERM');
      const inPod = path.join(
        NODE_BASE,
        'kubelet/pods',
        pod.metadata?.uid ?? '',
        'volumes/kubernetes.io~empty-dir/cpu-prof',
      );
      await agentProfile(inPod, '/app/', [updatesFromUs, updatesToUs], samples, `pod-reload${variant}`);
    }
    const requestsPerUpdate = Object.entries(requests1)
      .map(([verb, n]) => [verb, (n - (requests0[verb] ?? 0)) / samples] as const)
      .filter(([, n]) => n > 0)
      .map(([verb, n]) => `${fmt(n, 2)} ${verb}`)
      .join(', ');
    if (process.env.BENCH_SAMPLES)
      console.log(
        `[bench] real node reload${variant} samples, agent/raw ms: ${agentMs
          .map((x, j) => `${x.toFixed(2)}/${(rawMs[j] as number).toFixed(2)}`)
          .join(' ')}`,
      );
    const baselineName = 'raw inotify -> POST container';
    rows.push(
      latencyRow(
        `real node: ..data swap (kubelet's) -> reload POST, ${keysNamed}${variant}`,
        agentMs,
        { name: baselineName, samples: rawMs },
        { overBaselineMs: 2, why: 'issue 13' },
      ),
      perChangeRow(
        `real node: container CPU per update (cgroup), reload mode${variant}`,
        cpuPerUpdateMs,
        baselineName,
      ),
      perChangeRow(
        `  waited for a core per update (main thread)${variant}`,
        waitPerUpdateMs,
        baselineName,
        "(report: the machine's contention)",
      ),
      passesRow(
        `  the agent's passes per update${variant}`,
        passesOf(metrics1) - passesOf(metrics0),
        samples,
      ),
      {
        what: `  the agent's API requests per update${variant}`,
        ours: requestsPerUpdate || 'none',
        baseline: `${baselineName}: none`,
        relation: '',
        target: '(report)',
        ok: true,
      },
    );
  }
}

/**
 * Turns the example's `web` into the reload rows' workload (above) and waits for its one new Pod
 * to run every container and report InSync; `fsGroup` sets the Pod's.
 */
async function rollOutReloadWeb(
  apps: AppsV1Api,
  core: CoreV1Api,
  namespace: string,
  fsGroup: number | undefined,
): Promise<V1Pod> {
  const web = await apps.readNamespacedDeployment({ name: 'web', namespace });
  const spec = web.spec?.template.spec;
  const sidecar = spec?.initContainers?.find((c) => c.name === 'config-sync');
  const app = spec?.containers.find((c) => c.name === 'app');
  const image = sidecar?.image;
  if (!web.spec || !spec || !sidecar || !app || !image)
    throw new Error('the example has no web with config-sync and app');
  web.spec.replicas = 1;
  const { fsGroup: _, ...podSecurity } = spec.securityContext ?? {};
  spec.securityContext = fsGroup === undefined ? podSecurity : { ...podSecurity, fsGroup };
  sidecar.args = [
    'agent',
    '--on-drift',
    'reload',
    '--reload-url',
    `http://127.0.0.1:${APP_PORT}/agent`,
    '--reload-settle',
    '200ms',
    // The app's mounts only: the raw reloader's container mounts the same volume, and is not
    // what the agent is there for.
    '--container',
    'app',
  ];
  if (cpuProfDir) {
    // An emptyDir on the node's disk: the sidecar's own state volume is 1 MiB of memory. Set,
    // not added: the second variant's rollout starts from the first's template.
    sidecar.env = (sidecar.env ?? []).map((e) =>
      e.name === 'NODE_OPTIONS' ? { ...e, value: `${SIDECAR_NODE_OPTIONS} ${CPU_PROF_OPTIONS}/cpu-prof` } : e,
    );
    sidecar.volumeMounts = [
      ...(sidecar.volumeMounts ?? []).filter((m) => m.name !== 'cpu-prof'),
      { name: 'cpu-prof', mountPath: '/cpu-prof' },
    ];
    spec.volumes = [
      ...(spec.volumes ?? []).filter((v) => v.name !== 'cpu-prof'),
      { name: 'cpu-prof', emptyDir: {} },
    ];
  }
  // The scripts go in as `-e` programs, not a volume: the agent would take a ConfigMap volume
  // for a target of its own. The word after the program is its process.argv[1], as a script's
  // path would be.
  const script = (file: string, ...args: string[]) => [
    '/nodejs/bin/node',
    '--input-type=module',
    '-e',
    fs.readFileSync(path.join(import.meta.dirname, file), 'utf8'),
    file,
    ...args,
  ];
  spec.containers = [
    { ...app, image, command: script('reload-app.mjs', '0.0.0.0', String(APP_PORT)) },
    {
      name: 'raw',
      image,
      command: script('baselines/raw-reload.mjs', '/etc/app', `http://127.0.0.1:${APP_PORT}/raw`),
      volumeMounts: [{ name: 'config', mountPath: '/etc/app', readOnly: true }],
      ...(app.securityContext ? { securityContext: app.securityContext } : {}),
    },
  ];
  const replaced = (await apps.replaceNamespacedDeployment({ name: 'web', namespace, body: web })).metadata
    ?.generation;
  return waitFor(
    async () => {
      // The rollout of the Deployment as it is now, at or past the replace: with BENCH_CPU_PROF
      // the previous variant's agent was stopped for its profile and started again by kubelet,
      // and a restart of web by anything since the replace must not leave this wait behind.
      const d = await apps.readNamespacedDeployment({ name: 'web', namespace });
      const generation = d.metadata?.generation ?? 0;
      if (
        generation < (replaced ?? 0) ||
        d.status?.observedGeneration !== generation ||
        d.status?.updatedReplicas !== 1
      )
        return undefined;
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items;
      if (pods.length !== 1) return undefined;
      const [pod] = pods;
      const running = [
        ...(pod?.status?.containerStatuses ?? []),
        ...(pod?.status?.initContainerStatuses ?? []),
      ];
      const inSync = pod?.status?.conditions?.some(
        (c) => c.type === 'config-sync.io/InSync' && c.status === 'True',
      );
      return pod && inSync && running.length === 3 && running.every((c) => c.state?.running)
        ? pod
        : undefined;
    },
    {
      what: `web rolled out in reload mode${fsGroup === undefined ? '' : ', fsGroup'}`,
      timeoutMs: 180_000,
      intervalMs: 500,
      // What kept it: each Pod's phase, conditions and container states, and the agent's last lines.
      onTimeout: async () => {
        const pods = (await core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items;
        const lines: string[] = [];
        for (const p of pods) {
          const statuses = [
            ...(p.status?.initContainerStatuses ?? []),
            ...(p.status?.containerStatuses ?? []),
          ];
          lines.push(
            `${p.metadata?.name} ${p.status?.phase} ${JSON.stringify(p.status?.conditions?.map((c) => `${c.type}=${c.status}`))}`,
            ...statuses.map((c) => `  ${c.name}: ${JSON.stringify(c.state)}`),
          );
          const log = await core
            .readNamespacedPodLog({
              name: p.metadata?.name ?? '',
              namespace,
              container: 'config-sync',
              tailLines: 10,
            })
            .catch((error: Error) => error.message);
          lines.push(log);
        }
        return lines.join('\n');
      },
    },
  );
}
