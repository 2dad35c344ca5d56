// deploy/sidecar/rbac applied with `kubectl apply -k` to the real API server: the agent can do
// its job with exactly these grants (doctor says ok), and nothing beyond them: no unrelated
// Secret, no other Pod, no other Deployment, no change to its own Pod's spec or labels.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type V1Deployment } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { createKubeClient } from '../../src/kube/client.ts';
import { resourcePath } from '../../src/kube/resources.ts';
import type { Scope } from '../../src/kube/scope.ts';
import { bin, root } from '../cluster/app.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { type InClusterLayout, layInClusterDir, podEnv } from '../cluster/in-cluster.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterScope, rejection, useNamespace } from './support.ts';
import { applyRbac } from './support-app.ts';

const ns = useNamespace('rbac');

function deployment(name: string, serviceAccountName: string): V1Deployment {
  const labels = { app: name };
  return {
    metadata: { name },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName,
          volumes: [
            { name: 'config', configMap: { name: 'web-config' } },
            { name: 'secrets', secret: { secretName: 'web-secrets' } },
          ],
          containers: [
            {
              name: 'app',
              image: 'config-sync.invalid/app:never-pulled',
              volumeMounts: [
                { name: 'config', mountPath: '/etc/app' },
                { name: 'secrets', mountPath: '/etc/secrets' },
              ],
            },
          ],
        },
      },
    },
  };
}

async function firstPod(app: string): Promise<{ name: string; uid: string }> {
  const core = ns.admin.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const p = (await core.listNamespacedPod({ namespace: ns.name, labelSelector: `app=${app}` })).items[0];
      return p?.metadata?.name && p.metadata.uid ? { name: p.metadata.name, uid: p.metadata.uid } : undefined;
    },
    { what: `a pod of ${app}` },
  );
}

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
  await apps.createNamespacedDeployment({ namespace: ns.name, body: deployment('web', 'config-sync-agent') });
  await apps.createNamespacedDeployment({ namespace: ns.name, body: deployment('other', 'default') });
  webPod = await firstPod('web');
  otherPod = await firstPod('other');

  // The agent's identity: a token of config-sync-agent bound to the web Pod, mounted in-cluster.
  const agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'config-sync-agent',
    existingServiceAccount: true,
    bindToPod: webPod,
  });
  layout = layInClusterDir(fs.mkdtempSync(path.join(os.tmpdir(), 'rbac-')), controlPlane(), {
    token: agent.token,
    namespace: ns.name,
  });
});

let agentScope: Scope;
beforeAll(async () => {
  agentScope = await inClusterScope(layout, ns.name);
});

function agentClient() {
  return createKubeClient(agentScope);
}

const pod = (name: string) => resourcePath({ resource: 'pods', namespace: ns.name, name });
const deploymentPath = (name: string) =>
  resourcePath({ group: 'apps', resource: 'deployments', namespace: ns.name, name });

describe('with exactly the shipped grants', () => {
  it('doctor, run as the agent in its pod, finds everything it needs', () => {
    const res = spawnSync(process.execPath, [bin, 'doctor'], {
      encoding: 'utf8',
      env: podEnv(layout, ns.name, webPod.name),
    });
    expect(res.stdout.split('\n')[0]).toBe(
      `ok: config-sync can work in namespace "${ns.name}" as system:serviceaccount:${ns.name}:config-sync-agent (13 permissions checked)`,
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
      agentClient().get(resourcePath({ resource: 'secrets', namespace: ns.name, name: 'unrelated' })),
    );
    expect(code).toBe(403);
    expect(message).toContain('cannot get resource "secrets"');
  });

  it('cannot list Secrets', async () => {
    expect(
      (await rejection(agentClient().get(resourcePath({ resource: 'secrets', namespace: ns.name })))).code,
    ).toBe(403);
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
      'ValidatingAdmissionPolicy',
      'ValidatingAdmissionPolicyBinding',
    ]);
  });
});
