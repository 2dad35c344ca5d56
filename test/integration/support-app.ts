// An application to keep honest, as the agent tests need it: the shipped RBAC base applied, a
// ConfigMap and Secret, a Deployment `web` whose Pods run as config-sync-agent, and for each Pod a
// kubelet-style mount directory and an in-cluster identity bound to that Pod.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Deployment } from '@kubernetes/client-node';
import { expect } from 'vitest';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane } from './support.ts';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const bin = path.join(root, 'bin/config-sync.js');
export const SECRET_VALUE = 's3cret-value-that-must-never-leak';

export interface AppPod {
  readonly name: string;
  readonly uid: string;
  /** The agent's view: --mount-root. The app's /etc/app is <mountRoot>/etc/app. */
  readonly mountRoot: string;
  /** Environment of an agent process in this Pod. */
  readonly env: Record<string, string>;
}

export function applyRbac(namespace: string): void {
  const apply = spawnSync(
    controlPlane().kubectl,
    [
      '--kubeconfig',
      controlPlane().adminKubeconfig,
      'apply',
      '--server-side',
      '-n',
      namespace,
      '-k',
      path.join(root, 'deploy/sidecar/rbac'),
    ],
    { encoding: 'utf8' },
  );
  expect(apply.stderr).toBe('');
}

export function webDeployment(replicas: number, extra: Partial<V1Deployment['spec']> = {}): V1Deployment {
  const labels = { app: 'web' };
  return {
    metadata: { name: 'web' },
    spec: {
      replicas,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          serviceAccountName: 'config-sync-agent',
          volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
          containers: [
            {
              name: 'app',
              image: 'config-sync.invalid/app:never-pulled',
              volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
            },
            {
              name: 'config-sync',
              image: 'config-sync.invalid/agent:never-pulled',
              volumeMounts: [{ name: 'config', mountPath: '/etc/app', readOnly: true }],
            },
          ],
        },
      },
      ...extra,
    },
  };
}

/** Sets up the namespace's app and returns one AppPod per replica, volumes written as kubelet would. */
export async function createApp(
  admin: KubeConfig,
  namespace: string,
  replicas: number,
  deployment = webDeployment(replicas),
) {
  applyRbac(namespace);
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 'web-config' }, data: { 'app.yaml': 'level: info\n' } },
  });
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'web-secrets' }, stringData: { password: SECRET_VALUE } },
  });
  await admin.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace, body: deployment });
  const pods = await waitFor(
    async () => {
      const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
      return list.items.length === replicas ? list.items : undefined;
    },
    { what: `${replicas} pods of web` },
  );
  const cm = await core.readNamespacedConfigMap({ name: 'web-config', namespace });
  const out: AppPod[] = [];
  for (const pod of pods) {
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid ?? '';
    const mountRoot = fs.mkdtempSync(path.join(os.tmpdir(), `${name}-`));
    writeMount(mountRoot, cm.data ?? {});
    const id = await createServiceAccountIdentity(admin, {
      namespace,
      name: 'config-sync-agent',
      existingServiceAccount: true,
      bindToPod: { name, uid },
    });
    const layout = layInClusterDir(path.join(mountRoot, 'pod-root'), controlPlane(), {
      token: id.token,
      namespace,
    });
    out.push({
      name,
      uid,
      mountRoot,
      env: {
        PATH: process.env.PATH ?? '',
        HOME: mountRoot,
        ...layout.env,
        CONFIG_SYNC_SERVICE_ACCOUNT_DIR: layout.serviceAccountDir,
        POD_NAMESPACE: namespace,
        POD_NAME: name,
        CONFIG_SYNC_MOUNT_ROOT: mountRoot,
      },
    });
  }
  return out;
}

/** What kubelet does when it propagates the ConfigMap to this pod's /etc/app. */
export function writeMount(mountRoot: string, data: Record<string, string>): void {
  const dir = path.join(mountRoot, 'etc/app');
  fs.mkdirSync(dir, { recursive: true });
  atomicWrite(dir, configMapPayload({ data }));
}

export interface CliRun {
  readonly status: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs the built CLI as a separate process; asserts the Secret value is in none of its output. */
export function cli(args: string[], env: Record<string, string>): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [bin, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString();
    });
    child.once('error', reject);
    child.once('exit', (status) => {
      expect(`${stdout}${stderr}`).not.toContain(SECRET_VALUE);
      resolve({ status, stdout, stderr });
    });
  });
}

export async function updateConfig(
  admin: KubeConfig,
  namespace: string,
  data: Record<string, string>,
): Promise<void> {
  await admin.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({
    name: 'web-config',
    namespace,
    body: { metadata: { name: 'web-config' }, data },
  });
}

export async function templateAnnotations(
  admin: KubeConfig,
  namespace: string,
): Promise<Record<string, string>> {
  const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: 'web', namespace });
  return d.spec?.template.metadata?.annotations ?? {};
}
