// The node agent (`config-sync node`) against the real API server, on a node with no kubelet:
// Pods bound to a Node object of the test's own, set Running, and kubelet's directory for them
// laid out by the test as kubelet lays it out (test/cluster/node-sim.ts). Its identity is the
// shipped one: deploy/node's ClusterRoles (bound in each namespace as the base binds them) and
// admission policies, and a token of config-sync/config-sync-node bound to a Pod on that node.
// It reaches the API through the test's proxy, which records every request: what it never
// requested, it never read. The real node (kubelet's own directories, the shipped image) is in
// test/e2e/node-agent.test.ts.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { AgentProcess } from '../cluster/app.ts';
import { bin } from '../cluster/app.ts';
import { createSimNode, podsOf } from '../cluster/node-sim.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, rejection, useNamespace } from './support.ts';
import { SECRET_VALUE, sample, templateAnnotations } from './support-app.ts';
import { type SimNodeAgent, simNodeAgent } from './support-node.ts';

const served = useNamespace('node-served');
const unlabelled = useNamespace('node-unlabelled');
const OTHER_NODE = `sim-other-${Math.random().toString(36).slice(2, 7)}`;

/** web: 3 replicas, a ConfigMap volume, a subPath file of it, a Secret in env; no sidecar. */
function web(): V1Deployment {
  const labels = { app: 'web' };
  return {
    metadata: { name: 'web' },
    spec: {
      replicas: 3,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
          containers: [
            {
              name: 'app',
              image: 'config-sync.invalid/app:never-pulled',
              volumeMounts: [
                { name: 'config', mountPath: '/etc/app' },
                { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml' },
              ],
              env: [
                {
                  name: 'DB_PASSWORD',
                  valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'password' } },
                },
              ],
            },
          ],
        },
      },
    },
  };
}

/** A lone Pod reading ConfigMap `config`, with `annotations`, and a `config-sync` container if `sidecar`. */
function lonePod(
  name: string,
  config: string,
  annotations: Record<string, string> = {},
  sidecar = false,
): V1Pod {
  return {
    metadata: { name, labels: { app: name }, annotations },
    spec: {
      volumes: [{ name: 'config', configMap: { name: config } }],
      containers: [
        {
          name: 'app',
          image: 'config-sync.invalid/app:never-pulled',
          volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
        },
        ...(sidecar
          ? [
              {
                name: 'config-sync',
                image: 'config-sync.invalid/agent:never-pulled',
                volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
              },
            ]
          : []),
      ],
    },
  };
}

let sim: SimNodeAgent;
let agent: AgentProcess;
const pods = new Map<string, V1Pod>();

async function place(namespace: string, name: string, node?: string): Promise<V1Pod> {
  const bound = await sim.place(namespace, name, node);
  pods.set(`${namespace}/${name}`, bound);
  return bound;
}

beforeAll(async () => {
  const admin = served.admin;
  const core = admin.makeApiClient(CoreV1Api);
  sim = await simNodeAgent(admin, [served.name, unlabelled.name], 'served');
  await createSimNode(admin, OTHER_NODE);

  // The served namespace is opted in by its label; the other is not.
  await core.patchNamespace({
    name: served.name,
    body: [{ op: 'add', path: '/metadata/labels/config-sync.io~1node-agent', value: 'enabled' }],
  });
  for (const [ns, name] of [
    [served.name, 'web-config'],
    [served.name, 'other-config'],
    [served.name, 'sidecar-config'],
    [served.name, 'elsewhere-config'],
    [unlabelled.name, 'plain-config'],
    [unlabelled.name, 'annotated-config'],
  ] as const)
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name }, data: { 'app.yaml': 'level: info\n', 'log.yaml': 'format: json\n' } },
    });
  await core.createNamespacedSecret({
    namespace: served.name,
    body: { metadata: { name: 'web-secrets' }, stringData: { password: SECRET_VALUE } },
  });
  await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace: served.name, body: web() });
  for (const pod of await podsOf(admin, served.name, 'web', 3))
    await place(served.name, pod.metadata?.name ?? '');
  for (const [ns, pod, node] of [
    [served.name, lonePod('other', 'other-config', { 'config-sync.io/node-agent': 'disabled' }), undefined],
    [served.name, lonePod('with-sidecar', 'sidecar-config', {}, true), undefined],
    [served.name, lonePod('elsewhere', 'elsewhere-config'), OTHER_NODE],
    [unlabelled.name, lonePod('plain', 'plain-config'), undefined],
    [
      unlabelled.name,
      lonePod('annotated', 'annotated-config', { 'config-sync.io/node-agent': 'enabled' }),
      undefined,
    ],
  ] as const) {
    await core.createNamespacedPod({ namespace: ns, body: pod });
    await place(ns, pod.metadata?.name ?? '', node);
  }

  // The node agent, through the proxy.
  agent = sim.start(['--debounce', '1s', '--log-level', 'debug']);
}, 120_000);

afterAll(async () => {
  if (process.env.NODE_AGENT_LOG) fs.writeFileSync(process.env.NODE_AGENT_LOG, agent?.output() ?? '');
  if (agent) expect(await agent.stop()).toBe(0);
  await sim?.remove();
  await served.admin
    .makeApiClient(CoreV1Api)
    .deleteNode({ name: OTHER_NODE })
    .catch(() => {});
});

async function inSyncCondition(admin: KubeConfig, namespace: string, name: string) {
  const p = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name, namespace });
  return p.status?.conditions?.find((c) => c.type === 'config-sync.io/InSync');
}

describe('the node agent on a node of its own', () => {
  it('serves the opted-in Pods on its node, and writes their InSync condition', async () => {
    const wanted = [...pods.keys()].filter((k) => k.includes('/web-') || k.endsWith('/annotated'));
    expect(wanted).toHaveLength(4);
    for (const key of wanted) {
      const [namespace, name] = key.split('/') as [string, string];
      await waitFor(
        async () =>
          (await inSyncCondition(served.admin, namespace, name))?.status === 'True' ? true : undefined,
        { what: `the InSync condition of ${key}`, timeoutMs: 30_000 },
      );
    }
    const servedLines = agent.lines
      .filter((l) => l.msg === 'serving the Pod')
      .map((l) => `${l.namespace}/${l.pod}`);
    expect(servedLines.sort()).toEqual(wanted.sort());
    expect(sample(await agent.metrics(), 'config_sync_node_pods_served')).toBe(4);
  });

  it('holds one watch per distinct object, and never reads what no served Pod reads', async () => {
    // Three web Pods read web-config and web-secrets; the annotated Pod reads annotated-config.
    expect(sample(await agent.metrics(), 'config_sync_node_source_watches')).toBe(3);
    const watched = sim.proxy.requests.filter(
      (r) => r.verb === 'watch' && /\/(configmaps|secrets)\?/.test(r.path),
    );
    const names = new Set(
      watched.map((r) => decodeURIComponent(r.path).match(/metadata\.name=([^&]+)/)?.[1]),
    );
    expect([...names].sort()).toEqual(['annotated-config', 'web-config', 'web-secrets']);
    for (const never of ['other-config', 'sidecar-config', 'elsewhere-config', 'plain-config'])
      expect(sim.proxy.requests.filter((r) => decodeURIComponent(r.path).includes(never))).toEqual([]);
    // Each Pod not served is told why, once.
    const notServed = agent.lines.filter((l) => l.msg === 'not serving the Pod');
    expect(notServed.find((l) => l.pod === 'other')?.why).toMatch(/disabled/);
    expect(notServed.find((l) => l.pod === 'with-sidecar')?.why).toMatch(/sidecar/);
    expect(notServed.find((l) => l.pod === 'plain')?.why).toBe('not opted in');
    expect(notServed.some((l) => l.pod === 'elsewhere')).toBe(false);
  });

  it('a subPath file changed in the API: SubPathStale, and exactly one restart of web among its three Pods', async () => {
    const before = await templateAnnotations(served.admin, served.name);
    expect(before).not.toHaveProperty(['config-sync.io/config-hash']);
    await served.admin.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({
      name: 'web-config',
      namespace: served.name,
      body: {
        metadata: { name: 'web-config' },
        data: { 'app.yaml': 'level: info\n', 'log.yaml': 'format: text\n' },
      },
    });
    await agent.waitFor((l) => l.reason === 'SubPathStale', 'SubPathStale');
    await waitFor(
      async () =>
        (await templateAnnotations(served.admin, served.name))['config-sync.io/config-hash']
          ? true
          : undefined,
      { what: 'the restart of web', timeoutMs: 30_000 },
    );
    await waitFor(
      () =>
        agent.lines.filter((l) => l.pod?.toString().startsWith('web-') && typeof l.decision === 'string')
          .length >= 3
          ? true
          : undefined,
      { what: "each web Pod's heal decision", timeoutMs: 30_000 },
    );
    expect(agent.lines.filter((l) => l.msg === 'restarted workload')).toHaveLength(1);
    expect(sample(await agent.metrics(), 'config_sync_heal_total', { action: 'restart', result: 'ok' })).toBe(
      1,
    );
    expect(agent.output()).not.toContain(SECRET_VALUE);
  });

  it('doctor and status, from a laptop, say which Pods the node agent checks', async () => {
    const web = [...pods.keys()].find((k) => k.includes('/web-'))?.split('/')[1] ?? '';
    const run = (...args: string[]) =>
      spawnSync(
        process.execPath,
        [bin, ...args, '--kubeconfig', controlPlane().adminKubeconfig, '-n', served.name],
        {
          encoding: 'utf8',
          env: { PATH: process.env.PATH ?? '', HOME: tempDir('node-doctor-') },
        },
      );
    const doctor = run('doctor', '--pod', web, '-o', 'json');
    const notes = (JSON.parse(doctor.stdout) as { notes: string[] }).notes;
    expect(notes.find((n) => n.startsWith(`Pod ${web}:`))).toMatch(
      /the node agent \(config-sync node\) on its node checks it, since its namespace is labelled config-sync\.io\/node-agent=enabled/,
    );
    const status = run('status', '-o', 'wide');
    const row = status.stdout.split('\n').find((l) => l.startsWith(web));
    expect(row).toMatch(/\bnode\b/);
    expect(status.stdout.split('\n').find((l) => l.startsWith('with-sidecar'))).toMatch(/\bsidecar\b/);
  });

  it("its token may patch nothing but the InSync condition and config-sync.io/ annotations of its own node's Pods, and restarts", async () => {
    const { tokenKubeConfig } = await import('../cluster/identities.ts');
    const kc = tokenKubeConfig(controlPlane(), sim.token);
    const core = kc.makeApiClient(CoreV1Api);
    const apps = kc.makeApiClient(AppsV1Api);
    const webPod = [...pods.entries()].find(([k]) => k.includes('/web-'))?.[1];
    const name = webPod?.metadata?.name ?? '';
    // Allowed: its annotation on a Pod of its node.
    await core.patchNamespacedPod({
      name,
      namespace: served.name,
      body: [{ op: 'add', path: '/metadata/annotations', value: { 'config-sync.io/probe': 'x' } }],
    });
    const refusals = await Promise.all([
      // A Pod bound to another node.
      rejection(
        core.patchNamespacedPod({
          name: 'elsewhere',
          namespace: served.name,
          body: [{ op: 'add', path: '/metadata/annotations', value: { 'config-sync.io/probe': 'x' } }],
        }),
      ),
      // A finalizer on a Pod of its node.
      rejection(
        core.patchNamespacedPod({
          name,
          namespace: served.name,
          body: [{ op: 'add', path: '/metadata/finalizers', value: ['example.com/hold'] }],
        }),
      ),
      // Another annotation.
      rejection(
        core.patchNamespacedPod({
          name,
          namespace: served.name,
          body: [{ op: 'add', path: '/metadata/annotations/example.com~1x', value: 'y' }],
        }),
      ),
      // The workload's image.
      rejection(
        apps.patchNamespacedDeployment({
          name: 'web',
          namespace: served.name,
          body: [
            { op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'evil.example/app:1' },
          ],
        }),
      ),
      // A finalizer on the pod template.
      rejection(
        apps.patchNamespacedDeployment({
          name: 'web',
          namespace: served.name,
          body: [{ op: 'add', path: '/spec/template/metadata/finalizers', value: ['example.com/hold'] }],
        }),
      ),
    ]);
    expect(refusals.map((r) => r.code)).toEqual([403, 403, 403, 403, 403]);
    expect(refusals[0]?.message).toMatch(/only Pods bound to its own node/);
    expect(refusals[1]?.message).toMatch(/labels, finalizers or owners/);
    expect(refusals[3]?.message).toMatch(/may not change the pod template's spec/);
    expect(refusals[4]?.message).toMatch(/not the template's labels, finalizers or owners/);
  });
});
