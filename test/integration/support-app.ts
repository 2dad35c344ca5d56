// The test/cluster/app.ts helpers bound to this test run's control plane, and the CLI runner that
// checks every output for the Secret value.
import { spawnSync } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, type KubeConfig, type V1Deployment, type V1StatefulSet } from '@kubernetes/client-node';
import { expect } from 'vitest';
import * as app from '../cluster/app.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane } from './support.ts';

export {
  AgentProcess,
  type AppPod,
  bin,
  type CliRun,
  isHealDecision,
  type LogLine,
  pauseWeb,
  root,
  SECRET_VALUE,
  sample,
  templateAnnotations,
  updateConfig,
  webDeployment,
  webStatefulSet,
  writeMount,
} from '../cluster/app.ts';

export const applyRbac = (namespace: string) => app.applyRbac(controlPlane(), namespace);

/**
 * The web Deployment, its rollouts keeping every old Pod until a new one is ready (maxUnavailable
 * 0), which without a kubelet here is never. For the tests whose agents may decide after a
 * sibling's restart began its rollout (each calls a drift at an offset of its own, within a
 * second): here an unscheduled Pod the rollout removes is deleted at once, and its bound token
 * with it, so its agent could ask the API nothing more; a real Pod lives on, Terminating, until
 * its containers have stopped.
 */
export const webKeepingOldPods = (replicas: number) =>
  app.webDeployment(replicas, {
    strategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 0, maxSurge: 1 } },
  });

export const createApp = (
  admin: KubeConfig,
  namespace: string,
  replicas: number,
  workload?: V1Deployment | V1StatefulSet,
  data?: Record<string, string>,
) => app.createApp(controlPlane(), admin, namespace, replicas, workload, data);

export const prepareAgentPod = (
  admin: KubeConfig,
  namespace: string,
  name: string,
  data: Record<string, string>,
) => app.prepareAgentPod(controlPlane(), admin, namespace, name, data);

/** Runs the built CLI as a separate process; asserts the Secret value is in none of its output. */
export async function cli(args: string[], env: Record<string, string>): Promise<app.CliRun> {
  const run = await app.runCli(args, env);
  expect(`${run.stdout}${run.stderr}`).not.toContain(app.SECRET_VALUE);
  return run;
}

/**
 * After one drift seen by every agent of a workload: waits for each agent's heal decision and
 * checks that exactly one restarted, by its log and by config_sync_heal_total summed over all.
 * The others find the restart done (deduped), or, when they decide late, their own Pod already
 * being deleted by that restart's rollout (PodTerminating). Returns the restarting agent's log
 * line.
 */
export async function expectOneRestart(
  agents: readonly app.AgentProcess[],
  timeoutMs = 30_000,
): Promise<app.LogLine> {
  await Promise.all(agents.map((a) => a.waitFor(app.isHealDecision, 'a heal decision', timeoutMs)));
  const restarts = agents.filter((a) => a.lines.some((l) => l.msg === 'restarted workload'));
  expect(restarts).toHaveLength(1);
  const heals = await Promise.all(
    agents.map(
      async (a) =>
        app.sample(await a.metrics(), 'config_sync_heal_total', { action: 'restart', result: 'ok' }) ?? 0,
    ),
  );
  expect(heals.reduce((x, y) => x + y, 0)).toBe(1);
  return (restarts[0] as app.AgentProcess).lines.find((l) => l.msg === 'restarted workload') as app.LogLine;
}

/** The name and uid of the first Pod labelled app=<label> in `namespace`, once there is one. */
export function firstPod(
  admin: KubeConfig,
  namespace: string,
  label: string,
): Promise<{ name: string; uid: string }> {
  const core = admin.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const p = (await core.listNamespacedPod({ namespace, labelSelector: `app=${label}` })).items[0];
      return p?.metadata?.name && p.metadata.uid ? { name: p.metadata.name, uid: p.metadata.uid } : undefined;
    },
    { what: `a pod of ${label}` },
  );
}

/** Sets the app container's running startedAt, as kubelet reports it. */
export function appStartedAt(namespace: string, pod: string, at: Date): void {
  const cp = controlPlane();
  const status = {
    status: {
      containerStatuses: [
        {
          name: 'app',
          image: 'config-sync.invalid/app:never-pulled',
          imageID: '',
          ready: true,
          restartCount: 0,
          state: { running: { startedAt: at.toISOString().replace(/\.\d+Z$/, 'Z') } },
        },
      ],
    },
  };
  const res = spawnSync(
    cp.kubectl,
    [
      '--kubeconfig',
      cp.adminKubeconfig,
      '-n',
      namespace,
      'patch',
      'pod',
      pod,
      '--subresource=status',
      '--type=merge',
      '-p',
      JSON.stringify(status),
    ],
    { encoding: 'utf8' },
  );
  if (res.status !== 0) throw new Error(`kubectl patch pod status: ${res.stderr}`);
}

/**
 * A one-replica Deployment `name` whose Pods run as `serviceAccountName` and mount web-config and
 * web-secrets: an app of the namespace, and another beside it, for the RBAC and admission tests.
 */
export function oneReplicaApp(name: string, serviceAccountName: string): V1Deployment {
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

/** An app's reload endpoint on 127.0.0.1: answers 200 and records when each POST came. */
export async function reloadEndpoint(): Promise<{ url: string; posts: number[]; close(): Promise<void> }> {
  const posts: number[] = [];
  const server = http.createServer((req, res) => {
    posts.push(Date.now());
    req.resume();
    res.writeHead(200).end();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/-/reload`,
    posts,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
