// Shared by the e2e files: a control plane and a real node of the file's own (useNode), from the
// binaries and images test/e2e/global-setup.ts built; a namespace with deploy/sidecar applied
// unmodified (`kubectl apply -k`); and
// what a user would look at: Pods, their InSync condition, Events, the agent's log (`kubectl
// logs`) and its metrics (the Pod's own address on the node's bridge).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Pod,
  type V1PodCondition,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, inject } from 'vitest';
import { root } from '../cluster/app.ts';
import { ControlPlane, type ControlPlaneInfo } from '../cluster/control-plane.ts';
import { adminKubeConfig, createTestNamespace, deleteNamespace } from '../cluster/identities.ts';
import { KubeNode, NODE_BASE } from '../cluster/node.ts';
import { waitFor } from '../cluster/wait.ts';
import type { E2eAssets } from './global-setup.ts';

const run = promisify(execFile);

const provided = inject('e2e');
/** Why this machine runs no node (the tests skip with it), or undefined. */
export const unsupported = 'unsupported' in provided ? provided.unsupported : undefined;

/** describe(), skipped with the reason where the machine cannot run the node. */
export const describeOnNode = (name: string, fn: () => void) =>
  unsupported ? describe.skip(`${name} (skipped: ${unsupported})`, fn) : describe(name, fn);

export function e2eAssets(): E2eAssets {
  if ('unsupported' in provided) throw new Error(provided.unsupported);
  return provided;
}

export interface Cluster {
  readonly plane: ControlPlaneInfo;
  readonly node: KubeNode;
}

let current: Cluster | undefined;

/** The running cluster of this file (useNode). */
export function cluster(): Cluster {
  if (!current) throw new Error('no node: call useNode() in the file, and read cluster() inside tests');
  return current;
}

/** Starts a control plane of this file's own and a real node on it; stops both after the file. */
export function useNode(): void {
  let plane: ControlPlane | undefined;
  beforeAll(async () => {
    if (unsupported) return;
    const { assets, nodeAssets, imagesDir } = e2eAssets();
    const log = (line: string) => process.stderr.write(`[e2e] ${line}\n`);
    plane = await ControlPlane.start({ assets, log });
    try {
      const node = await KubeNode.start({ plane: plane.info, assets: nodeAssets, imagesDir, log });
      current = { plane: plane.info, node };
    } catch (error) {
      await plane.stop();
      throw error;
    }
  }, 180_000);
  afterAll(async () => {
    await current?.node.stop();
    await plane?.stop();
    current = undefined;
  }, 120_000);
}

export async function kubectl(...args: string[]): Promise<string> {
  const { plane } = cluster();
  try {
    const { stdout } = await run(plane.kubectl, ['--kubeconfig', plane.adminKubeconfig, ...args], {
      encoding: 'utf8',
      timeout: 180_000,
    });
    return stdout;
  } catch (error) {
    const e = error as { stderr?: string; message: string };
    throw new Error(`kubectl ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

/**
 * A namespace of the file's own under Pod Security `restricted`, with the example applied as a
 * user applies it; `replicas` scales it first where a test needs more than the example's two.
 */
export function useExample(prefix: string): { readonly name: string; readonly admin: KubeConfig } {
  const state = { name: '', admin: undefined as KubeConfig | undefined };
  beforeAll(async () => {
    if (unsupported) return;
    state.admin = adminKubeConfig(cluster().plane);
    state.name = await createTestNamespace(state.admin, prefix);
    await kubectl('label', 'namespace', state.name, 'pod-security.kubernetes.io/enforce=restricted');
    await kubectl('apply', '-k', path.join(root, 'deploy/sidecar'), '-n', state.name);
  });
  afterAll(async () => {
    if (state.admin && state.name) await deleteNamespace(state.admin, state.name);
  });
  return {
    get name() {
      return state.name;
    },
    get admin() {
      if (!state.admin) throw new Error('useExample: read .admin inside a test or hook');
      return state.admin;
    },
  };
}

/** The Pod's config-sync.io/InSync condition, as its agent last set it. */
export function inSyncCondition(pod: V1Pod | undefined): V1PodCondition | undefined {
  return pod?.status?.conditions?.find((c) => c.type === 'config-sync.io/InSync');
}

export function inSync(pod: V1Pod): string | undefined {
  return inSyncCondition(pod)?.status;
}

/** Every container of the Pod started and passing its readiness probe (the Pod's Ready condition). */
function ready(pod: V1Pod): boolean {
  return pod.status?.conditions?.find((c) => c.type === 'Ready')?.status === 'True';
}

/**
 * The Pods of `web` (not terminating), once `count` of them are Ready and report InSync=True.
 * Ready, not just Running: the agent (a native sidecar) starts first and can report InSync before
 * kubelet has started the app, and a test that changes config then would give the app the new
 * version at its start (a subPath file, env vars) rather than leave it holding the old one.
 */
export async function webPodsInSync(
  admin: KubeConfig,
  namespace: string,
  count: number,
  timeoutMs = 120_000,
) {
  const core = admin.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const pods = (await core.listNamespacedPod({ namespace, labelSelector: 'app=web' })).items.filter(
        (p) => !p.metadata?.deletionTimestamp,
      );
      return pods.length === count && pods.every((p) => ready(p) && inSync(p) === 'True') ? pods : undefined;
    },
    { what: `${count} Pods of web Ready and InSync`, timeoutMs, intervalMs: 500 },
  );
}

/**
 * After a restart: the Pods of web once every one of `before` is replaced by a new Pod, as many,
 * all Ready and InSync.
 */
export async function webPodsReplaced(
  admin: KubeConfig,
  namespace: string,
  before: readonly V1Pod[],
  what: string,
  timeoutMs: number,
): Promise<V1Pod[]> {
  const old = new Set(before.map((p) => p.metadata?.name));
  return waitFor(
    async () => {
      const pods = await webPodsInSync(admin, namespace, before.length, 5_000).catch(() => undefined);
      return pods?.every((p) => !old.has(p.metadata?.name)) ? pods : undefined;
    },
    { what, timeoutMs, intervalMs: 1000 },
  );
}

export async function scaleWeb(namespace: string, replicas: number): Promise<void> {
  await kubectl('-n', namespace, 'scale', 'deployment', 'web', `--replicas=${replicas}`);
}

export async function patchConfig(namespace: string, data: Record<string, string>): Promise<void> {
  await kubectl(
    '-n',
    namespace,
    'patch',
    'configmap',
    'web-config',
    '--type',
    'merge',
    '-p',
    JSON.stringify({ data }),
  );
}

/** Applies a JSON patch to the Deployment web and waits for its rollout (kubectl rollout status). */
export async function patchWebAndRollOut(namespace: string, patch: readonly object[]): Promise<void> {
  await kubectl('-n', namespace, 'patch', 'deployment', 'web', '--type', 'json', '-p', JSON.stringify(patch));
  await kubectl('-n', namespace, 'rollout', 'status', 'deployment/web', '--timeout=120s');
}

/** The directory of web's `config` volume (the ConfigMap web-config) on the node, as kubelet keeps it for `pod`. */
export function configVolumeOnNode(pod: V1Pod | undefined): string {
  return path.join(
    NODE_BASE,
    'kubelet/pods',
    pod?.metadata?.uid ?? '',
    'volumes/kubernetes.io~configmap/config',
  );
}

/**
 * Sets web-config's app.yaml to `content` and waits until kubelet has written it into `volume`
 * (configVolumeOnNode): the update is delivered, read from the node's disk.
 */
export async function patchAppYamlDelivered(
  namespace: string,
  volume: string,
  content: string,
): Promise<void> {
  await patchConfig(namespace, { 'app.yaml': content });
  await waitFor(
    async () =>
      (await fs.promises.readFile(path.join(volume, 'app.yaml'), 'utf8').catch(() => '')) === content ||
      undefined,
    { what: `kubelet to deliver app.yaml ${JSON.stringify(content)}`, timeoutMs: 30_000, intervalMs: 20 },
  );
}

/** The agent's /metrics, from its Pod's address on the node's bridge. */
export async function agentMetrics(pod: V1Pod): Promise<string> {
  const res = await fetch(`http://${pod.status?.podIP}:9464/metrics`, { signal: AbortSignal.timeout(5000) });
  return res.text();
}

/** The agent's log lines as JSON, through `kubectl logs` (kubelet serves them). */
export async function agentLog(namespace: string, pod: string): Promise<Record<string, unknown>[]> {
  const text = await kubectl('-n', namespace, 'logs', pod, '-c', 'config-sync');
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/**
 * The agent's last `n` log lines, for a timeout's message (waitFor's onTimeout): its log lines
 * carry names, states, hashes and reasons, never a value.
 */
export async function agentLogTail(namespace: string, pod: string, n = 20): Promise<string> {
  const text = await kubectl('-n', namespace, 'logs', pod, '-c', 'config-sync', `--tail=${n}`);
  return `the agent's last ${n} log lines (${pod}):\n${text.trimEnd()}`;
}

export async function restartsOf(admin: KubeConfig, namespace: string): Promise<string | undefined> {
  const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: 'web', namespace });
  return d.spec?.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt'];
}

export async function eventsOf(
  admin: KubeConfig,
  namespace: string,
): Promise<{ reason: string; message: string; pod: string; at: string }[]> {
  const list = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace });
  return list.items.map((e) => ({
    reason: e.reason ?? '',
    message: e.message ?? '',
    pod: e.involvedObject.name ?? '',
    at: String(e.eventTime ?? e.firstTimestamp ?? ''),
  }));
}

/**
 * SIGKILLs every process of one container of a Pod from the node (the images have no shell to
 * do it from inside), found by the container's ID in its cgroup; kubelet restarts it, as after
 * a crash or an OOM kill. Returns how many processes it killed.
 */
export function killContainer(pod: V1Pod, container: string): number {
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  const id = statuses.find((s) => s.name === container)?.containerID?.replace(/^containerd:\/\//, '');
  if (!id) throw new Error(`container ${container} of Pod ${pod.metadata?.name} has no ID yet`);
  let killed = 0;
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8').includes(id)) {
        process.kill(pid, 'SIGKILL');
        killed++;
      }
    } catch {
      // gone, or not ours to read
    }
  }
  if (killed === 0) throw new Error(`no process of container ${container} (${id}) on the node`);
  return killed;
}

/** An app with a ConfigMap volume and no sidecar, under Pod Security restricted: a webhook is to add it. */
export function plainWorkload() {
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name: 'web' },
    spec: {
      replicas: 1,
      selector: { matchLabels: { app: 'web' } },
      template: {
        metadata: { labels: { app: 'web' } },
        spec: {
          serviceAccountName: 'config-sync-agent',
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            seccompProfile: { type: 'RuntimeDefault' },
          },
          containers: [
            {
              name: 'app',
              image: 'registry.k8s.io/pause:3.10',
              volumeMounts: [{ name: 'config', mountPath: '/etc/app', readOnly: true }],
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
            },
          ],
          volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
        },
      },
    },
  };
}
