// The agent end to end, as separate processes against the real API, with exactly the shipped
// Role and kubelet-style mounts: the scenarios, each in a namespace of its own.
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import {
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  RbacAuthorizationV1Api,
  type V1Container,
  type V1Deployment,
  type V1PodSpec,
  type V1StatefulSet,
} from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { grantRole } from '../cluster/identities.ts';
import { writeSubPathFile } from '../cluster/kubelet-volume.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  cli,
  createApp,
  expectOneRestart,
  isHealDecision,
  pauseWeb,
  prepareAgentPod,
  root,
  SECRET_VALUE,
  sample,
  templateAnnotations,
  updateConfig,
  webDeployment,
  webKeepingOldPods,
  webStatefulSet,
  writeMount,
} from './support-app.ts';
import { apiServerProxy, CLUSTER_NAME, clusterNameGuardModule } from './support-proxy.ts';

const running: AgentProcess[] = [];
function agent(pod: AppPod, args: string[] = []): AgentProcess {
  const a = AgentProcess.start(pod, args);
  running.push(a);
  return a;
}
afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

async function podCondition(admin: KubeConfig, namespace: string, name: string) {
  const pod = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name, namespace });
  return {
    condition: pod.status?.conditions?.find((c) => c.type === 'config-sync.io/InSync'),
    annotations: pod.metadata?.annotations ?? {},
  };
}

async function events(admin: KubeConfig, namespace: string, pod: string) {
  const list = await admin
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
  return list.items;
}

async function replicaSets(admin: KubeConfig, namespace: string): Promise<number> {
  return (
    await admin.makeApiClient(AppsV1Api).listNamespacedReplicaSet({ namespace, labelSelector: 'app=web' })
  ).items.length;
}

describe('in sync, then a normal propagation', () => {
  const ns = useNamespace('agent-sync');

  it('reports InSync, measures propagation, never restarts, and stops cleanly on SIGTERM', async () => {
    const [pod] = await createApp(ns.admin, ns.name, 1);
    const a = agent(pod as AppPod, ['--grace', '30s']);
    await a.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');

    await waitFor(
      async () =>
        (await podCondition(ns.admin, ns.name, (pod as AppPod).name)).condition?.status === 'True' ||
        undefined,
      {
        what: 'the InSync condition True',
      },
    );
    const { annotations } = await podCondition(ns.admin, ns.name, (pod as AppPod).name);
    expect(Date.parse(annotations['config-sync.io/last-config-sync'] ?? '')).toBeGreaterThan(
      Date.now() - 60_000,
    );
    expect(annotations['config-sync.io/matched-versions']).toMatch(/^ConfigMap\/web-config@\d+$/);
    let metrics = await a.metrics();
    expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
    expect(sample(metrics, 'config_hash_mismatch_total', { name: 'web-config' })).toBeUndefined();
    expect(
      sample(metrics, 'config_sync_checks_total', {
        namespace: ns.name,
        kind: 'ConfigMap',
        name: 'web-config',
      }),
    ).toBeGreaterThan(0);

    const patchesBefore = sample(metrics, 'config_sync_api_requests_total', { verb: 'patch' }) ?? 0;

    // The API changes; kubelet takes a moment, then swaps the files.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
    writeMount((pod as AppPod).mountRoot, { 'app.yaml': 'level: debug\n' });
    const propagated = await a.waitFor((l) => l.msg === 'propagated', 'the propagation time');
    expect(propagated.propagationSeconds).toBeGreaterThan(0);
    expect(propagated.propagationSeconds).toBeLessThan(30);
    // One status write for the whole change: the InSync condition with the new match's
    // annotations in one patch (pods/status). Propagating within grace is not written.
    const version = (
      await ns.admin
        .makeApiClient(CoreV1Api)
        .readNamespacedConfigMap({ name: 'web-config', namespace: ns.name })
    ).metadata?.resourceVersion;
    const after = await waitFor(
      async () => {
        const now = await podCondition(ns.admin, ns.name, (pod as AppPod).name);
        return now.annotations['config-sync.io/matched-versions'] === `ConfigMap/web-config@${version}`
          ? now
          : undefined;
      },
      { what: 'the new match recorded on the Pod' },
    );
    expect(after.condition?.reason).toBe('InSync');
    metrics = await a.metrics();
    expect(sample(metrics, 'config_sync_api_requests_total', { verb: 'patch' })).toBe(patchesBefore + 1);
    expect(sample(metrics, 'config_sync_propagation_seconds_count')).toBe(1);
    expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
    expect(await templateAnnotations(ns.admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);

    expect(await a.stop()).toBe(0);
    expect(a.lines.at(-1)?.msg).toBe('stopped');
  });
});

describe('a key removed', () => {
  const ns = useNamespace('agent-key-removed');

  it('is Propagating while its link stays on disk, InSync once kubelet removes it', async () => {
    // The agent keeps a volume's listing between the file watch's events for its entries: the
    // link of a key the API no longer has must count as long as it is there, and its removal,
    // which kubelet makes after the `..data` swap, must be seen.
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const both = { 'app.yaml': 'level: info\n', 'extra.yaml': 'x: 1\n' };
    await updateConfig(ns.admin, ns.name, both);
    writeMount(pod.mountRoot, both);
    const a = agent(pod, ['--grace', '30s']);
    await a.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');

    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: info\n' });
    const propagating = await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
    expect(JSON.stringify(propagating.mismatches)).toContain('extra.yaml');
    const seen = a.lines.length;
    writeMount(pod.mountRoot, { 'app.yaml': 'level: info\n' });
    await a.waitFor(
      (l) => l.state === 'InSync' && a.lines.indexOf(l) >= seen,
      'InSync once the link is gone',
    );
    expect(fs.existsSync(path.join(pod.mountRoot, 'etc/app/extra.yaml'))).toBe(false);
  });
});

describe('drift past grace', () => {
  const ns = useNamespace('agent-drift');

  it('one restart, an Event, the counter up, a new ReplicaSet; then a new pod that still drifts opens the circuit', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const a = agent(pod, ['--grace', '2s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.state === 'Drifted' && l.reason === 'ContentDrift', 'Drifted');
    const restarted = await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
    expect(restarted.workload).toMatchObject({ kind: 'Deployment', name: 'web' });

    const annotations = await templateAnnotations(ns.admin, ns.name);
    expect(annotations['config-sync.io/config-hash']).toBe(restarted.configHash);
    const reasons = (await events(ns.admin, ns.name, pod.name)).map((e) => e.reason);
    expect(reasons).toEqual(expect.arrayContaining(['Drifted', 'Healed']));
    const metrics = await a.metrics();
    expect(
      sample(metrics, 'config_hash_mismatch_total', {
        namespace: ns.name,
        kind: 'ConfigMap',
        name: 'web-config',
      }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(metrics, 'config_sync_heal_total', { action: 'restart', result: 'ok' })).toBe(1);
    expect(sample(metrics, 'config_sync_in_sync')).toBe(0);
    await waitFor(async () => (await replicaSets(ns.admin, ns.name)) >= 2 || undefined, {
      what: 'a new ReplicaSet',
    });
    await waitFor(
      async () =>
        (await podCondition(ns.admin, ns.name, pod.name)).condition?.status === 'False' || undefined,
      {
        what: 'the InSync condition False',
      },
    );

    // A pod of the new ReplicaSet carries the new config hash; its files are stale too (kubelet
    // is broken, say): a restart did not heal, so no second one.
    const fresh = await waitFor(
      async () => {
        const pods = await ns.admin
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
        return pods.items.find(
          (p) => p.metadata?.annotations?.['config-sync.io/config-hash'] === restarted.configHash,
        );
      },
      { what: 'a pod created by the restart' },
    );
    const newPod = await prepareAgentPod(ns.admin, ns.name, fresh.metadata?.name ?? '', {
      'app.yaml': 'level: info\n',
    });
    const b = agent(newPod, ['--grace', '2s']);
    await b.waitFor((l) => l.alert === 'CircuitOpen', 'CircuitOpen');
    expect((await events(ns.admin, ns.name, newPod.name)).map((e) => e.reason)).toContain('CircuitOpen');
    expect(await templateAnnotations(ns.admin, ns.name)).toEqual(annotations);
  });
});

describe('five replicas drift together', () => {
  const ns = useNamespace('agent-five');

  it('exactly one restart among five agents, the other four deduped or already being replaced', async () => {
    const pods = await createApp(ns.admin, ns.name, 5, webKeepingOldPods(5));
    const agents = pods.map((p) => agent(p, ['--grace', '1s']));
    await Promise.all(agents.map((a) => a.waitFor((l) => l.state === 'InSync', 'InSync')));
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const restart = await expectOneRestart(agents);
    // The other four found the restart done (deduped), or decided after its rollout had begun
    // deleting their own Pod (PodTerminating). Each said one or the other, for the same config.
    const others = agents.filter((a) => !a.lines.some((l) => l.msg === 'restarted workload'));
    expect(others).toHaveLength(4);
    for (const a of others) {
      const decision = a.lines.find(isHealDecision);
      expect(decision, a.raw.slice(-10).join('\n')).toBeDefined();
      if (decision?.decision === 'deduped') expect(decision.configHash).toBe(restart.configHash);
    }
  });
});

describe('a restart whose rollout stalls', () => {
  const ns = useNamespace('agent-stalled');

  it("is not repeated, and a sibling's plan says the rollout stalled rather than that new pods are coming", async () => {
    // Without a kubelet no Pod becomes available: the Deployment controller gives up on each
    // rollout after progressDeadlineSeconds.
    const [first, second] = (await createApp(
      ns.admin,
      ns.name,
      2,
      webDeployment(2, { progressDeadlineSeconds: 2 }),
    )) as [AppPod, AppPod];
    const a = agent(first, ['--grace', '1s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
    const restartedAt = Date.now();
    await waitFor(
      async () => {
        const d = await ns.admin
          .makeApiClient(AppsV1Api)
          .readNamespacedDeployment({ name: 'web', namespace: ns.name });
        const p = d.status?.conditions?.find((c) => c.type === 'Progressing');
        return p?.reason === 'ProgressDeadlineExceeded' &&
          new Date(p.lastUpdateTime ?? 0).getTime() >= restartedAt - 1000
          ? p
          : undefined;
      },
      { what: "the restart's rollout to stall", timeoutMs: 20_000 },
    );
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], second.env);
    expect(dry.stdout).toContain('plan: nothing to do, Deployment web was already restarted for this config');
    expect(dry.stdout).toMatch(
      /Deployment web was already restarted for config \S+ \(by a sibling\); but its rollout has stalled \(ProgressDeadlineExceeded: ReplicaSet "web-\w+" has timed out progressing\.\): new pods are not becoming available \(kubectl rollout status deployment\/web\)/,
    );
    expect(a.lines.filter((l) => l.msg === 'restarted workload')).toHaveLength(1);
  });
});

describe('sources that disappear or cannot change', () => {
  const ns = useNamespace('agent-gone');

  it('a deleted ConfigMap: an alert Event, no restart', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const a = agent(pod, ['--grace', '1s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await ns.admin
      .makeApiClient(CoreV1Api)
      .deleteNamespacedConfigMap({ name: 'web-config', namespace: ns.name });
    await a.waitFor((l) => l.reason === 'SourceMissing', 'SourceMissing');
    await a.waitFor((l) => l.alert === 'SourceMissing', 'the alert');
    await waitFor(
      async () =>
        (await events(ns.admin, ns.name, pod.name)).find(
          (e) => e.reason === 'SourceMissing' && e.type === 'Warning',
        ),
      {
        what: 'a SourceMissing Warning Event',
      },
    );
    expect(await templateAnnotations(ns.admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);
    expect(a.lines.some((l) => l.msg === 'restarted workload')).toBe(false);
  });

  it('an immutable ConfigMap recreated with new data (kubelet never reloads it): restart after the debounce', async () => {
    const core = ns.admin.makeApiClient(CoreV1Api);
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'web-config' }, immutable: true, data: { 'app.yaml': 'level: info\n' } },
    });
    const pods = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
    const pod = await prepareAgentPod(ns.admin, ns.name, pods.items[0]?.metadata?.name ?? '', {
      'app.yaml': 'level: info\n',
    });
    const a = agent(pod, ['--grace', '10m', '--debounce', '1s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await core.deleteNamespacedConfigMap({ name: 'web-config', namespace: ns.name });
    await core.createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'web-config' }, immutable: true, data: { 'app.yaml': 'level: debug\n' } },
    });
    await a.waitFor((l) => l.reason === 'ImmutableStale', 'ImmutableStale, despite the 10m grace');
    await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
  });
});

/**
 * web's app container with app.yaml as a subPath file, which kubelet copies at the container's
 * start and never again; `more` adds to the template before the app is created.
 */
async function subPathApp(
  ns: { admin: KubeConfig; name: string },
  more: (spec: V1PodSpec, app: V1Container) => void = () => {},
  workload: V1Deployment | V1StatefulSet = webDeployment(1),
): Promise<AppPod> {
  const spec = workload.spec?.template.spec;
  const app = spec?.containers[0];
  if (!spec || !app) throw new Error('workload template without a container');
  app.volumeMounts = [{ name: 'config', mountPath: '/etc/app.yaml', subPath: 'app.yaml' }];
  more(spec, app);
  const [pod] = (await createApp(ns.admin, ns.name, 1, workload)) as [AppPod];
  writeSubPathFile(`${pod.mountRoot}/etc/app.yaml`, { data: Buffer.from('level: info\n'), mode: 0o644 });
  return pod;
}

describe('targets kubelet never updates', () => {
  const ns = useNamespace('agent-never');

  it('a subPath file and a Secret in env: drift after the debounce, one restart; the Secret value leaks nowhere', async () => {
    const pod = await subPathApp(ns, (spec, app) => {
      spec.volumes?.push({ name: 'secrets', secret: { secretName: 'web-secrets' } });
      app.env = [
        { name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'web-secrets', key: 'password' } } },
      ];
    });

    const a = agent(pod, ['--grace', '10m', '--debounce', '1s']);
    await a.waitFor((l) => l.msg === 'recorded start baselines', 'the env baseline');
    await waitFor(() => (a.lines.filter((l) => l.state === 'InSync').length >= 2 ? true : undefined), {
      what: 'both targets InSync',
    });

    await ns.admin.makeApiClient(CoreV1Api).replaceNamespacedSecret({
      name: 'web-secrets',
      namespace: ns.name,
      body: { metadata: { name: 'web-secrets' }, stringData: { password: `${SECRET_VALUE}-rotated` } },
    });
    await a.waitFor((l) => l.reason === 'EnvStale', 'EnvStale');
    await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
    // The CLI on the same drift: it reports it, and (cli() asserts) prints no value.
    const check = await cli(['check', '--debounce', '1s'], pod.env);
    expect(check.stdout).toMatch(/^drift: app:env:Secret\/web-secrets EnvStale: /);
    const dry = await cli(['heal', '--dry-run', '--debounce', '1s', '-o', 'json'], pod.env);
    expect(JSON.parse(dry.stdout).verdicts).toContainEqual(expect.objectContaining({ reason: 'EnvStale' }));
    expect(`${check.stdout}${dry.stdout}`).not.toContain(
      Buffer.from(`${SECRET_VALUE}-rotated`).toString('base64'),
    );

    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.reason === 'SubPathStale', 'SubPathStale, despite the 10m grace');

    // Nothing the agent logs, exports or emits carries the value.
    const everything = [
      a.output(),
      await a.metrics(),
      JSON.stringify(await events(ns.admin, ns.name, pod.name)),
    ].join('\n');
    expect(everything).not.toContain(SECRET_VALUE);
    expect(everything).not.toContain(Buffer.from(SECRET_VALUE).toString('base64'));

    // Nor a plain digest of it, which anyone could recompute for a guessed value: the
    // start-baselines annotation and every fingerprint in the logs are keyed with the Pod's key.
    const plain = [SECRET_VALUE, `${SECRET_VALUE}-rotated`].flatMap((value) => {
      const sha = createHash('sha256').update(value).digest('hex');
      return [sha.slice(0, 12), createHash('sha256').update(`password=${sha}`).digest('hex').slice(0, 16)];
    });
    const { annotations } = await podCondition(ns.admin, ns.name, pod.name);
    const recorded = JSON.parse(annotations['config-sync.io/start-baselines'] ?? '{}');
    expect(recorded).toEqual({ kid: expect.stringMatching(/^[0-9a-f]{8}$/), baselines: expect.any(Object) });
    // No kubelet reports the app's start here: the env baseline only, untied to a start.
    expect(Object.values(recorded.baselines)).toEqual([{ fp: expect.stringMatching(/^[0-9a-f]{12}$/) }]);
    for (const digest of plain) {
      expect(`${everything}\n${JSON.stringify(annotations)}\n${check.stdout}${dry.stdout}`).not.toContain(
        digest,
      );
    }
  });
});

describe('a paused Deployment', () => {
  const ns = useNamespace('agent-paused');

  it('gets its restart recorded, told as waiting for the resume, never as healed; the resume brings one rollout', async () => {
    const pod = await subPathApp(ns);
    const pause = (paused: boolean) => pauseWeb(ns.admin, ns.name, paused);
    await pause(true);
    const a = agent(pod, ['--debounce', '1s', '--resync', '2s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    const before = await templateAnnotations(ns.admin, ns.name);
    expect(await replicaSets(ns.admin, ns.name)).toBe(1);

    // A change the subPath file never gets: drift, which only a restart heals, and a paused
    // Deployment rolls out nothing until it is resumed.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.msg === 'restart recorded on a paused workload', 'the recorded restart');
    const waiting =
      'Deployment web is paused: a restart rolls out only when it is resumed (kubectl rollout resume deployment/web)';
    const event = await waitFor(
      async () => (await events(ns.admin, ns.name, pod.name)).find((e) => e.reason === 'WorkloadPaused'),
      { what: 'the WorkloadPaused Event' },
    );
    expect(event).toMatchObject({ type: 'Warning' });
    expect(event.message).toContain(waiting);
    expect((await events(ns.admin, ns.name, pod.name)).map((e) => e.reason)).not.toContain('Healed');
    const recorded = await templateAnnotations(ns.admin, ns.name);
    expect(recorded).not.toEqual(before);
    // Nothing rolled out: the restart waits in the template.
    expect(await replicaSets(ns.admin, ns.name)).toBe(1);
    const condition = await waitFor(
      async () => {
        const { condition: c } = await podCondition(ns.admin, ns.name, pod.name);
        return c?.status === 'False' && c.message?.includes('paused') ? c : undefined;
      },
      { what: 'the condition naming the pause' },
    );
    expect(condition.message).toMatch(/Deployment web (was restarted for config \S+, but it )?is paused/);
    const dry = await cli(['heal', '--dry-run', '--debounce', '1s'], pod.env);
    expect(dry.status).toBe(1);
    expect(dry.stdout).toContain('plan: alert (WorkloadPaused), no restart');
    expect(dry.stdout).toMatch(
      /Deployment web was restarted for config \S+, but it is paused: no new pods come until it is resumed \(kubectl rollout resume deployment\/web\)/,
    );
    // Three resyncs later: not restarted again.
    const checks = async () => sample(await a.metrics(), 'config_sync_checks_total') ?? 0;
    const checked = await checks();
    await waitFor(async () => ((await checks()) >= checked + 3 ? true : undefined), {
      what: 'three more passes',
    });
    expect(await templateAnnotations(ns.admin, ns.name)).toEqual(recorded);
    expect(sample(await a.metrics(), 'config_sync_heal_total', { action: 'restart', result: 'paused' })).toBe(
      1,
    );

    // Resumed: the Deployment controller rolls the recorded restart out, and the agent, whose
    // Pod that rollout replaces, does not restart it again.
    await pause(false);
    await waitFor(async () => ((await replicaSets(ns.admin, ns.name)) === 2 ? true : undefined), {
      what: 'the rollout the resume starts',
    });
    await a.waitFor((l) => l.decision === 'deduped', 'the agent finding the restart under way');
    expect(await templateAnnotations(ns.admin, ns.name)).toEqual(recorded);
    expect(a.lines.filter((l) => l.msg === 'restarted workload')).toEqual([]);
  });
});

/** The shipped Role names a Deployment: lets the agent read and restart a StatefulSet `web` too. */
async function grantStatefulSet(ns: { admin: KubeConfig; name: string }): Promise<void> {
  await grantRole(ns.admin, {
    namespace: ns.name,
    name: 'agent-statefulset',
    serviceAccount: { namespace: ns.name, name: 'config-sync-agent' },
    rules: [
      { apiGroups: ['apps'], resources: ['statefulsets'], verbs: ['get', 'patch'], resourceNames: ['web'] },
    ],
  });
}

describe('a StatefulSet staged by its rolling update partition', () => {
  const ns = useNamespace('agent-staged');

  it('is not restarted from a pod below the partition, which a restart would not replace; with the partition lowered, it is', async () => {
    await grantStatefulSet(ns);
    const staged = (partition: number) => ({ type: 'RollingUpdate', rollingUpdate: { partition } });
    // One replica, web-0, below a partition of 1.
    const pod = await subPathApp(ns, undefined, webStatefulSet(1, { updateStrategy: staged(1) }));
    expect(pod.name).toBe('web-0');
    const statefulSets = ns.admin.makeApiClient(AppsV1Api);
    const template = async () =>
      (await statefulSets.readNamespacedStatefulSet({ name: 'web', namespace: ns.name })).spec?.template
        .metadata?.annotations ?? {};
    const a = agent(pod, ['--debounce', '1s', '--resync', '2s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    const before = await template();

    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const held = await a.waitFor((l) => l.alert === 'UpdatePartitioned', 'UpdatePartitioned');
    expect(held.reasons).toContain(
      'not restarting: a restart of StatefulSet web would not replace this pod: only its pods of ordinal 1 and above are replaced (rolling update partition 1), and this pod is ordinal 0; lower the partition, or delete this pod for one with the current config',
    );
    await waitFor(
      async () => (await events(ns.admin, ns.name, pod.name)).find((e) => e.reason === 'UpdatePartitioned'),
      { what: 'the UpdatePartitioned Event' },
    );
    expect(await template()).toEqual(before);

    await statefulSets.patchNamespacedStatefulSet({
      name: 'web',
      namespace: ns.name,
      body: [{ op: 'replace', path: '/spec/updateStrategy/rollingUpdate/partition', value: 0 }],
    });
    await a.waitFor((l) => l.msg === 'restarted workload', 'the restart once the partition is lowered');
    expect(await template()).not.toEqual(before);
  });
});

describe('a StatefulSet updating on delete', () => {
  const ns = useNamespace('agent-ondelete');

  it('is not restarted, since a restart replaces no pod, and the drift says to delete the pod', async () => {
    await grantStatefulSet(ns);
    const pod = await subPathApp(ns, undefined, webStatefulSet(1, { updateStrategy: { type: 'OnDelete' } }));
    const a = agent(pod, ['--debounce', '1s', '--resync', '2s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const held = await a.waitFor((l) => l.alert === 'UpdateOnDelete', 'UpdateOnDelete');
    expect(held.reasons).toContain(
      'not restarting: StatefulSet web replaces a pod only when the pod is deleted (updateStrategy OnDelete), so a restart would replace none; delete this pod for one with the current config',
    );
    const sts = await ns.admin
      .makeApiClient(AppsV1Api)
      .readNamespacedStatefulSet({ name: 'web', namespace: ns.name });
    expect(sts.spec?.template.metadata?.annotations?.['config-sync.io/config-hash']).toBeUndefined();
    expect(a.lines.filter((l) => l.msg === 'restarted workload')).toEqual([]);
  });
});

/**
 * Takes `verb` on `resource` out of the agent's Role (a rule left with no verb goes), so that
 * the agent is refused (403) there; the function returned puts the Role back as it was.
 */
async function refuseVerb(
  admin: KubeConfig,
  namespace: string,
  resource: string,
  verb: string,
): Promise<() => Promise<void>> {
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const name = 'config-sync-agent';
  const role = await rbac.readNamespacedRole({ name, namespace });
  const rules = role.rules ?? [];
  const fewer = rules
    .map((r) => (r.resources?.includes(resource) ? { ...r, verbs: r.verbs.filter((v) => v !== verb) } : r))
    .filter((r) => r.verbs.length > 0);
  await rbac.replaceNamespacedRole({ name, namespace, body: { ...role, rules: fewer } });
  return async () => {
    const now = await rbac.readNamespacedRole({ name, namespace });
    await rbac.replaceNamespacedRole({ name, namespace, body: { ...now, rules } });
  };
}

describe('a restart the API refuses for a while', () => {
  const ns = useNamespace('agent-heal-retry');

  it('is tried again after a backoff, not at the next --resync: one HealFailed Event, then one restart', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const allowRestarts = await refuseVerb(ns.admin, ns.name, 'deployments', 'patch');
    // A resync far beyond the test's waits: only the retry can bring the restart.
    const a = agent(pod, ['--grace', '1s', '--resync', '1h']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const failed = await a.waitFor((l) => l.msg === 'the heal failed: trying again', 'the failed restart');
    expect(failed).toMatchObject({ failures: 1 });
    expect(failed.retryInSeconds).toBeGreaterThanOrEqual(4);
    expect(failed.retryInSeconds).toBeLessThanOrEqual(6);
    expect(a.lines.find((l) => l.level === 'error')).toMatchObject({ code: 'CS_API_FORBIDDEN' });
    await allowRestarts();

    const restarted = await a.waitFor(
      (l) => l.msg === 'restarted workload',
      'the restart after the backoff',
      60_000,
    );
    expect((await templateAnnotations(ns.admin, ns.name))['config-sync.io/config-hash']).toBe(
      restarted.configHash,
    );
    const reasons = (await events(ns.admin, ns.name, pod.name)).map((e) => e.reason);
    expect(reasons.filter((r) => r === 'HealFailed')).toHaveLength(1);
    expect(reasons).toContain('Healed');
    const metrics = await a.metrics();
    expect(
      sample(metrics, 'config_sync_heal_total', { action: 'restart', result: 'failed' }),
    ).toBeGreaterThanOrEqual(1);
    expect(sample(metrics, 'config_sync_heal_total', { action: 'restart', result: 'ok' })).toBe(1);
  });
});

describe('a status write the API refuses for a while', () => {
  const ns = useNamespace('agent-status-retry');

  it('is written again after a backoff, not at the next --resync', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const allowWrites = await refuseVerb(ns.admin, ns.name, 'pods/status', 'patch');
    // A resync far beyond the test's waits, and nothing else due: only the retry writes it.
    const a = agent(pod, ['--resync', '1h']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    const refused = await a.waitFor((l) => l.code === 'CS_API_FORBIDDEN', 'the refused status write');
    expect(refused.level).toBe('warn');
    expect(refused.retryInSeconds).toBeGreaterThanOrEqual(4);
    expect(refused.retryInSeconds).toBeLessThanOrEqual(6);
    expect((await podCondition(ns.admin, ns.name, pod.name)).condition).toBeUndefined();
    await allowWrites();

    const written = await waitFor(async () => (await podCondition(ns.admin, ns.name, pod.name)).condition, {
      what: 'the InSync condition, written after the backoff',
      timeoutMs: 45_000,
      intervalMs: 250,
    });
    expect(written).toMatchObject({ status: 'True', reason: 'InSync' });
  });
});

describe('Events the API refuses for a while', () => {
  const ns = useNamespace('agent-event-retry');

  it('are sent once it allows them, each once, with the time they happened: the restart is explained', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const allowEvents = await refuseVerb(ns.admin, ns.name, 'events', 'create');
    // A resync far beyond the test's waits: only the retry can send them.
    const a = agent(pod, ['--grace', '1s', '--resync', '1h']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const restarted = await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
    const refused = await a.waitFor(
      (l) => l.msg === 'could not emit Event: sending it again' && l.event === 'Healed',
      'the refused Healed Event',
    );
    expect(refused.retryInSeconds).toBeLessThanOrEqual(12);
    expect(await events(ns.admin, ns.name, pod.name)).toEqual([]);
    await allowEvents();

    const sent = await waitFor(
      async () => {
        const list = await events(ns.admin, ns.name, pod.name);
        return list.some((e) => e.reason === 'Healed') ? list : undefined;
      },
      { what: 'the Healed Event, sent after the backoff', timeoutMs: 45_000, intervalMs: 250 },
    );
    expect(sent.filter((e) => e.reason === 'Healed')).toHaveLength(1);
    expect(sent.filter((e) => e.reason === 'Drifted')).toHaveLength(1);
    // Timed when it happened, not when it got through.
    const healed = sent.find((e) => e.reason === 'Healed');
    expect(Date.parse(String(healed?.firstTimestamp))).toBeLessThanOrEqual(
      Date.parse(String(restarted.time)) + 1000,
    );
  });
});

describe('a reload fallback the API refuses for a while', () => {
  const ns = useNamespace('agent-reload-retry');

  it('stays owed and is carried out once the API allows it, not lost after the first try', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    // The app's reload endpoint is broken: every change falls back to a restart.
    const server = http.createServer((_req, res) => res.writeHead(500).end());
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/-/reload`;
    try {
      const a = agent(pod, ['--on-drift', 'reload', '--reload-url', url, '--grace', '30s', '--resync', '1h']);
      await a.waitFor((l) => l.state === 'InSync', 'InSync');
      const allowRestarts = await refuseVerb(ns.admin, ns.name, 'deployments', 'patch');
      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: warn\n' });
      writeMount(pod.mountRoot, { 'app.yaml': 'level: warn\n' });
      await a.waitFor((l) => l.msg === 'reload failed', 'the failed reload');
      await a.waitFor((l) => l.msg === 'the heal failed: trying again', 'the refused fallback restart');
      await allowRestarts();
      await a.waitFor(
        (l) => l.msg === 'restarted workload',
        'the fallback restart after the backoff',
        60_000,
      );
      expect((await events(ns.admin, ns.name, pod.name)).map((e) => e.reason)).toEqual(
        expect.arrayContaining(['ReloadFailed', 'HealFailed', 'Healed']),
      );
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });
});

describe('behind HTTPS_PROXY', () => {
  const ns = useNamespace('agent-proxy');

  it('reaches the kubernetes Service through the proxy, over one tunnel, and restarts as without it', async () => {
    const pod = await subPathApp(ns);
    const proxy = await apiServerProxy();
    try {
      const proxied: AppPod = {
        ...pod,
        env: {
          ...pod.env,
          KUBERNETES_SERVICE_HOST: CLUSTER_NAME,
          HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
          NODE_OPTIONS: `--require ${clusterNameGuardModule(tempDir('agent-proxy-'))}`,
        },
      };
      const a = agent(proxied, ['--debounce', '1s']);
      const starting = await a.waitFor((l) => l.msg === 'starting', 'the start line');
      expect(starting.proxy).toEqual({ url: `http://127.0.0.1:${proxy.port}`, from: 'HTTPS_PROXY' });
      await a.waitFor((l) => l.state === 'InSync', 'InSync');
      const before = await templateAnnotations(ns.admin, ns.name);
      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
      await a.waitFor((l) => l.msg === 'restarted workload', 'the restart');
      expect(await templateAnnotations(ns.admin, ns.name)).not.toEqual(before);
      // Its list, watch, reads, restart patch, Events and status writes: one connection.
      expect(proxy.tunnels).toEqual([`${CLUSTER_NAME}:${pod.env.KUBERNETES_SERVICE_PORT}`]);
    } finally {
      proxy.close();
    }
  });
});

describe('a change while the agent was down', () => {
  const ns = useNamespace('agent-late');

  it('is found as drift on the first pass after start', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const first = agent(pod, ['--grace', '2s']);
    await first.waitFor((l) => l.state === 'InSync', 'InSync');
    expect(await first.stop()).toBe(0);
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    // Longer than the grace passes while nobody watches. The condition here is time itself:
    // the point is that the agent never saw the change happen.
    const changedAt = Date.now();
    await waitFor(() => (Date.now() - changedAt > 3000 ? true : undefined), {
      what: 'the grace to pass unobserved',
      timeoutMs: 10_000,
    });
    const second = agent(pod, ['--grace', '2s']);
    const firstVerdict = await second.waitFor((l) => typeof l.state === 'string', 'the first verdict');
    expect(firstVerdict).toMatchObject({ state: 'Drifted', reason: 'ContentDrift' });
    await second.waitFor((l) => l.msg === 'restarted workload', 'the restart');
  });
});

describe('an agent in a Pod being deleted', () => {
  const ns = useNamespace('agent-terminating');

  it('reports the drift and leaves the workload alone: the Pods that replace it mount the sources afresh', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const core = ns.admin.makeApiClient(CoreV1Api);
    // A finalizer keeps the deleted Pod, its deletionTimestamp set, as a Pod stays while its app
    // shuts down and the agent, a native sidecar, outlives it (no kubelet here would finish it).
    const hold = async (finalizers: string[]) => {
      const current = await core.readNamespacedPod({ name: pod.name, namespace: ns.name });
      await core.replaceNamespacedPod({
        name: pod.name,
        namespace: ns.name,
        body: { ...current, metadata: { ...current.metadata, finalizers } },
      });
    };
    await hold(['config-sync.test/hold']);
    try {
      const a = agent(pod, ['--grace', '1s']);
      await a.waitFor((l) => l.state === 'InSync', 'InSync');
      await core.deleteNamespacedPod({ name: pod.name, namespace: ns.name });
      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' }); // never delivered

      const refused = await a.waitFor((l) => l.alert === 'PodTerminating', 'not restarting: PodTerminating');
      expect(refused.msg).toBe('not restarting: PodTerminating');
      expect(a.lines.filter((l) => l.state === 'Drifted').map((l) => l.reason)).toContain('ContentDrift');
      expect(a.lines.filter((l) => l.msg === 'restarted workload')).toEqual([]);
      expect(await templateAnnotations(ns.admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);
      expect((await events(ns.admin, ns.name, pod.name)).map((e) => e.reason)).not.toContain('Healed');
    } finally {
      await hold([]);
    }
  });
});

describe('a deploy that changes the pod template and the config at once', () => {
  const ns = useNamespace('agent-superseded');

  it("the old Pods' agents leave the workload to that rollout: deduped, no second rollout", async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const apps = ns.admin.makeApiClient(AppsV1Api);
    const revision = async () =>
      (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name })).metadata?.annotations?.[
        'deployment.kubernetes.io/revision'
      ];
    await waitFor(async () => (await revision()) === '1' || undefined, { what: 'revision 1' });
    const a = agent(pod, ['--grace', '1s']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    // The new image and the new config: the Deployment controller makes revision 2, whose Pods
    // mount the new config (no kubelet here runs them, so the old Pod stays, as it does until
    // the new ones are ready), and this Pod's files never change.
    await apps.patchNamespacedDeployment({
      name: 'web',
      namespace: ns.name,
      body: [
        {
          op: 'replace',
          path: '/spec/template/spec/containers/0/image',
          value: 'config-sync.invalid/app:v2',
        },
      ],
    });
    await waitFor(async () => (await revision()) === '2' || undefined, { what: 'revision 2' });
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });

    const deduped = await a.waitFor((l) => l.decision === 'deduped', 'deduped', 30_000);
    expect(deduped.msg).toBe('a rollout of a newer pod template replaces this pod');
    expect((deduped.reasons as string[]).at(-1)).toMatch(
      /^Deployment web is rolling out a newer pod template \(revision 2; this pod is of revision 1\), which replaces this pod with pods that mount the sources afresh/,
    );
    expect(a.lines.filter((l) => l.msg === 'restarted workload')).toEqual([]);
    expect(await templateAnnotations(ns.admin, ns.name)).not.toHaveProperty(['config-sync.io/config-hash']);
    expect((await events(ns.admin, ns.name, pod.name)).map((e) => e.reason)).toContain('Deduped');
    expect(await replicaSets(ns.admin, ns.name)).toBe(2);
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], pod.env);
    expect(dry.stdout).toContain(
      'plan: nothing to do, Deployment web is rolling out a newer pod template, which replaces this pod',
    );
    expect(dry.stdout).toContain('(revision 2; this pod is of revision 1)');
  });
});

describe('two kubelet swaps 10 ms apart', () => {
  const ns = useNamespace('agent-swaps');

  it('ends on the verdict of the second swap, though chokidar throttles change events to one per 50 ms', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const a = agent(pod, ['--grace', '10m']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
    const seen = a.lines.length;
    // First swap: still not the API's content; the second, 10 ms later, is.
    writeMount(pod.mountRoot, { 'app.yaml': 'level: warn\n' });
    await new Promise((resolve) => setTimeout(resolve, 10));
    writeMount(pod.mountRoot, { 'app.yaml': 'level: debug\n' });
    await waitFor(() => a.lines.slice(seen).find((l) => l.state === 'InSync'), {
      what: 'InSync after the second swap',
      timeoutMs: 10_000,
    });
  });
});

describe('a quiet watch', () => {
  const ns = useNamespace('agent-quiet');

  it('stays open through 100 s, past the 90 s limit of silence: one watch request, no relist, never Unknown', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const a = agent(pod, ['--grace', '10m']);
    await a.waitFor((l) => l.state === 'InSync', 'InSync');
    // Time itself is the condition: the watch must outlive the 30 s that client-node's Watch
    // allowed, and the agent's own 90 s limit of silence.
    const started = Date.now();
    const idle = (seconds: number) =>
      waitFor(() => (Date.now() - started > seconds * 1000 ? true : undefined), {
        what: `${seconds} s of idle`,
        timeoutMs: seconds * 1000 + 5000,
        intervalMs: 1000,
      });
    // In a cluster where no ConfigMap changes, a watch carries nothing, not even a bookmark
    // (here other files' tests may change theirs, and bookmarks come). After 90 s of silence the
    // agent pings its HTTP/2 connection to the API server; the answer says the watch is quiet,
    // not cut off, so it is kept until the end the agent asked of the server (5 to 10 minutes).
    // (Over HTTP/1.1, where no ping can tell, the agent asks the server for 60 s instead.)
    await idle(100);
    const metrics = await a.metrics();
    expect(sample(metrics, 'config_sync_api_requests_total', { verb: 'list' })).toBe(1);
    expect(sample(metrics, 'config_sync_api_requests_total', { verb: 'watch' })).toBe(1);
    expect(a.lines.filter((l) => l.msg === 'API watch restarting')).toEqual([]);
    expect(a.lines.filter((l) => l.state === 'Unknown')).toEqual([]);
  }, 150_000);
});

describe('reload mode', () => {
  const ns = useNamespace('agent-reload');

  it('POSTs once the files match the API, never while propagating; a failing reload falls back to one restart', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const calls: string[] = [];
    let status = 200;
    const server = http.createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      res.writeHead(status).end();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/-/reload`;
    try {
      const a = agent(pod, ['--on-drift', 'reload', '--reload-url', url, '--grace', '30s']);
      await a.waitFor((l) => l.state === 'InSync', 'InSync');
      expect(calls).toEqual([]);

      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
      await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
      expect(calls).toEqual([]);
      writeMount(pod.mountRoot, { 'app.yaml': 'level: debug\n' });
      await a.waitFor((l) => l.msg === 'reloaded the app', 'the reload');
      await a.waitFor(
        (l) => String(l.msg).startsWith('reload confirmed'),
        'the re-verification after the reload',
      );
      expect(calls).toEqual(['POST /-/reload']);
      await waitFor(
        async () => (await events(ns.admin, ns.name, pod.name)).find((e) => e.reason === 'Reloaded'),
        { what: 'a Reloaded Event' },
      );

      // The app's reload endpoint breaks: three attempts, then the fallback restarts once.
      status = 500;
      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: warn\n' });
      writeMount(pod.mountRoot, { 'app.yaml': 'level: warn\n' });
      await a.waitFor((l) => l.msg === 'reload failed', 'the failed reload');
      expect(calls).toHaveLength(4);
      await a.waitFor((l) => l.msg === 'restarted workload', 'the fallback restart');
      expect((await events(ns.admin, ns.name, pod.name)).map((e) => e.reason)).toEqual(
        expect.arrayContaining(['ReloadFailed', 'Healed']),
      );
      expect(
        sample(await a.metrics(), 'config_sync_heal_total', { action: 'reload', result: 'failed' }),
      ).toBe(1);
    } finally {
      await new Promise((resolve) => server.close(resolve));
    }
  });

  it('sends the signal to the named process in a shared PID namespace', async () => {
    const core = ns.admin.makeApiClient(CoreV1Api);
    const pods = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
    const cm = await core.readNamespacedConfigMap({ name: 'web-config', namespace: ns.name });
    const pod = await prepareAgentPod(ns.admin, ns.name, pods.items[0]?.metadata?.name ?? '', cm.data ?? {});
    const countFile = path.join(pod.mountRoot, 'sighups');
    const app = spawn(
      process.execPath,
      [path.join(root, 'test/fixtures/reloadable-app.mjs'), 'cs-reload-app', countFile],
      { stdio: 'ignore' },
    );
    try {
      await waitFor(() => fs.existsSync(countFile) || undefined, { what: 'the app to start' });
      const a = agent(pod, [
        '--on-drift',
        'reload',
        '--reload-signal',
        'SIGHUP',
        '--reload-process',
        'cs-reload-app',
        '--grace',
        '30s',
      ]);
      await a.waitFor((l) => l.state === 'InSync', 'InSync');
      await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: error\n' });
      writeMount(pod.mountRoot, { 'app.yaml': 'level: error\n' });
      const reloaded = await a.waitFor((l) => l.msg === 'reloaded the app', 'the reload');
      expect(reloaded.how).toBe(`SIGHUP sent to cs-reload-app (pid ${app.pid})`);
      await waitFor(() => (fs.readFileSync(countFile, 'utf8') === '1' ? true : undefined), {
        what: 'the app to get one SIGHUP',
      });
    } finally {
      app.kill();
    }
  });
});
