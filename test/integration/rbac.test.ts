// deploy/sidecar/rbac applied with `kubectl apply -k` to the real API server: the agent can do
// its job with exactly these grants (doctor says ok), and nothing beyond them: no unrelated
// Secret, no other Pod, no other Deployment, no change to its own Pod's spec or labels.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { createKubeClient } from '../../src/kube/client.ts';
import type { Scope } from '../../src/kube/scope.ts';
import { bin, root } from '../cluster/app.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { type InClusterLayout, layInClusterDir, podEnv } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterScope, rejection, useNamespace } from './support.ts';
import { applyRbac, firstPod, oneReplicaApp } from './support-app.ts';

const ns = useNamespace('rbac');

let webPod: { name: string; uid: string };
let otherPod: { name: string; uid: string };
let layout: InClusterLayout;

beforeAll(async () => {
  // `kubectl apply -k` of the shipped base, into the test namespace, as a cluster admin would.
  applyRbac(ns.name);

  const core = ns.admin.makeApiClient(CoreV1Api);
  const apps = ns.admin.makeApiClient(AppsV1Api);
  await core.createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'web-config' }, data: { a: '1' } },
  });
  await core.createNamespacedSecret({
    namespace: ns.name,
    body: { metadata: { name: 'web-secrets' }, stringData: { k: 'v' } },
  });
  await core.createNamespacedSecret({
    namespace: ns.name,
    body: { metadata: { name: 'unrelated' }, stringData: { k: 'v' } },
  });
  await apps.createNamespacedDeployment({
    namespace: ns.name,
    body: oneReplicaApp('web', 'config-sync-agent'),
  });
  await apps.createNamespacedDeployment({ namespace: ns.name, body: oneReplicaApp('other', 'default') });
  webPod = await firstPod(ns.admin, ns.name, 'web');
  otherPod = await firstPod(ns.admin, ns.name, 'other');

  // The agent's identity: a token of config-sync-agent bound to the web Pod, mounted in-cluster.
  const agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'config-sync-agent',
    existingServiceAccount: true,
    bindToPod: webPod,
  });
  layout = layInClusterDir(tempDir('rbac-'), controlPlane(), {
    token: agent.token,
    namespace: ns.name,
  });
});

let agentScope: Scope;
beforeAll(async () => {
  agentScope = await inClusterScope(layout, ns.name);
  // The API server enforces an admission policy from its informer's copy, a moment after the
  // policy is created: where this file's applyRbac created the policies (the first of the run to
  // apply the base), a refusal tested at once could find none yet. Wait until the agent's
  // patch of another Pod (a dry run) and of another spec field of its Deployment are refused.
  await waitFor(
    async () => {
      const client = createKubeClient(agentScope);
      const refused = await Promise.all(
        [
          client.patch(pod(otherPod.name), { metadata: { annotations: { probe: 'x' } } }, 'merge', {
            dryRun: 'All',
          }),
          client.patch(deploymentPath('web'), { spec: { replicas: 0 } }, 'merge', { dryRun: 'All' }),
        ].map((call) =>
          rejection(call).then(
            (r) => r.code === 403,
            () => false,
          ),
        ),
      );
      return refused.every(Boolean) ? true : undefined;
    },
    { what: "the admission policies in force for the agent's identity", timeoutMs: 30_000 },
  );
});

function agentClient() {
  return createKubeClient(agentScope);
}

const pod = (name: string) => ({ resource: 'pods', namespace: ns.name, name });
const deploymentPath = (name: string) => ({
  group: 'apps',
  resource: 'deployments',
  namespace: ns.name,
  name,
});

describe('with exactly the shipped grants', () => {
  it('doctor, run as the agent in its pod, finds everything it needs', () => {
    const res = spawnSync(process.execPath, [bin, 'doctor'], {
      encoding: 'utf8',
      env: podEnv(layout, ns.name, webPod.name),
    });
    expect(res.stdout.split('\n')[0]).toBe(
      `ok: config-sync can work in namespace "${ns.name}" as system:serviceaccount:${ns.name}:config-sync-agent (14 permissions checked)`,
    );
    expect(res.status).toBe(0);
  });

  it('patches its own Pod (annotation) and restarts its own Deployment', async () => {
    const client = agentClient();
    await client.patch(
      pod(webPod.name),
      { metadata: { annotations: { 'config-sync.io/last-config-sync': 'now' } } },
      'merge',
    );
    await client.patch(
      deploymentPath('web'),
      { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': 'now' } } } } },
      'merge',
    );
    const admin = ns.admin.makeApiClient(AppsV1Api);
    const web = await admin.readNamespacedDeployment({ name: 'web', namespace: ns.name });
    expect(web.spec?.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']).toBe('now');
  });
});

describe('and nothing more', () => {
  it('cannot read an unrelated Secret', async () => {
    const { code, message } = await rejection(
      agentClient().get({ resource: 'secrets', namespace: ns.name, name: 'unrelated' }),
    );
    expect(code).toBe(403);
    expect(message).toContain('cannot get resource "secrets"');
  });

  it('cannot list Secrets', async () => {
    expect((await rejection(agentClient().get({ resource: 'secrets', namespace: ns.name }))).code).toBe(403);
  });

  it('cannot patch another Pod (admission policy)', async () => {
    const { code, message } = await rejection(
      agentClient().patch(pod(otherPod.name), { metadata: { annotations: { x: 'y' } } }, 'merge'),
    );
    expect(code).toBe(403);
    expect(message).toContain('config-sync may patch only its own Pod');
  });

  it("cannot change its own Pod's labels", async () => {
    const { code, message } = await rejection(
      agentClient().patch(pod(webPod.name), { metadata: { labels: { app: 'hijacked' } } }, 'merge'),
    );
    expect(code).toBe(403);
    expect(message).toContain("config-sync may not change a Pod's labels");
  });

  it('cannot restart another Deployment', async () => {
    const { code, message } = await rejection(
      agentClient().patch(
        deploymentPath('other'),
        { spec: { template: { metadata: { annotations: { r: 'now' } } } } },
        'merge',
      ),
    );
    expect(code).toBe(403);
    expect(message).toContain('cannot patch resource "deployments"');
  });

  // A stolen agent token must not own the workload or lie about its Pod (issue 12, item 3).
  const template = (spec: Record<string, unknown>) => ({ spec: { template: { spec } } });
  it.each([
    [
      'change the image',
      template({ containers: [{ name: 'app', image: 'attacker.example/evil:1' }] }),
      "may not change the pod template's spec",
    ],
    [
      'change the ServiceAccount',
      template({ serviceAccountName: 'default' }),
      "may not change the pod template's spec",
    ],
    [
      'add a privileged container with the host root mounted',
      template({
        volumes: [{ name: 'host', hostPath: { path: '/' } }],
        containers: [
          { name: 'app', image: 'config-sync.invalid/app:never-pulled' },
          {
            name: 'x',
            image: 'attacker.example/evil:1',
            securityContext: { privileged: true },
            volumeMounts: [{ name: 'host', mountPath: '/host' }],
          },
        ],
      }),
      "may not change the pod template's spec",
    ],
    ['scale it to zero', { spec: { replicas: 0 } }, "may not change a workload's replicas"],
    ['pause it', { spec: { paused: true } }, "may not change a workload's replicas"],
    [
      'add another template annotation',
      { spec: { template: { metadata: { annotations: { 'prometheus.io/scrape': 'false' } } } } },
      'may change only the pod template annotations',
    ],
    [
      'add a finalizer to the pod template',
      { spec: { template: { metadata: { finalizers: ['example.com/hold'] } } } },
      "not the template's labels, finalizers or owners",
    ],
    [
      'relabel the Deployment',
      { metadata: { labels: { team: 'attacker' } } },
      "may not change a workload's labels",
    ],
  ])('cannot %s of its own Deployment (admission policy)', async (_what, patch, message) => {
    const { code, message: said } = await rejection(
      agentClient().patch(deploymentPath('web'), patch, 'strategic'),
    );
    expect(code).toBe(403);
    expect(said).toContain(message);
  });

  // The policy compares the spec's fields one by one (CEL cannot compare a spec without its
  // template), so a field the API gains in a later Kubernetes would pass unchecked: a stolen
  // token could change it. This pins the list to the API server the tests run against.
  it('names every field of the apps/v1 workload specs the API server has, so none is left for a stolen token', async () => {
    const policy = fs.readFileSync(path.join(root, 'deploy/sidecar/rbac/own-workload-policy.yaml'), 'utf8');
    const compared = new Set(
      [...policy.matchAll(/variables\.newSpec\.\?(\w+) == variables\.oldSpec\.\?\1\b/g)].map((m) => m[1]),
    );
    const options: https.RequestOptions = {};
    await ns.admin.applyToHTTPSOptions(options);
    const server = new URL(controlPlane().server);
    const document = await new Promise<{ components: { schemas: Record<string, { properties: object }> } }>(
      (resolve, reject) => {
        https
          .get(
            { ...options, hostname: server.hostname, port: server.port, path: '/openapi/v3/apis/apps/v1' },
            (res) => {
              let text = '';
              res.setEncoding('utf8');
              res.on('data', (c: string) => {
                text += c;
              });
              res.on('end', () => resolve(JSON.parse(text)));
            },
          )
          .on('error', reject);
      },
    );
    const uncompared: string[] = [];
    for (const kind of ['Deployment', 'StatefulSet', 'DaemonSet']) {
      const schema = document.components.schemas[`io.k8s.api.apps.v1.${kind}Spec`];
      expect(schema, `${kind}Spec in the OpenAPI document`).toBeDefined();
      for (const field of Object.keys(schema?.properties ?? {}))
        if (field !== 'template' && !compared.has(field)) uncompared.push(`${kind}.spec.${field}`);
    }
    expect(uncompared, 'add these to own-workload-policy.yaml (and the chart: npm run chart:sync)').toEqual(
      [],
    );
  });

  it('can still restart it: both restart annotations (a server-side dry run, so its Pod stays)', async () => {
    await agentClient().patch(
      deploymentPath('web'),
      {
        spec: {
          template: {
            metadata: {
              annotations: {
                'kubectl.kubernetes.io/restartedAt': 'later',
                'config-sync.io/config-hash': 'abc',
              },
            },
          },
        },
      },
      'merge',
      { dryRun: 'All' },
    );
  });

  const podStatus = (name: string) => ({ ...pod(name), subresource: 'status' });
  it.each([
    [
      'mark its Pod Ready',
      { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
      'only the config-sync.io/InSync condition',
    ],
    [
      'give its Pod another IP',
      { status: { podIP: '10.9.9.9', podIPs: [{ ip: '10.9.9.9' }] } },
      "may not change a Pod's status",
    ],
    ['set its Pod Running', { status: { phase: 'Running' } }, "may not change a Pod's status"],
    ['set its observedGeneration', { status: { observedGeneration: 99 } }, "may not change a Pod's status"],
    [
      'add a finalizer through pods/status',
      { metadata: { finalizers: ['example.com/hold'] } },
      "may not change a Pod's labels, finalizers or owners",
    ],
  ])('cannot %s (admission policy)', async (_what, patch, message) => {
    const { code, message: said } = await rejection(
      agentClient().patch(podStatus(webPod.name), patch, 'strategic'),
    );
    expect(code).toBe(403);
    expect(said).toContain(message);
  });

  it('cannot add a finalizer to its own Pod (admission policy)', async () => {
    const { code, message } = await rejection(
      agentClient().patch(pod(webPod.name), { metadata: { finalizers: ['example.com/hold'] } }, 'merge'),
    );
    expect(code).toBe(403);
    expect(message).toContain("may not change a Pod's labels, finalizers or owners");
  });

  it("cannot change its own Pod's other annotations", async () => {
    const { code, message } = await rejection(
      agentClient().patch(pod(webPod.name), { metadata: { annotations: { 'other.io/x': 'y' } } }, 'merge'),
    );
    expect(code).toBe(403);
    expect(message).toContain('may change only its own config-sync.io/ annotations');
  });

  it('can still write its InSync condition', async () => {
    await agentClient().patch(
      podStatus(webPod.name),
      {
        status: {
          conditions: [
            {
              type: 'config-sync.io/InSync',
              status: 'True',
              reason: 'InSync',
              lastTransitionTime: new Date().toISOString(),
            },
          ],
        },
      },
      'strategic',
    );
  });

  it('has no ClusterRole or ClusterRoleBinding in the shipped base', () => {
    const out = spawnSync(controlPlane().kubectl, ['kustomize', path.join(root, 'deploy/sidecar/rbac')], {
      encoding: 'utf8',
    });
    expect(out.status).toBe(0);
    const kinds = [...out.stdout.matchAll(/^kind: (\w+)$/gm)].map((m) => m[1]);
    expect(kinds.sort()).toEqual([
      'Role',
      'RoleBinding',
      'ServiceAccount',
      // own Pod, own workload, own Rollout
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
      'ValidatingAdmissionPolicyBinding',
      'ValidatingAdmissionPolicyBinding',
    ]);
  });
});
