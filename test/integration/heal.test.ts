// check and heal as an operator runs them (the built CLI, in the agent's identity with exactly
// the shipped Role), against the real API and kubelet-style mounts.
import { AppsV1Api, CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';
import {
  type AppPod,
  cli,
  createApp,
  pauseWeb,
  templateAnnotations,
  updateConfig,
  writeMount,
} from './support-app.ts';

const ns = useNamespace('heal');
let pods: AppPod[];

beforeAll(async () => {
  pods = await createApp(ns.admin, ns.name, 2);
});

const pod = (i: number) => pods[i] as AppPod;

describe('check and heal', () => {
  it('in sync: check exits 0 with one line, heal --dry-run plans nothing', async () => {
    const check = await cli(['check'], pod(0).env);
    expect(check.stderr).toBe('');
    expect(check.stdout).toBe('in sync: 1 target matches the API\n');
    expect(check.status).toBe(0);
    const dry = await cli(['heal', '--dry-run'], pod(0).env);
    expect(dry.status).toBe(0);
    expect(dry.stdout.split('\n')[0]).toBe('plan: nothing to do');
  });

  it('a watched directory that is not there: exit 2 (configuration), naming it, not 3 (the API)', async () => {
    const { POD_NAME: _, ...noPod } = pod(0).env;
    const check = await cli(['check', '--watch', '/etc/nowhere=configmap/web-config'], noPod);
    expect(check.stderr).toBe('');
    expect(check.stdout).toMatch(/^unknown: .*\/etc\/nowhere does not exist/);
    expect(check.status).toBe(2);
  });

  it('a namespace that does not exist: named as such (exit 2), not every ConfigMap "gone from the API"', async () => {
    // As an operator whose identity may read namespaces (the admin kubeconfig).
    const admin = { HOME: pod(0).env.HOME ?? '/nonexistent', PATH: process.env.PATH ?? '' };
    const kubeconfig = controlPlane().adminKubeconfig;
    const mount = `${pod(0).mountRoot}/etc/app`;
    const check = await cli(
      ['check', '--kubeconfig', kubeconfig, '-n', 'no-such-ns', '--watch', `${mount}=configmap/web-config`],
      admin,
    );
    expect(check.stdout).toBe('');
    expect(check.stderr).toContain(
      `error CS_CONFIG_NAMESPACE_ABSENT: namespace "no-such-ns" (from --namespace) does not exist on ${controlPlane().server}`,
    );
    expect(check.stderr).toContain('kubectl get namespaces');
    expect(check.status).toBe(2);
    const dry = await cli(
      ['heal', '--dry-run', '--kubeconfig', kubeconfig, '-n', 'no-such-ns', '--pod', pod(0).name],
      admin,
    );
    expect(dry.stderr).toContain(
      'error CS_CONFIG_NAMESPACE_ABSENT: namespace "no-such-ns" (from --namespace)',
    );
    expect(dry.status).toBe(2);
    // The namespace there, the ConfigMap not: gone from the API, as before.
    const gone = await cli(
      ['check', '--kubeconfig', kubeconfig, '-n', ns.name, '--watch', `${mount}=configmap/no-such-config`],
      admin,
    );
    expect(gone.stdout).toContain('ConfigMap/no-such-config is gone from the API');
    expect(gone.status).toBe(1);
  });

  it('an API change inside grace is propagating, not drift', async () => {
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const check = await cli(['check', '--grace', '10m'], pod(0).env);
    expect(check.status).toBe(0);
    expect(check.stdout).toMatch(
      /^propagating: app:\/etc\/app Propagating: differs from the API for \d+s, within the 600s window: app\.yaml content/,
    );
  });

  it('heal --dry-run past grace: exit 1, the plan and why, and the Deployment untouched', async () => {
    const before = await ns.admin
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: 'web', namespace: ns.name });
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], pod(0).env);
    expect(dry.stderr).toBe('');
    expect(dry.status).toBe(1);
    const lines = dry.stdout.split('\n');
    expect(lines[0]).toBe('plan: restart Deployment web');
    expect(dry.stdout).toMatch(
      /app:\/etc\/app: ContentDrift: files still differ \d+s after the change, past the 0s grace: app\.yaml content \(want [0-9a-f]{12}, have [0-9a-f]{12}\)/,
    );
    expect(dry.stdout).toContain('restart Deployment web with config ');
    expect(dry.stdout).toContain(
      `if its restart annotations are still as read at resourceVersion ${before.metadata?.resourceVersion}`,
    );
    const json = JSON.parse(
      (await cli(['heal', '--dry-run', '--grace', '0s', '-o', 'json'], pod(0).env)).stdout,
    ) as {
      decision: string;
      workload: { name: string };
    };
    expect(json).toMatchObject({ decision: 'restart', workload: { name: 'web' } });
    const after = await ns.admin
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: 'web', namespace: ns.name });
    expect(after.metadata?.resourceVersion).toBe(before.metadata?.resourceVersion);
  });

  it('check past grace: one line, exit 1', async () => {
    const check = await cli(['check', '--grace', '0s'], pod(1).env);
    expect(check.status).toBe(1);
    expect(check.stdout).toMatch(/^drift: app:\/etc\/app ContentDrift: /);
    expect(check.stdout.trim().split('\n')).toHaveLength(1);
  });

  it('five heal processes at once for the replicas: exactly one restart, the rest deduped', async () => {
    const runs = await Promise.all([0, 1, 0, 1, 0].map((i) => cli(['heal', '--grace', '0s'], pod(i).env)));
    for (const r of runs) expect(r.status, r.stderr).toBe(0);
    const restarted = runs.filter((r) => r.stdout.includes('restarted Deployment web'));
    const deduped = runs.filter((r) =>
      r.stdout.startsWith('plan: nothing to do, Deployment web was already restarted'),
    );
    expect(restarted).toHaveLength(1);
    expect(deduped).toHaveLength(4);
    // A restart by hand is recorded like the agent's: a Healed Event on the Pod it ran for, and
    // the deduped runs a Deduped Event each.
    const events = (await ns.admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns.name }))
      .items;
    const healed = events.filter((e) => e.reason === 'Healed');
    expect(healed).toHaveLength(1);
    expect(healed[0]?.message).toMatch(
      /^restarted Deployment web for config [0-9a-f]{16}: .*\(by config-sync heal\)$/,
    );
    expect(events.filter((e) => e.reason === 'Deduped')).toHaveLength(4);

    const annotations = await templateAnnotations(ns.admin, ns.name);
    expect(annotations['config-sync.io/config-hash']).toMatch(/^[0-9a-f]{16}$/);
    expect(Date.parse(annotations['kubectl.kubernetes.io/restartedAt'] ?? '')).toBeGreaterThan(
      Date.now() - 60_000,
    );

    // The controller-manager rolls the Deployment: a second ReplicaSet appears.
    await waitFor(
      async () => {
        const list = await ns.admin
          .makeApiClient(AppsV1Api)
          .listNamespacedReplicaSet({ namespace: ns.name, labelSelector: 'app=web' });
        return list.items.length >= 2 || undefined;
      },
      { what: 'a new ReplicaSet for the restarted Deployment' },
    );
  });

  it('heal again on an old pod: deduped, no second restart', async () => {
    const before = await templateAnnotations(ns.admin, ns.name);
    const again = await cli(['heal', '--grace', '0s'], pod(0).env);
    expect(again.status).toBe(0);
    expect(again.stdout).toMatch(/^plan: nothing to do, Deployment web was already restarted/);
    expect(await templateAnnotations(ns.admin, ns.name)).toEqual(before);
  });

  it('once the files catch up, check is back in sync', async () => {
    writeMount(pod(1).mountRoot, { 'app.yaml': 'level: debug\n' });
    const check = await cli(['check', '--grace', '0s'], pod(1).env);
    expect(check.stdout).toBe('in sync: 1 target matches the API\n');
    expect(check.status).toBe(0);
  });
});

describe('heal on a paused Deployment', () => {
  const paused = useNamespace('heal-paused');

  it('records the restart, says it waits for the resume (exit 1: nothing is healed yet), and does not record it twice', async () => {
    const [p] = (await createApp(paused.admin, paused.name, 1)) as [AppPod];
    await pauseWeb(paused.admin, paused.name, true);
    await updateConfig(paused.admin, paused.name, { 'app.yaml': 'level: debug\n' });
    const before = await templateAnnotations(paused.admin, paused.name);
    const run = await cli(['heal', '--grace', '0s'], p.env);
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(
      /recorded the restart of Deployment web with config [0-9a-f]{16}; Deployment web is paused: a restart rolls out only when it is resumed \(kubectl rollout resume deployment\/web\)\n$/,
    );
    const recorded = await templateAnnotations(paused.admin, paused.name);
    expect(recorded).not.toEqual(before);
    const events = (
      await paused.admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: paused.name })
    ).items;
    expect(events.map((e) => e.reason)).not.toContain('Healed');
    expect(events.find((e) => e.reason === 'WorkloadPaused')?.message).toMatch(
      /^recorded the restart of Deployment web for config [0-9a-f]{16}: Deployment web is paused: .*\(by config-sync heal\)$/,
    );

    const again = await cli(['heal', '--grace', '0s'], p.env);
    expect(again.status).toBe(1);
    expect(again.stdout).toMatch(/^plan: alert \(WorkloadPaused\), no restart/);
    expect(await templateAnnotations(paused.admin, paused.name)).toEqual(recorded);
  });
});
