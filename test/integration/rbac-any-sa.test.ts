// The agent's Role bound to the app's own ServiceAccount, as the README allows: the admission
// policies hold that token exactly as they hold config-sync-agent's, because they find the agent
// by the mark its Role carries (config-sync.io agents/restricted), not by a ServiceAccount name.
// And they hold nobody else: a ServiceAccount with the same rights but no mark, and an
// administrator with a wildcard rule, still change what they like.
import { AppsV1Api, CoreV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import { createServiceAccountIdentity, grantRole, type Identity } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterScope, rejection, useNamespace } from './support.ts';
import { applyRbac, firstPod, oneReplicaApp } from './support-app.ts';

const ns = useNamespace('rbac-any-sa');
const APP_SA = 'web-app';

const deploymentPath = (name: string) => ({
  group: 'apps',
  resource: 'deployments',
  namespace: ns.name,
  name,
});
const podPath = (name: string) => ({ resource: 'pods', namespace: ns.name, name });
const imagePatch = {
  spec: { template: { spec: { containers: [{ name: 'app', image: 'attacker.example/evil:1' }] } } },
};

/** A client that presents `identity`'s token from inside its Pod, as the agent there would. */
async function clientOf(identity: Identity): Promise<KubeClient> {
  const layout = layInClusterDir(tempDir('rbac-any-sa-'), controlPlane(), {
    token: identity.token,
    namespace: ns.name,
  });
  return createKubeClient(await inClusterScope(layout, ns.name));
}

/** RBAC's informer, too, takes a moment to see a new Role: until `client` may read Deployment web. */
async function untilRoleInForce(client: KubeClient): Promise<void> {
  await waitFor(
    async () =>
      client.get(deploymentPath('web')).then(
        () => true,
        () => undefined,
      ),
    { what: 'the new Role in force' },
  );
}

let webPod: { name: string; uid: string };
let otherPod: { name: string; uid: string };
let agent: KubeClient;

beforeAll(async () => {
  // The shipped base (its Role names Deployment web), then that Role bound to the app's own
  // ServiceAccount instead of config-sync-agent.
  applyRbac(ns.name);
  const core = ns.admin.makeApiClient(CoreV1Api);
  await core.createNamespacedServiceAccount({ namespace: ns.name, body: { metadata: { name: APP_SA } } });
  await ns.admin.makeApiClient(RbacAuthorizationV1Api).createNamespacedRoleBinding({
    namespace: ns.name,
    body: {
      metadata: { name: `config-sync-agent-as-${APP_SA}` },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'config-sync-agent' },
      subjects: [{ kind: 'ServiceAccount', name: APP_SA, namespace: ns.name }],
    },
  });
  const apps = ns.admin.makeApiClient(AppsV1Api);
  await apps.createNamespacedDeployment({ namespace: ns.name, body: oneReplicaApp('web', APP_SA) });
  await apps.createNamespacedDeployment({ namespace: ns.name, body: oneReplicaApp('other', 'default') });
  webPod = await firstPod(ns.admin, ns.name, 'web');
  otherPod = await firstPod(ns.admin, ns.name, 'other');
  agent = await clientOf(
    await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: APP_SA,
      existingServiceAccount: true,
      bindToPod: webPod,
    }),
  );
  // The API server enforces a policy from its informer's copy, a moment after it is applied.
  await waitFor(
    async () => {
      const refused = await rejection(
        agent.patch(deploymentPath('web'), imagePatch, 'strategic', { dryRun: 'All' }),
      ).then(
        (r) => r.code === 403,
        () => false,
      );
      return refused || undefined;
    },
    { what: `the admission policies in force for ServiceAccount ${APP_SA}`, timeoutMs: 30_000 },
  );
});

describe(`the agent's Role bound to the app's own ServiceAccount (${APP_SA})`, () => {
  it.each([
    ['change the image', imagePatch, "may not change the pod template's spec"],
    ['scale it to zero', { spec: { replicas: 0 } }, "may not change a workload's replicas"],
    [
      'add a finalizer to the pod template',
      { spec: { template: { metadata: { finalizers: ['example.com/hold'] } } } },
      "not the template's labels, finalizers or owners",
    ],
  ])('cannot %s of its Deployment', async (_what, patch, message) => {
    const { code, message: said } = await rejection(agent.patch(deploymentPath('web'), patch, 'strategic'));
    expect(code).toBe(403);
    expect(said).toContain(message);
  });

  it('cannot patch another Pod, nor add a finalizer to its own, nor mark its own Ready', async () => {
    const other = await rejection(
      agent.patch(
        podPath(otherPod.name),
        { metadata: { annotations: { 'config-sync.io/x': 'y' } } },
        'merge',
      ),
    );
    expect(other.code).toBe(403);
    expect(other.message).toContain('may patch only its own Pod');
    const finalizer = await rejection(
      agent.patch(podPath(webPod.name), { metadata: { finalizers: ['example.com/hold'] } }, 'merge'),
    );
    expect(finalizer.code).toBe(403);
    expect(finalizer.message).toContain("may not change a Pod's labels, finalizers or owners");
    const ready = await rejection(
      agent.patch(
        { ...podPath(webPod.name), subresource: 'status' },
        { status: { conditions: [{ type: 'Ready', status: 'True' }] } },
        'strategic',
      ),
    );
    expect(ready.code).toBe(403);
    expect(ready.message).toContain('only the config-sync.io/InSync condition');
  });

  it('can still restart it (a server-side dry run) and write its own config-sync.io/ annotation', async () => {
    await agent.patch(
      deploymentPath('web'),
      { spec: { template: { metadata: { annotations: { 'kubectl.kubernetes.io/restartedAt': 'later' } } } } },
      'merge',
      { dryRun: 'All' },
    );
    await agent.patch(
      podPath(webPod.name),
      { metadata: { annotations: { 'config-sync.io/probe': 'x' } } },
      'merge',
      { dryRun: 'All' },
    );
  });
});

describe('and nobody else is held', () => {
  it('a ServiceAccount with the same rights but without the mark changes the image', async () => {
    const rules = [
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'], resourceNames: ['web'] },
    ];
    const deployer = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'deployer',
      rules,
    });
    const client = await clientOf(deployer);
    await untilRoleInForce(client);
    await expect(
      client.patch(deploymentPath('web'), imagePatch, 'strategic', { dryRun: 'All' }),
    ).resolves.toBeDefined();
  });

  it('an administrator (a wildcard rule, which grants the mark too) changes the image', async () => {
    const admin = await createServiceAccountIdentity(ns.admin, { namespace: ns.name, name: 'ns-admin' });
    await grantRole(ns.admin, {
      namespace: ns.name,
      name: 'ns-admin',
      serviceAccount: { namespace: ns.name, name: 'ns-admin' },
      rules: [{ apiGroups: ['*'], resources: ['*'], verbs: ['*'] }],
    });
    const client = await clientOf(admin);
    await untilRoleInForce(client);
    await expect(
      client.patch(deploymentPath('web'), imagePatch, 'strategic', { dryRun: 'All' }),
    ).resolves.toBeDefined();
  });
});
