// An application to keep honest, as the agent tests and the demo need it: the shipped RBAC base
// applied, a ConfigMap and Secret, a Deployment `web` whose Pods run as config-sync-agent, and for
// each Pod a kubelet-style mount directory and an in-cluster identity bound to that Pod; plus an
// agent process wrapper that reads its JSON log lines and metrics. No test framework here, so
// scripts (npm run demo) use it too.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1Deployment,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { type ControlPlaneInfo, podsDirOf } from './control-plane.ts';
import { createServiceAccountIdentity } from './identities.ts';
import { layInClusterDir, podEnv } from './in-cluster.ts';
import { atomicWrite, configMapPayload } from './kubelet-volume.ts';
import { waitFor } from './wait.ts';

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

export function applyRbac(info: ControlPlaneInfo, namespace: string): void {
  const apply = spawnSync(
    info.kubectl,
    [
      '--kubeconfig',
      info.adminKubeconfig,
      'apply',
      '--server-side',
      '-n',
      namespace,
      '-k',
      path.join(root, 'deploy/sidecar/rbac'),
    ],
    { encoding: 'utf8' },
  );
  if (apply.status !== 0 || apply.stderr)
    throw new Error(`kubectl apply -k deploy/sidecar/rbac failed: ${apply.stderr}`);
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

/**
 * The web app as a StatefulSet (`kind` set, so createApp tells it from a Deployment), its Pods
 * made all at once: without a kubelet none becomes ready, and an ordered StatefulSet would wait
 * for each before making the next.
 */
export function webStatefulSet(replicas: number, extra: Partial<V1StatefulSet['spec']> = {}): V1StatefulSet {
  const { spec } = webDeployment(replicas);
  if (!spec) throw new Error('webDeployment without a spec');
  return {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: 'web' },
    spec: {
      replicas,
      selector: spec.selector,
      template: spec.template,
      serviceName: 'web',
      podManagementPolicy: 'Parallel',
      ...extra,
    },
  };
}

/** Sets up the namespace's app and returns one AppPod per replica, volumes written as kubelet would. */
export async function createApp(
  info: ControlPlaneInfo,
  admin: KubeConfig,
  namespace: string,
  replicas: number,
  workload: V1Deployment | V1StatefulSet = webDeployment(replicas),
  data: Record<string, string> = { 'app.yaml': 'level: info\n' },
) {
  applyRbac(info, namespace);
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace,
    body: { metadata: { name: 'web-config' }, data },
  });
  await core.createNamespacedSecret({
    namespace,
    body: { metadata: { name: 'web-secrets' }, stringData: { password: SECRET_VALUE } },
  });
  const apps = admin.makeApiClient(AppsV1Api);
  if (workload.kind === 'StatefulSet')
    await apps.createNamespacedStatefulSet({ namespace, body: workload as V1StatefulSet });
  else await apps.createNamespacedDeployment({ namespace, body: workload as V1Deployment });
  const pods = await waitFor(
    async () => {
      const list = await core.listNamespacedPod({ namespace, labelSelector: 'app=web' });
      return list.items.length === replicas ? list.items : undefined;
    },
    { what: `${replicas} pods of web` },
  );
  const cm = await core.readNamespacedConfigMap({ name: 'web-config', namespace });
  const out: AppPod[] = [];
  for (const pod of pods)
    out.push(await prepareAgentPod(info, admin, namespace, pod.metadata?.name ?? '', cm.data ?? {}));
  return out;
}

/**
 * What kubelet gives the agent in one Pod: its mounts (written from `data`), a service-account
 * token bound to the Pod, and the downward-API environment.
 */
export async function prepareAgentPod(
  info: ControlPlaneInfo,
  admin: KubeConfig,
  namespace: string,
  name: string,
  data: Record<string, string>,
): Promise<AppPod> {
  const pod = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name, namespace });
  const uid = pod.metadata?.uid ?? '';
  // Removed with the control plane (a run makes dozens, each holding a token).
  const podsDir = podsDirOf(info);
  fs.mkdirSync(podsDir, { recursive: true, mode: 0o755 });
  const mountRoot = fs.mkdtempSync(path.join(podsDir, `${name}-`));
  writeMount(mountRoot, data);
  const id = await createServiceAccountIdentity(admin, {
    namespace,
    name: 'config-sync-agent',
    existingServiceAccount: true,
    bindToPod: { name, uid },
  });
  const layout = layInClusterDir(path.join(mountRoot, 'pod-root'), info, {
    token: id.token,
    namespace,
  });
  // The sidecar's own emptyDir, shared by the agent and a `kubectl exec`'d CLI in that Pod.
  const stateDir = path.join(mountRoot, 'pod-state');
  fs.mkdirSync(stateDir);
  return {
    name,
    uid,
    mountRoot,
    env: {
      ...podEnv(layout, namespace, name),
      HOME: mountRoot,
      CONFIG_SYNC_MOUNT_ROOT: mountRoot,
      CONFIG_SYNC_STATE_DIR: stateDir,
    },
  };
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

/** Runs the built CLI as a separate process. */
export function runCli(args: string[], env: Record<string, string>): Promise<CliRun> {
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
    // 'close': after the exit and the last of both streams ('exit' may come before them).
    child.once('close', (status) => resolve({ status, stdout, stderr }));
  });
}

export async function updateConfig(
  admin: KubeConfig,
  namespace: string,
  data: Record<string, string>,
): Promise<string> {
  const updated = await admin.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({
    name: 'web-config',
    namespace,
    body: { metadata: { name: 'web-config' }, data },
  });
  return updated.metadata?.resourceVersion ?? '';
}

/** Pauses the `web` Deployment (`kubectl rollout pause`), or resumes it. */
export async function pauseWeb(admin: KubeConfig, namespace: string, paused: boolean): Promise<void> {
  await admin.makeApiClient(AppsV1Api).patchNamespacedDeployment({
    name: 'web',
    namespace,
    body: [{ op: 'add', path: '/spec/paused', value: paused }],
  });
}

export async function templateAnnotations(
  admin: KubeConfig,
  namespace: string,
): Promise<Record<string, string>> {
  const d = await admin.makeApiClient(AppsV1Api).readNamespacedDeployment({ name: 'web', namespace });
  return d.spec?.template.metadata?.annotations ?? {};
}

export interface LogLine {
  readonly level: string;
  readonly msg: string;
  readonly [field: string]: unknown;
}

/**
 * An agent's decision on a drift every replica saw: it restarted the workload, found that a
 * sibling had (deduped), or found its own Pod already being deleted by that restart's rollout
 * (PodTerminating).
 */
export function isHealDecision(line: LogLine): boolean {
  return line.msg === 'restarted workload' || line.decision === 'deduped' || line.alert === 'PodTerminating';
}

/** An agent process in one Pod: its JSON log lines, its metrics, and a clean stop. */
export class AgentProcess {
  readonly lines: LogLine[] = [];
  readonly raw: string[] = [];
  private readonly child: ChildProcess;
  private readonly exited: Promise<number | null>;

  private constructor(child: ChildProcess) {
    this.child = child;
    const reader = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    reader.on('line', (line) => {
      this.raw.push(line);
      try {
        this.lines.push(JSON.parse(line) as LogLine);
      } catch {
        this.lines.push({ level: 'raw', msg: line });
      }
    });
    child.stderr?.on('data', (c: Buffer) => this.raw.push(`stderr: ${c.toString()}`));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /** `as` runs the agent as another user, as the image does (UID 65532); the test must be root. */
  static start(pod: AppPod, args: string[] = [], as?: { uid: number; gid: number }): AgentProcess {
    const child = spawn(
      process.execPath,
      [bin, 'agent', '--listen', '127.0.0.1:0', '--poll', '200ms', ...args],
      {
        env: pod.env,
        stdio: ['ignore', 'pipe', 'pipe'],
        ...as,
      },
    );
    return new AgentProcess(child);
  }

  /** Another long-running command of the CLI (`node`), with `env` as its whole environment. */
  static startCommand(command: string, env: Record<string, string>, args: string[] = []): AgentProcess {
    const child = spawn(
      process.execPath,
      [bin, command, '--listen', '127.0.0.1:0', '--poll', '200ms', ...args],
      {
        env,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    return new AgentProcess(child);
  }

  async waitFor(predicate: (line: LogLine) => boolean, what: string, timeoutMs = 30_000): Promise<LogLine> {
    try {
      return await waitFor(() => this.lines.find(predicate), { what, timeoutMs, intervalMs: 50 });
    } catch (error) {
      // The log as it is now, at the timeout, is what explains it.
      throw new Error(
        `${(error as Error).message}; the agent's last lines:\n${this.raw.slice(-15).join('\n')}`,
      );
    }
  }

  async metrics(): Promise<string> {
    const listening = await this.waitFor((l) => l.msg === 'listening', 'the agent to listen');
    const res = await fetch(`http://${listening.address as string}/metrics`);
    return res.text();
  }

  /** SIGTERM, and the exit code. */
  async stop(): Promise<number | null> {
    this.child.kill('SIGTERM');
    return this.exited;
  }

  kill(): void {
    this.child.kill('SIGKILL');
  }

  /** Everything the agent wrote, for leak checks. */
  output(): string {
    return this.raw.join('\n');
  }
}

/** The value of one sample in Prometheus text format, or undefined. */
export function sample(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  for (const line of text.split('\n')) {
    if (!line.startsWith(name)) continue;
    const m = line.match(/^([a-zA-Z_:][\w:]*)(\{[^}]*\})?\s+(\S+)$/);
    if (!m || m[1] !== name) continue;
    const got = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="([^"]*)"/g)].map((x) => [x[1], x[2]]));
    if (Object.entries(labels).every(([k, v]) => got[k] === v)) return Number(m[3]);
  }
  return undefined;
}
