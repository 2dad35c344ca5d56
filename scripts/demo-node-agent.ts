// `npm run demo:node-agent`: config-sync as one agent per node, on a real node (root on Linux),
// narrated. kubelet, containerd and runc run the shipped image as deploy/node's DaemonSet; the
// app's Pods have no sidecar. The story: (1) control plane and node; (2) the node agent; (3) the
// app, opted in by its namespace's label; (4) its Pods InSync, written by the node agent, with
// one watch per object; (5) a change kubelet never propagates (a subPath file); (6) the node
// agent heals it with exactly one restart; (7) its metrics.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import {
  buildNodeImages,
  ensureNodePackages,
  resolveAssets,
  resolveNodeAssets,
} from '../test/cluster/assets.ts';
import { ControlPlane, type ControlPlaneInfo } from '../test/cluster/control-plane.ts';
import { adminKubeConfig } from '../test/cluster/identities.ts';
import { KubeNode, nodeUnsupported } from '../test/cluster/node.ts';
import { nodeAgentManifests } from '../test/cluster/node-agent-manifests.ts';
import { waitFor } from '../test/cluster/wait.ts';

const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s = '') => process.stdout.write(`${s}\n`);
const step = (n: number, s: string) => say(`\n${bold(`[${n}/7] ${s}`)}`);
const detail = (s: string) => say(`      ${s}`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;
const root = path.resolve(import.meta.dirname, '..');
const NAMESPACE = 'shop';
const run = promisify(execFile);

// Asynchronous: this process also runs the node's forwarder to the apiserver.
async function kubectl(plane: ControlPlaneInfo, ...args: string[]): Promise<string> {
  const { stdout } = await run(plane.kubectl, ['--kubeconfig', plane.adminKubeconfig, ...args], {
    encoding: 'utf8',
  });
  return stdout;
}

/** Applies objects as one List (kubectl apply -f). */
async function apply(plane: ControlPlaneInfo, dir: string, objects: readonly unknown[], namespace?: string) {
  const file = path.join(dir, `apply-${Date.now()}.json`);
  fs.writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'List', items: objects }));
  await kubectl(plane, ...(namespace ? ['-n', namespace] : []), 'apply', '-f', file);
}

/** The example's app (deploy/sidecar/example) without its sidecar: a volume, a subPath file, a Secret in env. */
const web = {
  apiVersion: 'apps/v1',
  kind: 'Deployment',
  metadata: { name: 'web' },
  spec: {
    replicas: 2,
    selector: { matchLabels: { app: 'web' } },
    template: {
      metadata: { labels: { app: 'web' } },
      spec: {
        automountServiceAccountToken: false,
        securityContext: { runAsNonRoot: true, runAsUser: 65532, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [
          {
            name: 'app',
            image: 'registry.k8s.io/pause:3.10',
            env: [
              { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'password' } } },
            ],
            volumeMounts: [
              { name: 'config', mountPath: '/etc/app', readOnly: true },
              { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml', readOnly: true },
            ],
            securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          },
        ],
        volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
      },
    },
  },
};

async function webPods(admin: KubeConfig): Promise<V1Pod[]> {
  const list = await admin
    .makeApiClient(CoreV1Api)
    .listNamespacedPod({ namespace: NAMESPACE, labelSelector: 'app=web' });
  return list.items.filter((p) => !p.metadata?.deletionTimestamp);
}

const inSync = (p: V1Pod) =>
  p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True') ?? false;

async function main(): Promise<void> {
  say(bold('config-sync demo: one agent per node, on a real node'));
  const unsupported = nodeUnsupported();
  if (unsupported) {
    say(`This demo runs kubelet, containerd and runc on this machine, and ${unsupported}.`);
    say('Run it as root on Linux; `npm run demo` tells the sidecar story anywhere.');
    process.exitCode = 2;
    return;
  }
  step(1, 'Control plane and node');
  detail('building them on the first run takes several minutes (Go, from the module proxy); then seconds');
  const t0 = Date.now();
  ensureNodePackages();
  const work = fs.mkdtempSync(path.join(os.tmpdir(), 'config-sync-demo-node-agent-'));
  const images = buildNodeImages(path.join(work, 'images'));
  const plane = await ControlPlane.start({ assets: resolveAssets() });
  let node: KubeNode | undefined;
  try {
    node = await KubeNode.start({ plane: plane.info, assets: resolveNodeAssets(), imagesDir: images });
    detail(`ready in ${seconds(Date.now() - t0)}: ${plane.info.server}, node ${node.info.name}`);
    const admin = adminKubeConfig(plane.info);
    const core = admin.makeApiClient(CoreV1Api);

    step(2, 'The node agent: kubectl apply -k deploy/node');
    await kubectl(plane.info, 'create', 'namespace', NAMESPACE);
    await apply(
      plane.info,
      work,
      nodeAgentManifests(plane.info, [NAMESPACE], { CONFIG_SYNC_DEBOUNCE: '2s' }),
    );
    const agent = await waitFor(
      async () =>
        (await core.listNamespacedPod({ namespace: 'config-sync' })).items.find((p) =>
          p.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'),
        ),
      { what: 'the node agent Ready', timeoutMs: 120_000, intervalMs: 500 },
    );
    detail(`DaemonSet config-sync-node: ${agent.metadata?.name} Ready on ${agent.spec?.nodeName}`);
    detail("it reads kubelet's own directories (a read-only hostPath), as root with no capability");

    step(3, `The app, opted in: kubectl label namespace ${NAMESPACE} config-sync.io/node-agent=enabled`);
    await kubectl(plane.info, 'label', 'namespace', NAMESPACE, 'config-sync.io/node-agent=enabled');
    const example = path.join(root, 'deploy/sidecar/example');
    await kubectl(
      plane.info,
      'apply',
      '-n',
      NAMESPACE,
      '-f',
      path.join(example, 'configmap.yaml'),
      '-f',
      path.join(example, 'secret.yaml'),
    );
    await apply(plane.info, work, [web], NAMESPACE);
    detail(
      'Deployment web, 2 replicas, no sidecar: /etc/app (a volume), /etc/log.yaml (subPath), DB_PASSWORD',
    );

    step(4, 'Its Pods InSync, written by the node agent');
    const pods = await waitFor(
      async () => {
        const list = await webPods(admin);
        return list.length === 2 && list.every(inSync) ? list : undefined;
      },
      { what: 'two Pods InSync', timeoutMs: 120_000, intervalMs: 500 },
    );
    const names = pods.map((p) => p.metadata?.name ?? '');
    for (const p of pods)
      detail(
        `${p.metadata?.name}: containers ${p.spec?.containers.map((c) => c.name).join(', ')}; config-sync.io/InSync=True`,
      );
    const metricsUrl = `http://${agent.status?.podIP}:9464/metrics`;
    const watches = /^config_sync_node_source_watches (\S+)$/m.exec(
      await (await fetch(metricsUrl)).text(),
    )?.[1];
    detail(`API watches held by the node agent: ${watches} (web-config and web-secrets, for both Pods)`);

    step(5, 'A change kubelet never propagates');
    detail('kubectl edit configmap web-config: log.yaml format: json -> format: text');
    await kubectl(
      plane.info,
      '-n',
      NAMESPACE,
      'patch',
      'configmap',
      'web-config',
      '--type',
      'merge',
      '-p',
      '{"data":{"log.yaml":"format: text\\n"}}',
    );
    detail('kubelet updates /etc/app, but /etc/log.yaml is a subPath copy: it stays old in both Pods');

    step(6, 'The node agent heals it, after the 2s debounce');
    const restartedAt = await waitFor(
      async () =>
        (await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: 'web', namespace: NAMESPACE }))
          .spec?.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt'],
      { what: 'the restart', timeoutMs: 60_000, intervalMs: 250 },
    );
    detail(`Deployment web template: kubectl.kubernetes.io/restartedAt=${restartedAt}`);
    const fresh = await waitFor(
      async () => {
        const list = await webPods(admin);
        return list.length === 2 && list.every((p) => inSync(p) && !names.includes(p.metadata?.name ?? ''))
          ? list
          : undefined;
      },
      { what: 'the rollout to finish with both new Pods InSync', timeoutMs: 150_000, intervalMs: 500 },
    );
    detail(`rolled out: ${fresh.map((p) => p.metadata?.name).join(', ')} InSync`);
    const events = (await core.listNamespacedEvent({ namespace: NAMESPACE })).items.filter(
      (e) => e.source?.component === 'config-sync',
    );
    detail(`Events: ${events.map((e) => `${e.reason} (${e.involvedObject.name})`).join(', ')}`);

    step(7, `Metrics (curl ${agent.status?.podIP}:9464/metrics)`);
    for (const line of (await (await fetch(metricsUrl)).text()).split('\n'))
      if (/^config_sync_(in_sync|heal_total|node_pods_served|node_source_watches)/.test(line))
        detail(`  ${line}`);
    const restarts = events.filter((e) => e.reason === 'Healed').length;
    say();
    say(
      bold(
        `Exactly ${restarts} restart for 2 Pods that held the same stale file, from one agent on the node. Done.`,
      ),
    );
    if (restarts !== 1) process.exitCode = 1;
  } finally {
    await node?.stop();
    await plane.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

await main();
