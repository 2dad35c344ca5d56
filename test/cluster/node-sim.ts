// A node with no kubelet, for the node agent's tests against the real API server: a Node object,
// Pods bound to it through the binding subresource (as the scheduler binds them), their status
// set Running with their containers' starts (as kubelet reports them), and kubelet's directory
// for them laid out by the test as kubelet lays it out (kubelet v1.36.3; discover/node-pods.ts
// gives the sources): `pods/<uid>/volumes/kubernetes.io~configmap|secret/<volume>/` written by
// the transcription of kubelet's AtomicWriter (kubelet-volume.ts), and a subPath mount's file at
// `pods/<uid>/volume-subpaths/<volume>/<container>/<index>`. The real node's layout is checked
// against the real kubelet in test/e2e.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import type { ControlPlaneInfo } from './control-plane.ts';
import { atomicWrite, configMapPayload, secretPayload, writeSubPathFile } from './kubelet-volume.ts';
import { waitFor } from './wait.ts';

/** Makes a Node object `name` with no kubelet behind it (nothing heartbeats it; it stays NotReady). */
export async function createSimNode(admin: KubeConfig, name: string): Promise<void> {
  await admin
    .makeApiClient(CoreV1Api)
    .createNode({ body: { metadata: { name, labels: { 'config-sync.io/sim': 'true' } } } });
}

/** Binds a Pending Pod to `node`, as the scheduler does. */
export async function bindPod(
  admin: KubeConfig,
  namespace: string,
  pod: string,
  node: string,
): Promise<void> {
  await admin.makeApiClient(CoreV1Api).createNamespacedBinding({
    namespace,
    body: { metadata: { name: pod }, target: { apiVersion: 'v1', kind: 'Node', name: node } },
  });
}

/** Sets the Pod's status as kubelet reports a Running Pod: every container running since `startedAt`. */
export function markRunning(info: ControlPlaneInfo, namespace: string, pod: V1Pod, startedAt: Date): void {
  const at = startedAt.toISOString().replace(/\.\d+Z$/, 'Z');
  const status = {
    status: {
      phase: 'Running',
      startTime: at,
      containerStatuses: (pod.spec?.containers ?? []).map((c) => ({
        name: c.name,
        image: c.image,
        imageID: '',
        ready: true,
        restartCount: 0,
        started: true,
        state: { running: { startedAt: at } },
      })),
    },
  };
  const res = spawnSync(
    info.kubectl,
    [
      '--kubeconfig',
      info.adminKubeconfig,
      '-n',
      namespace,
      'patch',
      'pod',
      pod.metadata?.name ?? '',
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify(status),
    ],
    { encoding: 'utf8' },
  );
  if (res.status !== 0) throw new Error(`kubectl patch pod status: ${res.stderr}`);
}

/** The Pods of `label` in `namespace`, once there are `count` of them. */
export function podsOf(admin: KubeConfig, namespace: string, label: string, count: number): Promise<V1Pod[]> {
  return waitFor(
    async () => {
      const list = await admin
        .makeApiClient(CoreV1Api)
        .listNamespacedPod({ namespace, labelSelector: `app=${label}` });
      const live = list.items.filter((p) => !p.metadata?.deletionTimestamp);
      return live.length === count ? live : undefined;
    },
    { what: `${count} pods of ${label}` },
  );
}

/**
 * Lays out kubelet's directory for `pod` under `root`: each ConfigMap and Secret volume written
 * from the objects as they are now in the API, and each subPath mount's file. Returns where the
 * volumes and subPath files are, to update by hand.
 */
export async function layKubeletDirs(admin: KubeConfig, root: string, pod: V1Pod): Promise<void> {
  const core = admin.makeApiClient(CoreV1Api);
  const namespace = pod.metadata?.namespace ?? '';
  const uid = pod.metadata?.uid ?? '';
  const podDir = path.join(root, 'pods', uid);
  for (const volume of pod.spec?.volumes ?? []) {
    let payload: ReturnType<typeof configMapPayload> | undefined;
    let plugin = '';
    if (volume.configMap) {
      const cm = await core.readNamespacedConfigMap({ name: volume.configMap.name ?? '', namespace });
      payload = configMapPayload(cm, volume.configMap.items ? { items: volume.configMap.items } : {});
      plugin = 'kubernetes.io~configmap';
    } else if (volume.secret) {
      const s = await core.readNamespacedSecret({ name: volume.secret.secretName ?? '', namespace });
      payload = secretPayload(s, volume.secret.items ? { items: volume.secret.items } : {});
      plugin = 'kubernetes.io~secret';
    }
    if (!payload) continue;
    const dir = path.join(podDir, 'volumes', plugin, volume.name);
    fs.mkdirSync(dir, { recursive: true });
    atomicWrite(dir, payload);
    for (const container of pod.spec?.containers ?? []) {
      for (const [index, mount] of (container.volumeMounts ?? []).entries()) {
        if (mount.name !== volume.name || !mount.subPath) continue;
        const file = payload[mount.subPath];
        if (!file) continue;
        writeSubPathFile(
          path.join(podDir, 'volume-subpaths', volume.name, container.name, String(index)),
          file,
        );
      }
    }
  }
}

/** kubelet's propagation of a ConfigMap volume's new content to `pod` (not its subPath files). */
export async function propagateVolume(
  admin: KubeConfig,
  root: string,
  pod: V1Pod,
  volume: string,
): Promise<void> {
  const spec = pod.spec?.volumes?.find((v) => v.name === volume);
  if (!spec?.configMap) throw new Error(`volume ${volume} is not a ConfigMap volume`);
  const cm = await admin
    .makeApiClient(CoreV1Api)
    .readNamespacedConfigMap({ name: spec.configMap.name ?? '', namespace: pod.metadata?.namespace ?? '' });
  atomicWrite(
    path.join(root, 'pods', pod.metadata?.uid ?? '', 'volumes', 'kubernetes.io~configmap', volume),
    configMapPayload(cm),
  );
}
