// The API watch of one source against the real API server, through config-sync's own transport
// and as a ServiceAccount limited by resourceNames: one list, then a change and a deletion
// arrive as states over the watch, with no second list. Then the faults, through the test's own
// proxy (test/cluster/api-proxy.ts): a broken connection makes the cached copy "not live" at
// once and a fresh list makes it live again; a 410 Gone relists at once, even after an outage
// that grew the backoff.
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.ts';
import type { SourceState } from '../../src/verify/source.ts';
import { SourceWatch } from '../../src/watch/api-watch.ts';
import { ApiProxy } from '../cluster/api-proxy.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { type InClusterLayout, layInClusterDir } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterClient, useNamespace } from './support.ts';

const ns = useNamespace('api-watch');
let client: KubeClient;
let layout: InClusterLayout;

beforeAll(async () => {
  await ns.admin.makeApiClient(CoreV1Api).createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'app' }, data: { 'app.yaml': 'level: info\n' } },
  });
  const agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'agent',
    rules: [
      { apiGroups: [''], resources: ['configmaps'], resourceNames: ['app'], verbs: ['get', 'list', 'watch'] },
    ],
  });
  layout = layInClusterDir(tempDir('api-watch-'), controlPlane(), {
    token: agent.token,
    namespace: ns.name,
  });
  client = await inClusterClient(layout, ns.name);
});

describe('a source watch', () => {
  it('lists once, then follows a change and a deletion', async () => {
    const states: SourceState[] = [];
    const restarts: string[] = [];
    const stop = new AbortController();
    const watch = new SourceWatch(
      client,
      ns.name,
      { kind: 'ConfigMap', name: 'app' },
      {
        onState(state) {
          states.push(state);
        },
        onRestart(reason) {
          restarts.push(reason);
        },
      },
    );
    const running = watch.start(stop.signal);
    try {
      await waitFor(() => (client.requests.watch === 1 ? true : undefined), { what: 'the watch to open' });
      expect(states.map((s) => s.state)).toEqual(['present']);

      const core = ns.admin.makeApiClient(CoreV1Api);
      await core.replaceNamespacedConfigMap({
        name: 'app',
        namespace: ns.name,
        body: { metadata: { name: 'app' }, data: { 'app.yaml': 'level: debug\n' } },
      });
      const changed = await waitFor(() => states.slice(1).find((s) => s.state === 'present'), {
        what: 'the change as a state',
      });
      const before = states[0];
      expect(changed.state === 'present' && before?.state === 'present').toBe(true);
      if (changed.state === 'present' && before?.state === 'present')
        expect(changed.snapshot.resourceVersion).not.toBe(before.snapshot.resourceVersion);

      await core.deleteNamespacedConfigMap({ name: 'app', namespace: ns.name });
      await waitFor(() => states.find((s) => s.state === 'absent'), { what: 'the deletion as a state' });
      expect(client.requests.list).toBe(1);
      expect(client.requests.watch).toBe(1);
      expect(restarts).toEqual([]);
    } finally {
      stop.abort();
      await running;
    }
  });
});

/** A SourceWatch of ConfigMap/app through `proxy`, recording its states and restarts. */
async function watchThrough(proxy: ApiProxy) {
  const viaProxy = await inClusterClient({ ...layout, env: proxy.env }, ns.name);
  const states: SourceState[] = [];
  const restarts: string[] = [];
  const stop = new AbortController();
  const watch = new SourceWatch(
    viaProxy,
    ns.name,
    { kind: 'ConfigMap', name: 'app' },
    {
      onState: (state) => states.push(state),
      onRestart: (reason) => restarts.push(reason),
    },
  );
  const running = watch.start(stop.signal);
  return {
    states,
    restarts,
    async close() {
      stop.abort();
      await running;
    },
  };
}

describe('a source watch under faults', () => {
  const core = () => ns.admin.makeApiClient(CoreV1Api);

  it('a cut connection makes the copy not live at once; a fresh list after the cut makes it live', async () => {
    await core().createNamespacedConfigMap({
      namespace: ns.name,
      body: { metadata: { name: 'app' }, data: { 'app.yaml': 'level: info\n' } },
    });
    const proxy = await ApiProxy.start(controlPlane());
    const w = await watchThrough(proxy);
    try {
      await waitFor(() => (proxy.count('watch') === 1 ? true : undefined), { what: 'the watch to open' });
      proxy.cut();
      const notLive = await waitFor(() => w.states.find((s) => s.state === 'unreadable'), {
        what: 'the source reported not live',
      });
      expect(notLive.state === 'unreadable' && notLive.reason).toMatch(/^API watch not live/);
      // A change made while the agent cannot see the API: the copy it had is not evidence.
      await core().replaceNamespacedConfigMap({
        name: 'app',
        namespace: ns.name,
        body: { metadata: { name: 'app' }, data: { 'app.yaml': 'level: debug\n' } },
      });
      const listsBefore = proxy.count('list');
      proxy.resume();
      const live = await waitFor(
        () => {
          const last = w.states.at(-1);
          return last?.state === 'present' && proxy.count('list') > listsBefore ? last : undefined;
        },
        { what: 'a fresh list after the cut', timeoutMs: 20_000 },
      );
      const current = await core().readNamespacedConfigMap({ name: 'app', namespace: ns.name });
      expect(live.state === 'present' && live.snapshot.resourceVersion).toBe(
        current.metadata?.resourceVersion,
      );
      expect(w.restarts).toContain('error');
      // Over HTTP/2, as to the API server itself, before the cut and after it.
      expect(new Set(proxy.requests.map((r) => r.http))).toEqual(new Set(['2.0']));
    } finally {
      await w.close();
      await proxy.stop();
    }
  });

  it('over HTTP/2 asks the server to keep each watch open 5 to 10 minutes, as client-go does', async () => {
    const proxy = await ApiProxy.start(controlPlane());
    const w = await watchThrough(proxy);
    try {
      const watch = await waitFor(() => proxy.requests.find((r) => r.verb === 'watch'), {
        what: 'the watch to open',
      });
      const asked = Number(new URL(watch.path, 'https://x').searchParams.get('timeoutSeconds'));
      expect(asked).toBeGreaterThanOrEqual(300);
      expect(asked).toBeLessThanOrEqual(600);
      expect(watch.http).toBe('2.0');
    } finally {
      await w.close();
      await proxy.stop();
    }
  });

  it('a 410 Gone relists at once, even after an outage grew the backoff', async () => {
    const proxy = await ApiProxy.start(controlPlane());
    const w = await watchThrough(proxy);
    try {
      await waitFor(() => (proxy.count('watch') === 1 ? true : undefined), { what: 'the watch to open' });
      // An outage long enough for several failed attempts, each backing off longer.
      proxy.cut();
      await waitFor(() => (w.restarts.filter((r) => r === 'error').length >= 4 ? true : undefined), {
        what: 'four failed attempts during the outage',
        timeoutMs: 30_000,
      });
      // The API server is back, with a watch cache that no longer has the agent's version.
      proxy.answerGone(1);
      proxy.resume();
      const gone = await waitFor(
        () => {
          const i = proxy.requests.findIndex((r) => r.gone);
          return i >= 0 ? i : undefined;
        },
        { what: 'a watch answered 410 Gone', timeoutMs: 20_000 },
      );
      const relist = await waitFor(() => proxy.requests.slice(gone + 1).find((r) => r.verb === 'list'), {
        what: 'the relist after the 410',
        timeoutMs: 20_000,
      });
      // "At once": no backoff between the 410 and the relist.
      expect(relist.at - (proxy.requests[gone]?.at ?? 0)).toBeLessThan(1_000);
      await waitFor(() => (w.states.at(-1)?.state === 'present' ? true : undefined), {
        what: 'the source live again',
      });
    } finally {
      await w.close();
      await proxy.stop();
    }
  });
});
