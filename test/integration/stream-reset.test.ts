// HTTP/2 stream resets between the agent and the real API server. An L7 hop in front of the API
// server (a proxy, a load balancer, a mesh's sidecar) resets a stream with RST_STREAM when its
// own connection upstream dies, often with NO_ERROR before any answer: Node's own http2 server
// does that when a response is destroyed without an error. Node's client reads such a reset as
// the stream's clean end, so before this a request reset so never ended, and the agent's loop
// froze on it for good: no verdict, no status write, no heal, /healthz still 200.
//
// Each agent here reaches the API only through the test's own HTTP/2 proxy
// (test/cluster/api-proxy.ts), which resets chosen streams (NO_ERROR, CANCEL, INTERNAL_ERROR on
// a GET, a PATCH, a watch) or has its upstream refuse connections. Every agent runs with
// `--resync 1h`, so only the watch and the retries can bring a result in time.
import http2 from 'node:http2';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiProxy } from '../cluster/api-proxy.ts';
import { writeSubPathFile } from '../cluster/kubelet-volume.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  createApp,
  expectOneRestart,
  templateAnnotations,
  updateConfig,
  webDeployment,
} from './support-app.ts';

const {
  NGHTTP2_NO_ERROR: NO_ERROR,
  NGHTTP2_CANCEL: CANCEL,
  NGHTTP2_INTERNAL_ERROR: INTERNAL_ERROR,
} = http2.constants;

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/**
 * web (one replica) with app.yaml as a subPath file, which no kubelet ever updates: a change of
 * the ConfigMap is a drift only a restart heals, due one --debounce (1 s) after the agent sees
 * it. Its agent reaches the API through a fresh proxy; `before` arms the proxy's faults before
 * the agent's first request.
 */
async function subPathAgentBehindProxy(
  ns: { admin: KubeConfig; name: string },
  before: (proxy: ApiProxy) => void = () => {},
) {
  const workload = webDeployment(1);
  const app = workload.spec?.template.spec?.containers[0];
  if (!app) throw new Error('web without a container');
  app.volumeMounts = [{ name: 'config', mountPath: '/etc/app.yaml', subPath: 'app.yaml' }];
  const [pod] = (await createApp(ns.admin, ns.name, 1, workload)) as [AppPod];
  writeSubPathFile(`${pod.mountRoot}/etc/app.yaml`, { data: Buffer.from('level: info\n'), mode: 0o644 });
  const proxy = await ApiProxy.start(controlPlane());
  cleanup.push(() => proxy.stop());
  before(proxy);
  const agent = AgentProcess.start({ ...pod, env: { ...pod.env, ...proxy.env } }, [
    '--debounce',
    '1s',
    '--resync',
    '1h',
  ]);
  // Stopped with SIGTERM at the end of each test, which must exit 0 however the streams went.
  cleanup.push(async () => expect(await agent.stop()).toBe(0));
  return { pod, proxy, agent };
}

async function inSyncWritten(admin: KubeConfig, namespace: string, pod: string): Promise<boolean> {
  const p = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name: pod, namespace });
  return (
    p.status?.conditions?.some((c) => c.type === 'config-sync.io/InSync' && c.status === 'True') ?? false
  );
}

async function healthz(agent: AgentProcess): Promise<number> {
  const listening = await agent.waitFor((l) => l.msg === 'listening', 'the agent to listen');
  return (await fetch(`http://${listening.address as string}/healthz`)).status;
}

describe('a status PATCH whose stream is reset before any answer', () => {
  const ns = useNamespace('reset-patch');

  it('fails at once and is written again after the backoff; a subPath drift after it is one restart', async () => {
    const { pod, proxy, agent } = await subPathAgentBehindProxy(ns, (p) => {
      for (const code of [NO_ERROR, CANCEL])
        p.resetNext({ verb: 'patch', path: /\/pods\/[^/?]+\/status/, code });
    });
    // The two first writes of the condition are reset; each fails at once, naming the reset,
    // and the third, after the backoff (5 s, then 10 s, each 80 to 120 %), is written.
    const failed = await agent.waitFor(
      (l) => typeof l.msg === 'string' && /HTTP\/2 stream was reset \(NO_ERROR\)/.test(l.msg),
      'the reset status write told',
    );
    expect(failed).toMatchObject({ level: 'warn', retryInSeconds: expect.any(Number) });
    await agent.waitFor(
      (l) => typeof l.msg === 'string' && /HTTP\/2 stream was reset \(CANCEL\)/.test(l.msg),
      'the second reset told',
    );
    await waitFor(() => inSyncWritten(ns.admin, ns.name, pod.name).then((ok) => ok || undefined), {
      what: 'the InSync condition written after the resets',
      timeoutMs: 40_000,
    });
    expect(proxy.resetRequests('patch')).toHaveLength(2);
    expect(await healthz(agent)).toBe(200);

    // The loop still turns: a real drift, one restart, one debounce after the change.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await agent.waitFor((l) => l.reason === 'SubPathStale', 'SubPathStale');
    await expectOneRestart([agent]);
    expect(await templateAnnotations(ns.admin, ns.name)).toHaveProperty(['config-sync.io/config-hash']);
  }, 90_000);
});

describe('the confirming read of a drift whose stream is reset', () => {
  const ns = useNamespace('reset-get');

  it('is unconfirmed, asked again 5 s later, and the drift then restarts the workload once', async () => {
    const { pod, proxy, agent } = await subPathAgentBehindProxy(ns);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await waitFor(() => inSyncWritten(ns.admin, ns.name, pod.name).then((ok) => ok || undefined), {
      what: 'the InSync condition written',
    });
    // The quorum GET of web-config before acting: reset twice, with two codes.
    for (const code of [INTERNAL_ERROR, NO_ERROR])
      proxy.resetNext({ verb: 'get', path: /\/configmaps\/web-config(\?|$)/, code });
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const unconfirmed = await agent.waitFor(
      (l) => l.state === 'Unknown' && /could not confirm the cached copy/.test(String(l.msg)),
      'the drift unconfirmed',
    );
    expect(String(unconfirmed.msg)).toMatch(/HTTP\/2 stream was reset \(INTERNAL_ERROR\)/);
    await expectOneRestart([agent], 40_000);
    expect(proxy.resetRequests('get')).toHaveLength(2);
  }, 90_000);
});

describe('a watch whose stream is reset before its head', () => {
  const ns = useNamespace('reset-watch');

  it('is listed and watched again, and a change after it is seen without waiting for --resync', async () => {
    const { proxy, agent } = await subPathAgentBehindProxy(ns, (p) => {
      for (const code of [NO_ERROR, CANCEL, INTERNAL_ERROR]) p.resetNext({ verb: 'watch', code });
    });
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await waitFor(() => (proxy.resetRequests('watch').length === 3 ? true : undefined), {
      what: 'three watch requests reset',
    });
    // Each reset watch is a restart of the watch, told with the reset.
    await agent.waitFor(
      (l) => l.msg === 'API watch restarting' && /stream was reset \(NO_ERROR\)/.test(String(l.detail)),
      'the reset watch restarted',
    );
    // A watch that is live again: the watch request after the resets was answered.
    await waitFor(
      () =>
        proxy.requests.filter((r) => r.verb === 'watch' && r.reset === undefined).length > 0
          ? true
          : undefined,
      { what: 'a watch not reset', timeoutMs: 30_000 },
    );
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await agent.waitFor((l) => l.reason === 'SubPathStale', 'SubPathStale from the watch', 30_000);
    await expectOneRestart([agent]);
  }, 90_000);
});

describe('an API server that refuses the hop in front of it for 18 s', () => {
  const ns = useNamespace('reset-upstream');

  it('is Unknown meanwhile with /healthz 200, and checks the change made meanwhile once it is back', async () => {
    const { pod, proxy, agent } = await subPathAgentBehindProxy(ns);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await waitFor(() => inSyncWritten(ns.admin, ns.name, pod.name).then((ok) => ok || undefined), {
      what: 'the InSync condition written',
    });
    const mark = agent.lines.length;
    proxy.refuseUpstream();
    // The change reaches the API directly, not through the hop.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await agent.waitFor(
      (l) => agent.lines.indexOf(l) >= mark && l.state === 'Unknown',
      'Unknown while the hop has no upstream',
    );
    const refusedUntil = Date.now() + 18_000;
    while (Date.now() < refusedUntil) {
      expect(await healthz(agent)).toBe(200);
      await new Promise((resolve) => setTimeout(resolve, 2_000));
    }
    expect(proxy.resetRequests().length).toBeGreaterThan(0);
    // Nothing was acted on while the API could not be read.
    expect(agent.lines.some((l) => l.msg === 'restarted workload')).toBe(false);
    proxy.resume();
    const backAt = Date.now();
    await expectOneRestart([agent], 40_000);
    // Within a watch backoff step or two (8 s at most each) and the 1 s debounce.
    expect(Date.now() - backAt).toBeLessThan(30_000);
  }, 120_000);
});
