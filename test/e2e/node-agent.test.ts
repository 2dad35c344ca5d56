// The node agent on a real node: deploy/node's DaemonSet, the shipped image, kubelet's own
// directories. Twenty opted-in Pods of three Deployments and a StatefulSet, none with a sidecar,
// each with a ConfigMap volume, a subPath file of it, a Secret volume and a Secret in env, all
// reach InSync written by the one node agent; a subPath change restarts each workload exactly
// once; a Secret behind an env var is EnvStale and restarts its workload once; a Pod not opted
// in is never read; Pods with a config-sync sidecar are left to it; the node agent runs as root
// with no capability at all; a frozen kubelet is drift healed with one restart of each workload; a
// file tampered with on the node while kubelet cannot mend it is found and alerted on; a
// partition while kubelet delivers a change is no drift; a change made while the node agent is
// replaced is found by the new one and healed once; and its own token may not patch a Pod bound
// to another node.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { SECRET_VALUE, sample } from '../cluster/app.ts';
import { adminKubeConfig, createTestNamespace, tokenKubeConfig } from '../cluster/identities.ts';
import { NODE_BASE } from '../cluster/node.ts';
import { nodeAgentManifests } from '../cluster/node-agent-manifests.ts';
import { waitFor } from '../cluster/wait.ts';
import { cluster, describeOnNode, inSyncCondition, kubectl, useExample, useNode } from './support.ts';

const WORKLOADS = ['alpha', 'bravo', 'charlie', 'sierra'] as const;
const REPLICAS = 5;
const NEW_PASSWORD = 'e2e-node-rotated-password-never-shown';

/** A workload `name` of REPLICAS Pods: the ConfigMap volume, its log.yaml by subPath, the Secret volume, env from env-<name>. */
function workload(name: string) {
  const labels = { app: name };
  const template = {
    metadata: { labels },
    spec: {
      automountServiceAccountToken: false,
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'app',
          image: 'registry.k8s.io/pause:3.10',
          env: [
            { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: `env-${name}`, key: 'password' } } },
          ],
          volumeMounts: [
            { name: 'config', mountPath: '/etc/app', readOnly: true },
            { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml', readOnly: true },
            { name: 'creds', mountPath: '/etc/creds', readOnly: true },
          ],
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
        },
      ],
      volumes: [
        { name: 'config', configMap: { name: 'app-config' } },
        { name: 'creds', secret: { secretName: 'app-secret', defaultMode: 0o400 } },
      ],
    },
  };
  const base = { replicas: REPLICAS, selector: { matchLabels: labels }, template };
  return name === 'sierra'
    ? {
        apiVersion: 'apps/v1',
        kind: 'StatefulSet',
        metadata: { name },
        spec: { ...base, serviceName: name, podManagementPolicy: 'Parallel' },
      }
    : { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name }, spec: base };
}

function apply(objects: readonly unknown[], namespace?: string): void {
  const { plane } = cluster();
  const res = spawnSync(
    plane.kubectl,
    ['--kubeconfig', plane.adminKubeconfig, ...(namespace ? ['-n', namespace] : []), 'apply', '-f', '-'],
    { input: objects.map((o) => JSON.stringify(o)).join('\n'), encoding: 'utf8' },
  );
  if (res.status !== 0) throw new Error(`kubectl apply: ${res.stderr}`);
}

/**
 * The node agent's last log lines, read from the node's disk (kubelet, which serves `kubectl
 * logs`, may be the one frozen), without the per-target lines of Pods in sync.
 */
function nodeAgentLogTail(n = 40): string {
  const dir = path.join(NODE_BASE, 'pod-logs');
  const lines: string[] = [];
  for (const pod of fs.readdirSync(dir).filter((d) => d.startsWith('config-sync_'))) {
    const container = path.join(dir, pod, 'node');
    if (!fs.existsSync(container)) continue;
    for (const f of fs.readdirSync(container))
      lines.push(...fs.readFileSync(path.join(container, f), 'utf8').trimEnd().split('\n'));
  }
  const telling = lines.filter(
    (l) => !/files match the API|"propagated"|serving the Pod|start baselines/.test(l),
  );
  return `the node agent's last lines:\n${telling.slice(-n).join('\n')}`;
}

/** The effective capabilities (CapEff) of each process of a Pod's container, read from the node. */
function capabilitiesOf(pod: V1Pod, container: string): string[] {
  const id = pod.status?.containerStatuses
    ?.find((s) => s.name === container)
    ?.containerID?.replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`container ${container} has no ID`);
  const caps = new Set<string>();
  for (const entry of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (!fs.readFileSync(`/proc/${entry}/cgroup`, 'utf8').includes(id)) continue;
      caps.add(/^CapEff:\s+(\S+)$/m.exec(fs.readFileSync(`/proc/${entry}/status`, 'utf8'))?.[1] ?? '?');
    } catch {
      // gone
    }
  }
  return [...caps];
}

async function nodeAgentPod(admin: KubeConfig): Promise<V1Pod> {
  return waitFor(
    async () => {
      const pods = await admin.makeApiClient(CoreV1Api).listNamespacedPod({
        namespace: 'config-sync',
        labelSelector: 'app.kubernetes.io/component=node-agent',
      });
      const pod = pods.items[0];
      return pod?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')
        ? pod
        : undefined;
    },
    { what: 'the node agent Ready', timeoutMs: 120_000, intervalMs: 500 },
  );
}

async function nodeAgentLog(pod: V1Pod): Promise<Record<string, unknown>[]> {
  const text = await kubectl('-n', 'config-sync', 'logs', pod.metadata?.name ?? '', '-c', 'node');
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function nodeAgentMetrics(pod: V1Pod): Promise<string> {
  const res = await fetch(`http://${pod.status?.podIP}:9464/metrics`, { signal: AbortSignal.timeout(5000) });
  return res.text();
}

/** The workload's restart history annotation (config-sync.io/restarts), as its restarts wrote it. */
async function restartHistory(admin: KubeConfig, namespace: string, name: string): Promise<string[]> {
  const apps = admin.makeApiClient(AppsV1Api);
  const w =
    name === 'sierra'
      ? await apps.readNamespacedStatefulSet({ name, namespace })
      : await apps.readNamespacedDeployment({ name, namespace });
  return (w.spec?.template.metadata?.annotations?.['config-sync.io/restarts'] ?? '')
    .split(' ')
    .filter(Boolean);
}

/** The Pods of the workloads, once all REPLICAS of each are Running and InSync=True (none terminating). */
async function allInSync(admin: KubeConfig, namespace: string, timeoutMs = 240_000): Promise<V1Pod[]> {
  const core = admin.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const pods = (await core.listNamespacedPod({ namespace })).items.filter(
        (p) =>
          WORKLOADS.includes(p.metadata?.labels?.app as (typeof WORKLOADS)[number]) &&
          !p.metadata?.deletionTimestamp,
      );
      return pods.length === WORKLOADS.length * REPLICAS &&
        pods.every((p) => p.status?.phase === 'Running' && inSyncCondition(p)?.status === 'True')
        ? pods
        : undefined;
    },
    { what: `${WORKLOADS.length * REPLICAS} Pods Running and InSync`, timeoutMs, intervalMs: 1000 },
  );
}

describeOnNode('the node agent on a real node (deploy/node, the shipped image)', () => {
  useNode();
  // Pods with a config-sync sidecar of their own (deploy/sidecar's example), in a namespace the
  // node agent serves and that is opted in: it must leave them to their sidecars.
  const sidecars = useExample('e2e-node-sidecar');
  const state = {
    ns: '',
    quiet: '',
    admin: undefined as unknown as KubeConfig,
    agent: undefined as unknown as V1Pod,
  };

  it('serves 20 opted-in Pods of four workloads with one watch per object; InSync written by it alone', async () => {
    const admin = adminKubeConfig(cluster().plane);
    state.admin = admin;
    state.ns = await createTestNamespace(admin, 'e2e-node');
    state.quiet = await createTestNamespace(admin, 'e2e-node-quiet');
    await kubectl(
      'label',
      'namespace',
      state.ns,
      'config-sync.io/node-agent=enabled',
      'pod-security.kubernetes.io/enforce=restricted',
    );
    await kubectl('label', 'namespace', sidecars.name, 'config-sync.io/node-agent=enabled');
    apply(
      nodeAgentManifests(cluster().plane, [state.ns, state.quiet, sidecars.name], {
        CONFIG_SYNC_DEBOUNCE: '2s',
        // A stuck kubelet or a tampered file counts as drift 10 s after the change, not 90.
        CONFIG_SYNC_GRACE: '10s',
        // A file tampered with is found at the next --resync at the latest.
        CONFIG_SYNC_RESYNC: '10s',
        // The Secret's restart of alpha follows the subPath one within seconds.
        CONFIG_SYNC_MIN_RESTART_INTERVAL: '1s',
      }),
    );
    apply(
      [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'app-config' },
          data: { 'app.yaml': 'level: info\n', 'log.yaml': 'format: json\n' },
        },
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'app-secret' },
          stringData: { token: SECRET_VALUE },
        },
        ...WORKLOADS.map((w) => ({
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: `env-${w}` },
          stringData: { password: SECRET_VALUE },
        })),
        ...WORKLOADS.map(workload),
      ],
      state.ns,
    );
    // Not opted in: its namespace has no label and it has no annotation.
    apply(
      [
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'plain-config' },
          data: { 'app.yaml': 'x\n' },
        },
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'plain' },
          spec: {
            automountServiceAccountToken: false,
            containers: [
              {
                name: 'app',
                image: 'registry.k8s.io/pause:3.10',
                volumeMounts: [{ name: 'c', mountPath: '/etc/app' }],
              },
            ],
            volumes: [{ name: 'c', configMap: { name: 'plain-config' } }],
          },
        },
      ],
      state.quiet,
    );
    state.agent = await nodeAgentPod(admin);
    const pods = await allInSync(admin, state.ns);
    expect(pods.every((p) => (p.spec?.containers ?? []).every((c) => c.name !== 'config-sync'))).toBe(true);

    const log = await nodeAgentLog(state.agent);
    const served = new Set(
      log.filter((l) => l.msg === 'serving the Pod').map((l) => `${l.namespace}/${l.pod}`),
    );
    expect(served.size).toBe(WORKLOADS.length * REPLICAS);
    expect([...served].every((p) => p.startsWith(`${state.ns}/`))).toBe(true);
    // One watch per distinct object: app-config, app-secret and the four env Secrets.
    const metrics = await nodeAgentMetrics(state.agent);
    expect(sample(metrics, 'config_sync_node_pods_served')).toBe(20);
    expect(sample(metrics, 'config_sync_node_source_watches')).toBe(6);
    expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
    expect(log.some((l) => l.level === 'error')).toBe(false);
    // It read every Pod's 0400 Secret volume as root with no capability at all: its process's
    // effective capabilities, read on the node, are none.
    expect(capabilitiesOf(state.agent, 'node')).toEqual(['0000000000000000']);
  });

  it('leaves Pods with a config-sync sidecar to it, and never reads a Pod not opted in', async () => {
    const log = await nodeAgentLog(state.agent);
    expect(log.some((l) => l.msg === 'serving the Pod' && l.namespace === sidecars.name)).toBe(false);
    expect(log.some((l) => l.msg === 'serving the Pod' && l.namespace === state.quiet)).toBe(false);
    expect(JSON.stringify(log)).not.toContain('plain-config');
  });

  it('a subPath file changed: SubPathStale, and each of the four workloads restarted exactly once', async () => {
    await kubectl(
      '-n',
      state.ns,
      'patch',
      'configmap',
      'app-config',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ data: { 'log.yaml': 'format: text\n' } }),
    );
    for (const w of WORKLOADS)
      await waitFor(
        async () => ((await restartHistory(state.admin, state.ns, w)).length > 0 ? true : undefined),
        {
          what: `the restart of ${w}`,
          timeoutMs: 60_000,
          intervalMs: 500,
        },
      );
    // The new Pods, every one InSync: the volume updated by kubelet, the subPath file new.
    await allInSync(state.admin, state.ns);
    for (const w of WORKLOADS) expect(await restartHistory(state.admin, state.ns, w)).toHaveLength(1);
    const log = await nodeAgentLog(state.agent);
    expect(log.filter((l) => l.reason === 'SubPathStale').length).toBeGreaterThan(0);
    expect(log.filter((l) => l.msg === 'restarted workload')).toHaveLength(WORKLOADS.length);
  });

  it('a Secret behind an env var rotated: EnvStale, one restart of its workload, the value nowhere', async () => {
    await kubectl(
      '-n',
      state.ns,
      'patch',
      'secret',
      'env-alpha',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ stringData: { password: NEW_PASSWORD } }),
    );
    await waitFor(
      async () => ((await restartHistory(state.admin, state.ns, 'alpha')).length === 2 ? true : undefined),
      {
        what: 'the second restart of alpha',
        timeoutMs: 60_000,
        intervalMs: 500,
      },
    );
    await allInSync(state.admin, state.ns);
    for (const w of WORKLOADS.filter((x) => x !== 'alpha'))
      expect(await restartHistory(state.admin, state.ns, w)).toHaveLength(1);
    const log = await nodeAgentLog(state.agent);
    expect(log.some((l) => l.reason === 'EnvStale')).toBe(true);
    const text = JSON.stringify(log) + (await nodeAgentMetrics(state.agent));
    for (const value of [SECRET_VALUE, NEW_PASSWORD]) {
      expect(text).not.toContain(value);
      expect(text).not.toContain(Buffer.from(value).toString('base64'));
    }
  });

  it('kubelet frozen while the ConfigMap changes: ContentDrift past --grace, one restart of each workload, done once kubelet is back', async () => {
    const before = Object.fromEntries(
      await Promise.all(
        WORKLOADS.map(async (w) => [w, (await restartHistory(state.admin, state.ns, w)).length] as const),
      ),
    );
    const { node } = cluster();
    node.freezeKubelet(true);
    try {
      await kubectl(
        '-n',
        state.ns,
        'patch',
        'configmap',
        'app-config',
        '--type',
        'merge',
        '-p',
        JSON.stringify({ data: { 'app.yaml': 'level: warn\n' } }),
      );
      for (const w of WORKLOADS)
        await waitFor(
          async () =>
            (await restartHistory(state.admin, state.ns, w)).length > (before[w] ?? 0) ? true : undefined,
          {
            what: `the restart of ${w} with kubelet frozen`,
            timeoutMs: 60_000,
            intervalMs: 500,
            onTimeout: () => nodeAgentLogTail(),
          },
        );
    } finally {
      node.freezeKubelet(false);
    }
    await allInSync(state.admin, state.ns);
    for (const w of WORKLOADS)
      expect(await restartHistory(state.admin, state.ns, w)).toHaveLength((before[w] ?? 0) + 1);
    const log = await nodeAgentLog(state.agent);
    expect(log.some((l) => l.reason === 'ContentDrift')).toBe(true);
  });

  // kubelet rewrites a tampered file itself at its next sync of the Pod (its AtomicWriter compares
  // the payload with the files on disk), within a second here. The file stays wrong while kubelet
  // does not run: kubelet is frozen before the file is changed. And charlie was restarted for the
  // config it has now (the test above): a Pod of that restart that drifts again is what a
  // restart did not heal, so the circuit opens and the node agent alerts rather than restart
  // again for the same config (a tampered node is for a person to look at).
  it('a file tampered with on the node while kubelet is frozen: ContentDrift at the next --resync, an alert; kubelet mends it', async () => {
    const pods = await allInSync(state.admin, state.ns);
    const victim = pods.find((p) => p.metadata?.labels?.app === 'charlie') as V1Pod;
    const name = victim.metadata?.name ?? '';
    const before = (await restartHistory(state.admin, state.ns, 'charlie')).length;
    const core = state.admin.makeApiClient(CoreV1Api);
    const condition = async () =>
      inSyncCondition(await core.readNamespacedPod({ name, namespace: state.ns }));
    const { node } = cluster();
    node.freezeKubelet(true);
    try {
      // The file behind the key's link, in kubelet's current payload directory, as someone with
      // root on the node would change it.
      const volume = path.join(
        NODE_BASE,
        'kubelet/pods',
        victim.metadata?.uid ?? '',
        'volumes/kubernetes.io~configmap/config',
      );
      fs.writeFileSync(path.join(volume, '..data', 'app.yaml'), 'level: tampered\n');
      const out = await waitFor(
        async () => ((await condition())?.status === 'False' ? await condition() : undefined),
        {
          what: 'the tampered Pod out of sync',
          timeoutMs: 45_000,
          intervalMs: 500,
          onTimeout: () => nodeAgentLogTail(),
        },
      );
      expect(out?.reason).toBe('ContentDrift');
      expect(out?.message).toMatch(/app:\/etc\/app: .*app\.yaml content/);
      // Its series names it while it is out of sync.
      expect(await nodeAgentMetrics(state.agent)).toContain(
        `config_sync_pod_out_of_sync{namespace="${state.ns}",pod="${name}"} 1`,
      );
    } finally {
      node.freezeKubelet(false);
    }
    // kubelet, back, writes the file again: InSync, with no restart for it.
    await waitFor(async () => ((await condition())?.status === 'True' ? true : undefined), {
      what: 'kubelet to mend the file',
      timeoutMs: 45_000,
      intervalMs: 500,
    });
    const log = await nodeAgentLog(state.agent);
    expect(log.some((l) => l.pod === name && l.alert === 'CircuitOpen')).toBe(true);
    expect(await restartHistory(state.admin, state.ns, 'charlie')).toHaveLength(before);
  });

  // Never act on a stale view, per Pod, on the real node: the node's Pods cut off from the API
  // server (the `kubernetes` Service) while a ConfigMap changes, and kubelet, which reaches the
  // API server itself, delivers the change to every Pod. The node agent's copy is old and it
  // cannot confirm it: no Pod may be called drifted, no workload restarted.
  it('a partition while kubelet delivers a change: no drift told, no restart, every Pod InSync once it lifts', async () => {
    await allInSync(state.admin, state.ns);
    const before = Object.fromEntries(
      await Promise.all(
        WORKLOADS.map(async (w) => [w, (await restartHistory(state.admin, state.ns, w)).length] as const),
      ),
    );
    const mark = (await nodeAgentLog(state.agent)).length;
    const { node } = cluster();
    node.partitionPods(true);
    try {
      await kubectl(
        '-n',
        state.ns,
        'patch',
        'configmap',
        'app-config',
        '--type',
        'merge',
        '-p',
        JSON.stringify({ data: { 'app.yaml': 'level: partitioned\n' } }),
      );
      // kubelet delivers it; past the 10 s --grace the node agent, blind, must not accuse: its
      // read to confirm a drift finds no answer (10 s), and the Pod is Unknown.
      await waitFor(
        async () =>
          (await nodeAgentLog(state.agent))
            .slice(mark)
            .some((l) => l.state === 'Unknown' && /could not confirm the cached copy/.test(String(l.msg)))
            ? true
            : undefined,
        {
          what: 'a drift the node agent could not confirm',
          timeoutMs: 60_000,
          intervalMs: 1000,
          onTimeout: () => nodeAgentLogTail(),
        },
      );
    } finally {
      node.partitionPods(false);
    }
    const rv = (
      await state.admin
        .makeApiClient(CoreV1Api)
        .readNamespacedConfigMap({ name: 'app-config', namespace: state.ns })
    ).metadata?.resourceVersion;
    await waitFor(
      async () => {
        const pods = await allInSync(state.admin, state.ns, 5_000).catch(() => undefined);
        return pods?.every((p) =>
          p.metadata?.annotations?.['config-sync.io/matched-versions']?.includes(
            `ConfigMap/app-config@${rv}`,
          ),
        )
          ? true
          : undefined;
      },
      {
        what: 'every Pod matched on the new version',
        timeoutMs: 60_000,
        intervalMs: 1000,
        onTimeout: () => nodeAgentLogTail(),
      },
    );
    for (const w of WORKLOADS)
      expect(await restartHistory(state.admin, state.ns, w)).toHaveLength(before[w] ?? 0);
    const log = (await nodeAgentLog(state.agent)).slice(mark);
    expect(log.filter((l) => l.state === 'Drifted' || l.msg === 'restarted workload')).toEqual([]);
  });

  // The node agent's own Pod deleted (the DaemonSet makes another) and a subPath key changed
  // before the new one runs: it finds the drift no agent watched happen, and restarts each
  // workload exactly once.
  it('a subPath change while the node agent is replaced: found by the new one, one restart of each workload', async () => {
    await allInSync(state.admin, state.ns);
    const before = Object.fromEntries(
      await Promise.all(
        WORKLOADS.map(async (w) => [w, (await restartHistory(state.admin, state.ns, w)).length] as const),
      ),
    );
    const old = state.agent.metadata?.name ?? '';
    await kubectl('-n', 'config-sync', 'delete', 'pod', old, '--wait=true');
    await kubectl(
      '-n',
      state.ns,
      'patch',
      'configmap',
      'app-config',
      '--type',
      'merge',
      '-p',
      JSON.stringify({ data: { 'log.yaml': 'format: logfmt\n' } }),
    );
    state.agent = await waitFor(
      async () => {
        const pod = await nodeAgentPod(state.admin);
        return pod.metadata?.name !== old ? pod : undefined;
      },
      { what: 'the new node agent Ready', timeoutMs: 120_000, intervalMs: 500 },
    );
    for (const w of WORKLOADS)
      await waitFor(
        async () =>
          (await restartHistory(state.admin, state.ns, w)).length > (before[w] ?? 0) ? true : undefined,
        {
          what: `the restart of ${w}`,
          timeoutMs: 60_000,
          intervalMs: 500,
          onTimeout: () => nodeAgentLogTail(),
        },
      );
    await allInSync(state.admin, state.ns);
    for (const w of WORKLOADS)
      expect(await restartHistory(state.admin, state.ns, w)).toHaveLength((before[w] ?? 0) + 1);
  });

  it("its own token may not patch a Pod bound to another node, nor a workload's image", async () => {
    const admin = state.admin;
    const core = admin.makeApiClient(CoreV1Api);
    await core.createNode({ body: { metadata: { name: 'e2e-no-kubelet' } } });
    try {
      await core.createNamespacedPod({
        namespace: state.ns,
        body: {
          metadata: { name: 'on-another-node' },
          spec: {
            nodeName: 'e2e-no-kubelet',
            securityContext: {
              runAsNonRoot: true,
              runAsUser: 65532,
              seccompProfile: { type: 'RuntimeDefault' },
            },
            containers: [
              {
                name: 'app',
                image: 'registry.k8s.io/pause:3.10',
                securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
              },
            ],
          },
        },
      });
      const token = (
        await kubectl(
          '-n',
          'config-sync',
          'create',
          'token',
          'config-sync-node',
          '--bound-object-kind',
          'Pod',
          '--bound-object-name',
          state.agent.metadata?.name ?? '',
        )
      ).trim();
      const kc = tokenKubeConfig(cluster().plane, token);
      const refused = await kc
        .makeApiClient(CoreV1Api)
        .patchNamespacedPod({
          name: 'on-another-node',
          namespace: state.ns,
          body: [{ op: 'add', path: '/metadata/annotations', value: { 'config-sync.io/probe': 'x' } }],
        })
        .then(
          () => 'allowed',
          (e: { code?: number; body?: string }) => `${e.code} ${e.body}`,
        );
      expect(refused).toMatch(/^403 .*only Pods bound to its own node/);
      const image = await kc
        .makeApiClient(AppsV1Api)
        .patchNamespacedDeployment({
          name: 'bravo',
          namespace: state.ns,
          body: [
            { op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'evil.example/app:1' },
          ],
        })
        .then(
          () => 'allowed',
          (e: { code?: number }) => String(e.code),
        );
      expect(image).toBe('403');
    } finally {
      await core
        .deleteNamespacedPod({ name: 'on-another-node', namespace: state.ns, gracePeriodSeconds: 0 })
        .catch(() => {});
      await core.deleteNode({ name: 'e2e-no-kubelet' }).catch(() => {});
    }
  });

  it("honours the workloads' annotations: ignored volume and env Secret, a never-restart source, a bad value told", async () => {
    const { admin, ns } = state;
    const restricted = {
      securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
    };
    const appContainer = {
      name: 'app',
      image: 'registry.k8s.io/pause:3.10',
      securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
    };
    const labels = { app: 'tango' };
    apply(
      [
        // Mounted by many workloads, owned by none of them: drift reported, never a restart.
        {
          apiVersion: 'v1',
          kind: 'ConfigMap',
          metadata: { name: 'shared-ca', annotations: { 'config-sync.io/restart': 'never' } },
          data: { 'ca.crt': 'ca-1\n' },
        },
        { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'scratch' }, data: { seed: '1\n' } },
        {
          apiVersion: 'v1',
          kind: 'Secret',
          metadata: { name: 'env-tango' },
          stringData: { password: SECRET_VALUE },
        },
        {
          apiVersion: 'apps/v1',
          kind: 'Deployment',
          metadata: { name: 'tango' },
          spec: {
            replicas: 1,
            selector: { matchLabels: labels },
            template: {
              metadata: {
                labels,
                annotations: {
                  'config-sync.io/ignore': 'volume/scratch',
                  'config-sync.io/secret-env': 'ignore',
                },
              },
              spec: {
                automountServiceAccountToken: false,
                ...restricted,
                containers: [
                  {
                    ...appContainer,
                    env: [
                      { name: 'PW', valueFrom: { secretKeyRef: { name: 'env-tango', key: 'password' } } },
                    ],
                    volumeMounts: [
                      { name: 'ca', mountPath: '/etc/ca.crt', subPath: 'ca.crt', readOnly: true },
                      { name: 'scratch', mountPath: '/var/scratch', subPath: 'seed', readOnly: true },
                    ],
                  },
                ],
                volumes: [
                  { name: 'ca', configMap: { name: 'shared-ca' } },
                  { name: 'scratch', configMap: { name: 'scratch' } },
                ],
              },
            },
          },
        },
        // A bare Pod whose annotation cannot be read.
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'uniform', annotations: { 'config-sync.io/on-drift': 'restrat' } },
          spec: {
            automountServiceAccountToken: false,
            ...restricted,
            containers: [
              { ...appContainer, volumeMounts: [{ name: 'c', mountPath: '/etc/app', readOnly: true }] },
            ],
            volumes: [{ name: 'c', configMap: { name: 'app-config' } }],
          },
        },
      ],
      ns,
    );
    const core = admin.makeApiClient(CoreV1Api);
    const tango = await waitFor(
      async () => {
        const pod = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'app=tango' })).items[0];
        return pod && inSyncCondition(pod)?.status === 'True' ? pod : undefined;
      },
      { what: 'tango InSync', timeoutMs: 120_000, intervalMs: 500, onTimeout: () => nodeAgentLogTail() },
    );
    const name = tango.metadata?.name ?? '';
    const serving = (await nodeAgentLog(state.agent)).find(
      (l) => l.msg === 'serving the Pod' && l.pod === name,
    );
    expect(serving?.selection).toEqual([
      'container app: volume scratch at /var/scratch: not checked, config-sync.io/ignore names volume/scratch',
      'container app: env from Secret env-tango: not checked, config-sync.io/secret-env is ignore',
    ]);
    expect(serving?.sources).toEqual(['ConfigMap/shared-ca']);

    // The ignored ones change first; then the never-restart source, which the agent does check.
    const patch = (kind: string, obj: string, body: unknown) =>
      kubectl('-n', ns, 'patch', kind, obj, '--type', 'merge', '-p', JSON.stringify(body));
    await patch('secret', 'env-tango', { stringData: { password: NEW_PASSWORD } });
    await patch('configmap', 'scratch', { data: { seed: '2\n' } });
    await patch('configmap', 'shared-ca', { data: { 'ca.crt': 'ca-2\n' } });
    const podEvents = async (pod: string) =>
      (await core.listNamespacedEvent({ namespace: ns, fieldSelector: `involvedObject.name=${pod}` })).items;
    const never = await waitFor(
      async () => (await podEvents(name)).find((e) => e.reason === 'NeverRestart'),
      {
        what: "tango's NeverRestart Event",
        timeoutMs: 60_000,
        intervalMs: 500,
        onTimeout: () => nodeAgentLogTail(),
      },
    );
    expect(never.message).toContain('ConfigMap/shared-ca says config-sync.io/restart=never');
    expect(never.message).toContain('app:/etc/ca.crt: SubPathStale');
    // Nothing of the ignored ones: no drift told of them, no restart for anything.
    const told = (await podEvents(name)).map((e) => e.message ?? '').join('\n');
    expect(told).not.toContain('env-tango');
    expect(told).not.toContain('scratch');
    expect(await restartHistory(admin, ns, 'tango')).toEqual([]);
    const now = await core.readNamespacedPod({ name, namespace: ns });
    expect(inSyncCondition(now)?.status).toBe('False');
    expect(inSyncCondition(now)?.message).toContain('config-sync.io/restart=never');

    const invalid = await waitFor(
      async () => (await podEvents('uniform')).find((e) => e.reason === 'InvalidAnnotation'),
      {
        what: "uniform's InvalidAnnotation Event",
        timeoutMs: 60_000,
        intervalMs: 500,
        onTimeout: () => nodeAgentLogTail(),
      },
    );
    expect(invalid.type).toBe('Warning');
    expect(invalid.message).toBe(
      'config-sync.io/on-drift="restrat" is not restart, alert-only or reload; write one of those; until fixed, no restart',
    );
    expect(JSON.stringify(await nodeAgentLog(state.agent))).not.toContain(NEW_PASSWORD);
  });
});
