// The API watch of one source against the real API server, through config-sync's own transport
// and as a ServiceAccount limited by resourceNames: one list, then a change and a deletion
// arrive as states over the watch, with no second list.
//
// Not covered here: the relist on 410 Gone. The API server answers a watch from an old version
// out of its watch cache (or with the current state as ADDED) unless that version has left the
// cache, which takes minutes of churn, so a test cannot provoke it in reasonable time.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import type { KubeClient } from '../../src/kube/client.ts';
import type { SourceState } from '../../src/verify/source.ts';
import { SourceWatch } from '../../src/watch/api-watch.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterClient, useNamespace } from './support.ts';

const ns = useNamespace('api-watch');
let client: KubeClient;

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
  const layout = layInClusterDir(fs.mkdtempSync(path.join(os.tmpdir(), 'api-watch-')), controlPlane(), {
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
