// Never act on a stale view: the agent as a process, in a Pod of the real API server, reaching
// the API through the test's own proxy (test/cluster/api-proxy.ts) that can stall or cut the
// network between them. In every scenario a change is made while the agent cannot see it, and
// kubelet delivers it at once, so the files on disk are right and the agent's copy of the
// ConfigMap is old: calling that drift would restart a healthy workload.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiProxy } from '../cluster/api-proxy.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  createApp,
  sample,
  templateAnnotations,
  updateConfig,
  writeMount,
} from './support-app.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** An app Pod whose agent reaches the API only through a fresh proxy. */
async function agentBehindProxy(admin: KubeConfig, namespace: string, args: string[]) {
  const [pod] = (await createApp(admin, namespace, 1)) as [AppPod];
  const proxy = await ApiProxy.start(controlPlane());
  cleanup.push(() => proxy.stop());
  const agent = AgentProcess.start({ ...pod, env: { ...pod.env, ...proxy.env } }, args);
  cleanup.push(() => agent.stop());
  await agent.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');
  // The first status write done, so no fault below catches it in flight.
  await waitFor(
    async () => {
      const p = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name: pod.name, namespace });
      return (
        p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True') &&
        p.metadata?.annotations?.['config-sync.io/last-config-sync'] !== undefined
      );
    },
    { what: 'the InSync condition written' },
  );
  return { pod, proxy, agent };
}

async function eventReasons(admin: KubeConfig, namespace: string, pod: string): Promise<string[]> {
  const list = await admin
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${pod}` });
  return list.items.map((e) => e.reason ?? '');
}

const CHANGED = { 'app.yaml': 'level: debug\n' };

/** The central promise: no drift reported, no Drifted Event, no restart of the workload. */
async function expectNoDriftActedOn(admin: KubeConfig, namespace: string, pod: AppPod, agent: AgentProcess) {
  expect(agent.lines.some((l) => l.state === 'Drifted' || l.msg === 'restarted workload')).toBe(false);
  expect(await templateAnnotations(admin, namespace)).not.toHaveProperty(['config-sync.io/config-hash']);
  expect(await eventReasons(admin, namespace, pod.name)).not.toContain('Drifted');
}

describe('a watch that hangs half-open while requests still pass', () => {
  const ns = useNamespace('stale-watch');

  it('a fresh read before acting corrects the stale copy: no restart, no Drifted Event', async () => {
    const { pod, proxy, agent } = await agentBehindProxy(ns.admin, ns.name, ['--grace', '2s']);
    proxy.stallWatches();
    await updateConfig(ns.admin, ns.name, CHANGED);
    writeMount(pod.mountRoot, CHANGED);

    await agent.waitFor((l) => l.msg.startsWith('the cached copy was stale'), 'the stale copy corrected');
    // The drift was withdrawn before it was reported: the verdict never left InSync.
    const metrics = await waitFor(
      async () => {
        const text = await agent.metrics();
        return sample(text, 'config_sync_in_sync') === 1 ? text : undefined;
      },
      { what: 'in sync on the corrected copy' },
    );
    expect(sample(metrics, 'config_sync_stale_view_total', { kind: 'ConfigMap' })).toBeGreaterThanOrEqual(1);
    expect(
      sample(metrics, 'config_sync_api_watch_restarts_total', { kind: 'ConfigMap', reason: 'resync' }),
    ).toBe(1);
    await expectNoDriftActedOn(ns.admin, ns.name, pod, agent);
  });
});

describe('a partition that drops packets', () => {
  const ns = useNamespace('stale-partition');

  it('drift it cannot confirm is Unknown, not acted on; after the partition it is InSync', async () => {
    const { pod, proxy, agent } = await agentBehindProxy(ns.admin, ns.name, [
      '--grace',
      '2s',
      '--request-timeout',
      '2s',
    ]);
    proxy.stall();
    await updateConfig(ns.admin, ns.name, CHANGED);
    writeMount(pod.mountRoot, CHANGED);

    const verdict = await agent.waitFor(
      (l) => l.state === 'Unknown' || l.state === 'Drifted',
      'a verdict on the changed files',
    );
    expect(verdict.state).toBe('Unknown');
    expect(String(verdict.msg)).toMatch(/could not confirm/);

    const mark = agent.lines.length;
    proxy.resume();
    await waitFor(() => agent.lines.slice(mark).find((l) => l.state === 'InSync'), {
      what: 'InSync after the partition',
      timeoutMs: 30_000,
    });
    await expectNoDriftActedOn(ns.admin, ns.name, pod, agent);
  });
});

describe('a read before acting that gets no answer', () => {
  const ns = useNamespace('stale-unanswered');

  it('is asked again within seconds once the API answers, not at the next resync: the real drift is healed', async () => {
    // --resync stays at its 60 s default, and the watch stays quiet: only the retry of the read
    // can bring the agent back to the drift within the wait below.
    const { proxy, agent } = await agentBehindProxy(ns.admin, ns.name, [
      '--grace',
      '1s',
      '--request-timeout',
      '1s',
    ]);
    proxy.stallRequests();
    await updateConfig(ns.admin, ns.name, CHANGED); // kubelet never delivers it: a real drift
    await agent.waitFor(
      (l) => l.state === 'Unknown' && /could not confirm/.test(String(l.msg)),
      'Unknown: the confirming read got no answer',
    );
    proxy.resume();
    const restarted = await agent.waitFor((l) => l.msg === 'restarted workload', 'the restart', 20_000);
    expect(restarted.workload).toMatchObject({ kind: 'Deployment', name: 'web' });
  });
});

describe('the API server gone and back, with a watch cache that lost the version', () => {
  const ns = useNamespace('stale-restart');

  it('the copy is not evidence while the watch is down; a 410 on return relists at once; no restart', async () => {
    const { pod, proxy, agent } = await agentBehindProxy(ns.admin, ns.name, ['--grace', '2s']);
    proxy.cut();
    const notLive = await agent.waitFor((l) => l.state === 'Unknown', 'Unknown while the API is down');
    expect(String(notLive.msg)).toMatch(/API watch not live/);
    await updateConfig(ns.admin, ns.name, CHANGED);
    writeMount(pod.mountRoot, CHANGED);
    // Long enough for the backoff to grow past a few seconds.
    await agent.waitFor(
      () => agent.lines.filter((l) => l.msg === 'API watch restarting').length >= 4,
      'four failed attempts while the API is down',
    );

    const mark = agent.lines.length;
    proxy.answerGone(1);
    proxy.resume();
    await waitFor(() => agent.lines.slice(mark).find((l) => l.state === 'InSync'), {
      what: 'InSync once the API is back',
      timeoutMs: 30_000,
    });
    await expectNoDriftActedOn(ns.admin, ns.name, pod, agent);
  });
});

describe('stopping while the API hangs', () => {
  const ns = useNamespace('stale-stop');

  it('SIGTERM aborts what is in flight: the process is gone within 5 s, exit 0', async () => {
    const { pod, proxy, agent } = await agentBehindProxy(ns.admin, ns.name, [
      '--grace',
      '2s',
      '--request-timeout',
      '5m',
    ]);
    proxy.stall();
    // Files tampered with on disk: the agent writes its condition and reads the API before
    // acting, and hangs on whichever request comes first.
    writeMount(pod.mountRoot, { 'app.yaml': 'tampered: true\n' });
    await waitFor(() => (proxy.pending > 0 ? true : undefined), {
      what: 'a request the stalled API holds unanswered',
    });
    const t0 = Date.now();
    expect(await agent.stop()).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5_000);
    expect(agent.lines.at(-1)?.msg).toBe('stopped');
  });
});

describe('the RoleBinding removed mid-run', () => {
  const ns = useNamespace('stale-rbac');

  it('clear, rate-limited errors while it is gone; back in sync within seconds of its return', async () => {
    const { proxy, agent } = await agentBehindProxy(ns.admin, ns.name, ['--grace', '2s']);
    const rbac = ns.admin.makeApiClient(RbacAuthorizationV1Api);
    const binding = await rbac.readNamespacedRoleBinding({ name: 'config-sync-agent', namespace: ns.name });
    await rbac.deleteNamespacedRoleBinding({ name: 'config-sync-agent', namespace: ns.name });
    // An open watch is authorized once, when it starts: end it as the server does at its
    // timeout, so the agent must ask again.
    const mark = agent.lines.length;
    proxy.endWatches();
    const refused = await agent.waitFor(
      (l) => agent.lines.indexOf(l) >= mark && l.msg === 'API watch restarting',
      'the refusal logged',
    );
    expect(String(refused.detail)).toMatch(
      /system:serviceaccount:.*:config-sync-agent may not (watch|list) configmaps "web-config" in namespace/,
    );
    await agent.waitFor(
      (l) => agent.lines.indexOf(l) >= mark && l.state === 'Unknown',
      'Unknown while refused',
    );

    // Ten seconds without the binding: the retries back off, they do not flood the log or the API.
    const t0 = Date.now();
    await waitFor(() => (Date.now() - t0 >= 10_000 ? true : undefined), {
      what: 'ten seconds without the RoleBinding',
      timeoutMs: 15_000,
      intervalMs: 500,
    });
    const retries = agent.lines.slice(mark).filter((l) => l.msg === 'API watch restarting').length;
    expect(retries).toBeGreaterThanOrEqual(3);
    expect(retries).toBeLessThanOrEqual(8);
    expect(proxy.count('list', t0)).toBeLessThanOrEqual(8);

    const restoredAt = Date.now();
    const back = agent.lines.length;
    await rbac.createNamespacedRoleBinding({
      namespace: ns.name,
      body: {
        metadata: { name: 'config-sync-agent' },
        roleRef: binding.roleRef,
        subjects: binding.subjects ?? [],
      },
    });
    await agent.waitFor(
      (l) => agent.lines.indexOf(l) >= back && l.state === 'InSync',
      'InSync once the RoleBinding is back',
      20_000,
    );
    expect(Date.now() - restoredAt).toBeLessThan(20_000);
    expect(agent.lines.some((l) => l.msg === 'restarted workload')).toBe(false);
  });
});

describe('a reload that fails while the API cannot be reached', () => {
  const ns = useNamespace('stale-reload');

  it('holds the fallback back until the sources can be confirmed, then restarts once', async () => {
    let proxy: ApiProxy | undefined;
    const calls: string[] = [];
    // The app's reload endpoint fails, and the network to the API breaks at that moment.
    const app = http.createServer((req, res) => {
      calls.push(`${req.method} ${req.url}`);
      proxy?.cut();
      res.writeHead(500).end();
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    cleanup.push(() => new Promise((resolve) => app.close(resolve)));
    const url = `http://127.0.0.1:${(app.address() as AddressInfo).port}/-/reload`;
    const started = await agentBehindProxy(ns.admin, ns.name, [
      '--on-drift',
      'reload',
      '--reload-url',
      url,
      '--grace',
      '30s',
      '--request-timeout',
      '2s',
    ]);
    proxy = started.proxy;
    const { pod, agent } = started;

    await updateConfig(ns.admin, ns.name, CHANGED);
    await agent.waitFor((l) => l.state === 'Propagating', 'Propagating');
    writeMount(pod.mountRoot, CHANGED);
    await agent.waitFor((l) => l.msg === 'reload failed', 'the failed reload');
    await agent.waitFor(
      (l) => String(l.msg).startsWith('reload fallback held back'),
      'the fallback held back while the API is cut off',
    );
    expect(agent.lines.some((l) => l.msg === 'restarted workload')).toBe(false);

    proxy.resume();
    await agent.waitFor(
      (l) => l.msg === 'restarted workload',
      'the fallback restart once the API answers',
      30_000,
    );
    expect(agent.lines.filter((l) => l.msg === 'restarted workload')).toHaveLength(1);
    expect(calls.length).toBeGreaterThan(0);
  });
});
