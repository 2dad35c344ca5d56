// Reload mode's behaviour under bursts and restarts, against the real API server with
// kubelet-style volume swaps: a burst of changes costs at most two reloads, the last one after
// the last change; files that changed while no agent watched are reloaded once if, and only if,
// the app's container started before the swap.
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  reloadEndpoint as appReloadEndpoint,
  appStartedAt,
  createApp,
  updateConfig,
  writeMount,
} from './support-app.ts';

const cleanup: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const step of cleanup.splice(0).reverse()) await step();
});

/** The app's reload endpoint (support-app.ts), closed after the test. */
async function reloadEndpoint(): Promise<{ url: string; posts: number[] }> {
  const endpoint = await appReloadEndpoint();
  cleanup.push(endpoint.close);
  return endpoint;
}

function startAgent(pod: AppPod, url: string): AgentProcess {
  const agent = AgentProcess.start(pod, ['--on-drift', 'reload', '--reload-url', url, '--grace', '30s']);
  cleanup.push(() => agent.stop());
  return agent;
}

describe('a burst of 20 changes in 2 s', () => {
  const ns = useNamespace('reload-burst');

  it('costs at most two reloads, the last one after the last change', { timeout: 60_000 }, async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const { url, posts } = await reloadEndpoint();
    const agent = startAgent(pod, url);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    // Let the first config stand, as it would in a running app.
    const quietUntil = Date.now() + 1500;
    await waitFor(() => (Date.now() >= quietUntil ? true : undefined), { what: 'a quiet spell' });

    let lastChange = 0;
    for (let i = 1; i <= 20; i++) {
      const data = { 'app.yaml': `level: debug\nburst: ${i}\n` };
      await updateConfig(ns.admin, ns.name, data);
      writeMount(pod.mountRoot, data);
      lastChange = Date.now();
      const next = lastChange + 100;
      await waitFor(() => (Date.now() >= next ? true : undefined), {
        what: 'the next change',
        intervalMs: 10,
      });
    }
    await agent.waitFor(
      (l) => l.msg === 'reloaded the app' && (posts.at(-1) ?? 0) >= lastChange,
      'a reload after the last change',
      15_000,
    );
    // Nothing more comes once the burst has settled.
    const settledAt = Date.now() + 2500;
    await waitFor(() => (Date.now() >= settledAt ? true : undefined), { what: 'the settle time to pass' });
    expect(posts.length).toBeGreaterThanOrEqual(1);
    expect(posts.length).toBeLessThanOrEqual(2);
    expect(posts.at(-1)).toBeGreaterThanOrEqual(lastChange);
  });
});

describe('files changed while no agent watched', () => {
  const ns = useNamespace('reload-down');

  it('the app started before the swap: one reload at start', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    appStartedAt(ns.name, pod.name, new Date(Date.now() - 60_000));
    // The change and kubelet's swap, with no agent running.
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    writeMount(pod.mountRoot, { 'app.yaml': 'level: debug\n' });

    const { url, posts } = await reloadEndpoint();
    const agent = startAgent(pod, url);
    await agent.waitFor((l) => l.msg === 'reloaded the app', 'the owed reload');
    expect(posts).toHaveLength(1);
    expect(agent.lines.some((l) => String(l.msg).startsWith('the files changed after the app started'))).toBe(
      true,
    );
  });
});

describe('files that have not changed since the app started', () => {
  const ns = useNamespace('reload-fresh');

  it('the app started after the swap: no reload', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    appStartedAt(ns.name, pod.name, new Date(Date.now() + 2000));
    const { url, posts } = await reloadEndpoint();
    const agent = startAgent(pod, url);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    const until = Date.now() + 2000;
    await waitFor(() => (Date.now() >= until ? true : undefined), { what: 'two seconds' });
    expect(posts).toEqual([]);
  });
});
