// Proves the test control plane is a real Kubernetes: kubectl works against it, the
// controller-manager runs its controllers, RBAC is enforced, bound tokens carry the pod, and
// in-cluster loading works from a laid-out service-account directory.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoreV1Api, KubeConfig, VersionApi } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { createServiceAccountIdentity, tokenKubeConfig, whoAmI } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, rejection, useNamespace } from './support.ts';

const ns = useNamespace('harness');
const readConfigMaps = [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list'] }];

describe('the control plane', () => {
  it('answers kubectl with the admin kubeconfig', () => {
    const cp = controlPlane();
    const res = spawnSync(
      cp.kubectl,
      ['--kubeconfig', cp.adminKubeconfig, 'get', 'namespaces', '-o', 'name'],
      {
        encoding: 'utf8',
      },
    );
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
    expect(res.stdout.split('\n')).toEqual(
      expect.arrayContaining(['namespace/default', 'namespace/kube-system']),
    );
  });

  it('reports the Kubernetes version it was built from', async () => {
    const version = await ns.admin.makeApiClient(VersionApi).getCode();
    expect(version.gitVersion).toBe('v1.36.3');
    expect(version.minor).toBe('36');
  });

  it('listens on loopback only', () => {
    expect(new URL(controlPlane().server).hostname).toBe('127.0.0.1');
  });

  it('turns a Deployment into a ReplicaSet and Pods (which stay Pending: no kubelet)', async () => {
    const apps = ns.admin.makeApiClient(AppsV1Api);
    const core = ns.admin.makeApiClient(CoreV1Api);
    const labels = { app: 'web' };
    await apps.createNamespacedDeployment({
      namespace: ns.name,
      body: {
        metadata: { name: 'web' },
        spec: {
          replicas: 2,
          selector: { matchLabels: labels },
          template: {
            metadata: { labels },
            spec: { containers: [{ name: 'app', image: 'config-sync.invalid/app:never-pulled' }] },
          },
        },
      },
    });
    const pods = await waitFor(
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
        return list.items.length === 2 ? list.items : undefined;
      },
      { what: 'two pods of Deployment web' },
    );
    const owner = pods[0]?.metadata?.ownerReferences?.[0];
    expect(owner?.kind).toBe('ReplicaSet');
    const rs = await apps.readNamespacedReplicaSet({ namespace: ns.name, name: owner?.name ?? '' });
    expect(rs.metadata?.ownerReferences?.[0]).toMatchObject({ kind: 'Deployment', name: 'web' });
    for (const pod of pods) expect(pod.status?.phase).toBe('Pending');
  });
});

describe('RBAC', () => {
  it('refuses a ServiceAccount with no RoleBinding, with the API own message', async () => {
    const id = await createServiceAccountIdentity(ns.admin, { namespace: ns.name, name: 'no-role' });
    const client = tokenKubeConfig(controlPlane(), id.token).makeApiClient(CoreV1Api);
    const { code, message } = await rejection(client.listNamespacedConfigMap({ namespace: ns.name }));
    expect(code).toBe(403);
    expect(message).toBe(
      `configmaps is forbidden: User "${id.username}" cannot list resource "configmaps" in API group "" in the namespace "${ns.name}"`,
    );
  });

  it('allows what a Role in the same namespace grants, and nothing more', async () => {
    const id = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'reader',
      rules: readConfigMaps,
    });
    const client = tokenKubeConfig(controlPlane(), id.token).makeApiClient(CoreV1Api);
    const list = await client.listNamespacedConfigMap({ namespace: ns.name });
    expect(list.items.map((cm) => cm.metadata?.name)).toContain('kube-root-ca.crt');
    expect((await rejection(client.listNamespacedSecret({ namespace: ns.name }))).code).toBe(403);
  });

  it('refuses when the Role and RoleBinding sit in another namespace (the scope mix-up)', async () => {
    const other = await ns.admin.makeApiClient(CoreV1Api).createNamespace({
      body: { metadata: { generateName: 'harness-other-' } },
    });
    const otherName = other.metadata?.name ?? '';
    try {
      const id = await createServiceAccountIdentity(ns.admin, {
        namespace: ns.name,
        name: 'misplaced',
        rules: readConfigMaps,
        roleNamespace: otherName,
      });
      const client = tokenKubeConfig(controlPlane(), id.token).makeApiClient(CoreV1Api);
      const { code, message } = await rejection(client.listNamespacedConfigMap({ namespace: ns.name }));
      expect(code).toBe(403);
      expect(message).toContain(`in the namespace "${ns.name}"`);
      // The grant is real, just elsewhere.
      await expect(client.listNamespacedConfigMap({ namespace: otherName })).resolves.toBeDefined();
    } finally {
      await ns.admin.makeApiClient(CoreV1Api).deleteNamespace({ name: otherName });
    }
  });
});

describe('ServiceAccount tokens', () => {
  it('binds a token to a Pod: SelfSubjectReview shows the pod name and uid', async () => {
    const id = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'bound',
      boundPodName: 'agent-0',
    });
    const user = await whoAmI(tokenKubeConfig(controlPlane(), id.token));
    expect(user.username).toBe(id.username);
    expect(user.groups).toEqual(
      expect.arrayContaining(['system:serviceaccounts', `system:serviceaccounts:${ns.name}`]),
    );
    expect(user.extra?.['authentication.kubernetes.io/pod-name']).toEqual(['agent-0']);
    expect(user.extra?.['authentication.kubernetes.io/pod-uid']).toEqual([id.pod?.uid]);
  });

  it('loads in-cluster from a laid-out service-account directory and KUBERNETES_SERVICE_*', async () => {
    const id = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'incluster',
      rules: readConfigMaps,
    });
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'in-cluster-'));
    const saved = { host: process.env.KUBERNETES_SERVICE_HOST, port: process.env.KUBERNETES_SERVICE_PORT };
    try {
      const layout = layInClusterDir(root, controlPlane(), { token: id.token, namespace: ns.name });
      expect(fs.readlinkSync(path.join(layout.serviceAccountDir, 'token'))).toBe('..data/token');
      Object.assign(process.env, layout.env);
      const kc = new KubeConfig();
      kc.loadFromCluster(layout.root);
      expect(kc.getCurrentCluster()?.server).toBe(controlPlane().server);
      expect(kc.getContextObject(kc.getCurrentContext())?.namespace).toBe(ns.name);
      const user = await whoAmI(kc);
      expect(user.username).toBe(id.username);
      const list = await kc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: ns.name });
      expect(list.items.length).toBeGreaterThan(0);
    } finally {
      restoreEnv('KUBERNETES_SERVICE_HOST', saved.host);
      restoreEnv('KUBERNETES_SERVICE_PORT', saved.port);
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});

function restoreEnv(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}

// --- no orphans ------------------------------------------------------------------------------

const fixture = path.resolve(
  path.dirname(fileURLToPath(import.meta.url)),
  '../fixtures/control-plane-child.ts',
);

/** Gone, or a zombie waiting for init to reap it: either way, no longer running. */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('no orphans', () => {
  let leftover: string | undefined;
  afterEach(() => {
    if (leftover) fs.rmSync(leftover, { recursive: true, force: true });
  });

  it.each(['SIGKILL', 'SIGINT'] as const)(
    'a harness process ended by %s takes every component with it',
    async (signal) => {
      const child = spawn(process.execPath, [fixture], { stdio: ['ignore', 'pipe', 'inherit'] });
      const lines = createInterface({ input: child.stdout });
      const first = await new Promise<string>((resolve, reject) => {
        lines.once('line', resolve);
        child.once('exit', (code) => reject(new Error(`fixture exited with ${code} before starting`)));
      });
      const { pids, dataDir } = JSON.parse(first) as { pids: Record<string, number>; dataDir: string };
      leftover = dataDir;
      expect(Object.keys(pids).sort()).toEqual(['etcd', 'kube-apiserver', 'kube-controller-manager']);
      for (const pid of Object.values(pids)) expect(running(pid)).toBe(true);

      child.kill(signal);
      await waitFor(() => Object.values(pids).every((pid) => !running(pid)) || undefined, {
        what: `every component to end after ${signal}`,
        timeoutMs: 15_000,
      });
    },
    180_000,
  );
});
