// Drift kubelet will not fix, on a real node: an env var from a Secret (kubelet never updates a
// running container's environment) and the stuck kubelet (SIGSTOP), the case no other tool sees
// because the files simply stay old. Each heals with exactly one rollout restart, and no value
// of the Secret shows in any log, Event or annotation.
import fs from 'node:fs';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { NODE_BASE } from '../cluster/node.ts';
import { waitFor, waitForSteady } from '../cluster/wait.ts';
import {
  agentLog,
  agentLogTail,
  cluster,
  configVolumeOnNode,
  describeOnNode,
  eventsOf,
  inSyncCondition,
  killContainer,
  kubectl,
  patchAppYamlDelivered,
  patchConfig,
  patchWebAndRollOut,
  restartsOf,
  useExample,
  useNode,
  webPodsInSync,
  webPodsReplaced,
} from './support.ts';

const NEW_PASSWORD = 'e2e-rotated-password-never-shown';

/** The last lines of every config-sync container log of `namespace` on the node, read from disk. */
function agentLogFiles(namespace: string): string[] {
  const root = path.join(NODE_BASE, 'pod-logs');
  const lines: string[] = [];
  for (const pod of fs.readdirSync(root).filter((d) => d.startsWith(`${namespace}_`))) {
    const dir = path.join(root, pod, 'config-sync');
    if (!fs.existsSync(dir)) continue;
    for (const f of fs.readdirSync(dir))
      lines.push(
        `--- ${pod}/${f}`,
        ...fs.readFileSync(path.join(dir, f), 'utf8').trimEnd().split('\n').slice(-8),
      );
  }
  return lines;
}

/** A short --grace, so a stuck kubelet counts as drift in seconds rather than the default 90. */
async function shortGrace(namespace: string): Promise<void> {
  const patch = [
    { op: 'replace', path: '/spec/template/spec/initContainers/0/args', value: ['agent', '--grace', '5s'] },
  ];
  await patchWebAndRollOut(namespace, patch);
}

/**
 * After a subPath drift the restarted agents of `before` saw: the workload restarted (its
 * restartedAt moved from `restartedBefore`), every Pod replaced, and one Healed Event, for
 * SubPathStale.
 */
async function expectOneSubPathRestart(
  ns: { readonly name: string; readonly admin: KubeConfig },
  before: readonly V1Pod[],
  restartedBefore: string | undefined,
): Promise<void> {
  await waitFor(async () => (await restartsOf(ns.admin, ns.name)) !== restartedBefore || undefined, {
    what: 'the restarted agents to heal',
    timeoutMs: 90_000,
    intervalMs: 500,
  });
  await webPodsReplaced(ns.admin, ns.name, before, 'the rollout to complete', 150_000);
  const healed = (await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed');
  expect(healed).toHaveLength(1);
  expect(healed[0]?.message).toMatch(/SubPathStale/);
}

describeOnNode('drift kubelet does not fix, on a real node', () => {
  useNode();

  // Each case in a namespace of its own: a second restart of one workload within
  // --min-restart-interval (5m) would be refused as RateLimited, by design.
  describe('env', () => {
    const ns = useExample('e2e-env');
    it('a Secret behind an env var and a tmpfs volume changed: EnvStale, one restart, the value nowhere', async () => {
      // The Secret also as a volume, in the app and in the sidecar (which reads what the app reads).
      const mount = { name: 'secret', mountPath: '/etc/secret', readOnly: true };
      const patch = [
        {
          op: 'add',
          path: '/spec/template/spec/volumes/-',
          value: { name: 'secret', secret: { secretName: 'web-secrets' } },
        },
        { op: 'add', path: '/spec/template/spec/containers/0/volumeMounts/-', value: mount },
        { op: 'add', path: '/spec/template/spec/initContainers/0/volumeMounts/-', value: mount },
      ];
      await patchWebAndRollOut(ns.name, patch);
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      // kubelet keeps Secret volumes in memory: the volume directory is a tmpfs mount.
      const uid = before[0]?.metadata?.uid ?? '';
      const volume = `${NODE_BASE}/kubelet/pods/${uid}/volumes/kubernetes.io~secret/secret`;
      const mountinfo = fs.readFileSync('/proc/self/mountinfo', 'utf8').split('\n');
      expect(mountinfo.find((l) => l.split(' ')[4] === volume)).toMatch(/ - tmpfs /);

      await kubectl(
        '-n',
        ns.name,
        'patch',
        'secret',
        'web-secrets',
        '--type',
        'merge',
        '-p',
        JSON.stringify({ stringData: { password: NEW_PASSWORD } }),
      );
      const healed = await waitFor(
        async () => {
          const h = (await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed');
          return h.length > 0 ? h : undefined;
        },
        { what: 'the Healed Event', timeoutMs: 60_000, intervalMs: 500 },
      );
      expect(healed).toHaveLength(1);
      expect(healed[0]?.message).toMatch(/EnvStale/);

      const after = await webPodsReplaced(ns.admin, ns.name, before, 'the new Pods InSync', 120_000);
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toHaveLength(1);

      // The value nowhere: the agents' logs (old Pods' files on the node, new Pods' through
      // kubectl logs), every Event, every annotation.
      const texts: string[] = [JSON.stringify(await eventsOf(ns.admin, ns.name))];
      for (const p of after) {
        texts.push(JSON.stringify(await agentLog(ns.name, p.metadata?.name ?? '')));
        texts.push(JSON.stringify(p.metadata?.annotations ?? {}));
      }
      texts.push(await kubectl('-n', ns.name, 'get', 'deployment', 'web', '-o', 'json'));
      for (const t of texts) {
        expect(t).not.toContain(NEW_PASSWORD);
        expect(t).not.toContain('change-me');
      }
    });
  });

  describe('ConfigMap env', () => {
    const ns = useExample('e2e-cm-env');
    it('a ConfigMap key behind an env var changed: EnvStale, one restart', async () => {
      const env = {
        name: 'APP_LEVEL',
        valueFrom: { configMapKeyRef: { name: 'web-config', key: 'app.yaml' } },
      };
      await patchWebAndRollOut(ns.name, [
        { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: env },
      ]);
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      await patchConfig(ns.name, { 'app.yaml': 'level: trace\n' });
      const healed = await waitFor(
        async () => {
          const h = (await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed');
          return h.length > 0 ? h : undefined;
        },
        { what: 'the Healed Event', timeoutMs: 60_000, intervalMs: 500 },
      ).catch((error: Error) => {
        throw new Error(`${error.message}; the agents' last lines:\n${agentLogFiles(ns.name).join('\n')}`);
      });
      expect(healed[0]?.message).toMatch(/EnvStale/);
      const after = await webPodsReplaced(ns.admin, ns.name, before, 'the new Pods InSync', 120_000);
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toHaveLength(1);
      // A ConfigMap value is no more to be shown than a Secret's: hashes, keys and sizes only.
      const texts = [JSON.stringify(await eventsOf(ns.admin, ns.name))];
      for (const p of after) {
        texts.push(JSON.stringify(await agentLog(ns.name, p.metadata?.name ?? '')));
        texts.push(JSON.stringify(p.metadata?.annotations ?? {}));
      }
      for (const t of texts) expect(t).not.toContain('level: trace');
    });
  });

  describe('stuck kubelet', () => {
    const ns = useExample('e2e-stuck');
    it('kubelet frozen while the ConfigMap changes: ContentDrift past --grace, one restart, done once kubelet is back', async () => {
      await shortGrace(ns.name);
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      const restartedBefore = await restartsOf(ns.admin, ns.name);
      const healedBefore = (await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed').length;

      // The rollout of the patch above wholly done (no Pod left terminating) before kubelet stops.
      const core = ns.admin.makeApiClient(CoreV1Api);
      await waitFor(
        async () => {
          const all = (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' })).items;
          return all.length === 2 && all.every((p) => !p.metadata?.deletionTimestamp) ? true : undefined;
        },
        { what: 'no Pod of web left terminating', timeoutMs: 60_000, intervalMs: 250 },
      );

      const { node } = cluster();
      node.freezeKubelet(true);
      try {
        await patchConfig(ns.name, { 'app.yaml': 'level: warn\n' });
        // kubelet cannot deliver the change, so the running agents see the files stay old.
        await waitFor(async () => (await restartsOf(ns.admin, ns.name)) !== restartedBefore || undefined, {
          what: 'the agent to restart the workload',
          timeoutMs: 90_000,
          intervalMs: 500,
        }).catch((error: Error) => {
          // kubelet is frozen, so kubectl logs cannot answer: the agents' log files on the node.
          throw new Error(`${error.message}; the agents' last lines:\n${agentLogFiles(ns.name).join('\n')}`);
        });
        // The agent creates its Healed Event after the patch it reports, so the restart can be
        // seen first: wait for the Event (the count is checked again once the rollout is done).
        const healed = await waitFor(
          async () => {
            const h = (await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed');
            return h.length > healedBefore ? h : undefined;
          },
          { what: 'the Healed Event', timeoutMs: 30_000, intervalMs: 250 },
        );
        expect(healed).toHaveLength(healedBefore + 1);
        expect(healed.at(-1)?.message).toMatch(/ContentDrift/);
      } finally {
        node.freezeKubelet(false);
      }

      const after = await webPodsReplaced(
        ns.admin,
        ns.name,
        before,
        'the rollout to complete once kubelet is back',
        150_000,
      );
      expect(after).toHaveLength(2);
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toHaveLength(
        healedBefore + 1,
      );
      const cm = await core.readNamespacedConfigMap({ name: 'web-config', namespace: ns.name });
      expect(cm.data?.['app.yaml']).toBe('level: warn\n');
    });
  });

  describe('sidecar restarted mid-drift', () => {
    const ns = useExample('e2e-sidecar-restart');
    it('the restarted agents catch up on the drift, and the workload is restarted once', async () => {
      // A long --debounce holds the drift open long enough to kill every agent inside it.
      const patch = [
        {
          op: 'replace',
          path: '/spec/template/spec/initContainers/0/args',
          value: ['agent', '--debounce', '20s'],
        },
      ];
      await patchWebAndRollOut(ns.name, patch);
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      const restartedBefore = await restartsOf(ns.admin, ns.name);
      await patchConfig(ns.name, { 'log.yaml': 'format: logfmt\n' });
      // Both agents see the subPath file stay old, then die inside the debounce.
      for (const pod of before) {
        await waitFor(
          async () =>
            (await agentLog(ns.name, pod.metadata?.name ?? '')).some(
              (l) => l.target === 'app:/etc/log.yaml' && l.state === 'Propagating',
            ),
          {
            what: 'the agent to see the subPath change pending',
            timeoutMs: 30_000,
            intervalMs: 250,
            onTimeout: () => agentLogTail(ns.name, pod.metadata?.name ?? ''),
          },
        );
      }
      for (const pod of before) killContainer(pod, 'config-sync');

      await expectOneSubPathRestart(ns, before, restartedBefore);
      // The first rollout (the patch above) and the one restart: three ReplicaSets in all.
      const rs = await kubectl('-n', ns.name, 'get', 'replicasets', '-o', 'name');
      expect(rs.trim().split('\n')).toHaveLength(3);
    });
  });

  describe('sidecar restarted after another key changed', () => {
    const ns = useExample('e2e-sidecar-late');
    it('the restarted agents know their app holds the current subPath file: no restart; then one for that key', async () => {
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      const core = ns.admin.makeApiClient(CoreV1Api);
      const SUBPATH = 'app:/etc/log.yaml';
      // Each agent records what its app got for /etc/log.yaml, tied to the app container's start.
      for (const pod of before) {
        const name = pod.metadata?.name ?? '';
        await waitFor(
          async () => {
            const p = await core.readNamespacedPod({ name, namespace: ns.name });
            const app = p.status?.containerStatuses?.find((c) => c.name === 'app')?.state?.running?.startedAt;
            const raw = p.metadata?.annotations?.['config-sync.io/start-baselines'];
            const at = raw ? JSON.parse(raw).baselines?.[SUBPATH]?.startedAt : undefined;
            return app && at && Date.parse(at) === new Date(app).getTime() ? true : undefined;
          },
          {
            what: "the subPath baseline recorded with the app's start",
            timeoutMs: 60_000,
            intervalMs: 500,
            onTimeout: () => agentLogTail(ns.name, name),
          },
        );
      }
      const restartedBefore = await restartsOf(ns.admin, ns.name);
      // Only app.yaml changes (the whole volume, which kubelet updates); log.yaml stays. The
      // agents die after it reached the files, and kubelet starts them again: younger than their
      // app, and than the change.
      for (const pod of before)
        await patchAppYamlDelivered(ns.name, configVolumeOnNode(pod), 'level: warn\n');
      for (const pod of before) killContainer(pod, 'config-sync');
      for (const pod of before) {
        const name = pod.metadata?.name ?? '';
        const verdict = await waitFor(
          async () => {
            const p = await core.readNamespacedPod({ name, namespace: ns.name });
            const agent = p.status?.initContainerStatuses?.find((c) => c.name === 'config-sync');
            // Started: its startup probe (/readyz) passed, so its first pass, with whatever it
            // decided and did, is done.
            if (!agent?.restartCount || !agent.state?.running || !agent.started) return undefined;
            return (await agentLog(ns.name, name).catch(() => [])).find(
              (l) => l.target === SUBPATH && l.state,
            );
          },
          {
            what: 'the restarted agent’s verdict on /etc/log.yaml',
            timeoutMs: 60_000,
            intervalMs: 500,
            onTimeout: () => agentLogTail(ns.name, name),
          },
        );
        expect(verdict.state).toBe('InSync');
      }
      // An InSync first verdict sets no deadline: no later pass decides otherwise without a change.
      for (const pod of before) {
        const lines = await agentLog(ns.name, pod.metadata?.name ?? '');
        expect(lines.filter((l) => l.target === SUBPATH && l.state === 'Drifted')).toEqual([]);
      }
      expect(await restartsOf(ns.admin, ns.name)).toBe(restartedBefore);
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toEqual([]);

      // Now log.yaml itself: the apps still hold the old file, and the restarted agents say so.
      await patchConfig(ns.name, { 'log.yaml': 'format: logfmt\n' });
      await expectOneSubPathRestart(ns, before, restartedBefore);
    });
  });

  describe('app container restarted', () => {
    const ns = useExample('e2e-app-restart');
    it('its drift ends when the app restarts and holds the change; the other replica stays drifted', async () => {
      // Alert mode, so the drift stays for the app's restart to settle; a short resync, so the
      // agent decides again soon after it.
      const patch = [
        {
          op: 'replace',
          path: '/spec/template/spec/initContainers/0/args',
          value: ['agent', '--on-drift', 'alert-only', '--resync', '2s'],
        },
      ];
      await patchWebAndRollOut(ns.name, patch);
      const [pod, other] = await webPodsInSync(ns.admin, ns.name, 2);
      const name = pod?.metadata?.name ?? '';
      const otherName = other?.metadata?.name ?? '';
      const logTarget = async () =>
        (await agentLog(ns.name, name)).filter((l) => l.target === 'app:/etc/log.yaml' && l.state);

      // The subPath key changes while the app runs: the app holds the old file -> drift.
      await patchConfig(ns.name, { 'log.yaml': 'format: yaml\n' });
      await waitFor(async () => (await logTarget()).at(-1)?.reason === 'SubPathStale' || undefined, {
        what: 'SubPathStale in alert mode',
        timeoutMs: 60_000,
        intervalMs: 500,
        onTimeout: () => agentLogTail(ns.name, name),
      });
      const core = ns.admin.makeApiClient(CoreV1Api);
      // The app container dies and kubelet starts it again in the same Pod: it gets the new file.
      killContainer(await core.readNamespacedPod({ name, namespace: ns.name }), 'app');
      await waitFor(
        async () => {
          const p = await core.readNamespacedPod({ name, namespace: ns.name });
          const app = p.status?.containerStatuses?.find((c) => c.name === 'app');
          return (app?.restartCount ?? 0) > 0 && app?.state?.running ? true : undefined;
        },
        { what: 'the app container running again', timeoutMs: 60_000, intervalMs: 500 },
      );
      const verdict = await waitFor(
        async () => {
          const last = (await logTarget()).at(-1);
          return last?.state === 'InSync' ? last : undefined;
        },
        { what: 'InSync once the restarted app holds the change', timeoutMs: 60_000, intervalMs: 500 },
      );
      expect(verdict.reason).toBe('InSync');
      // The other replica's app did not restart: it still holds the old file, and says so, once
      // its agent has confirmed the drift with a fresh read (a read that fails leaves it Unknown
      // and it decides again at the next pass, 2 s later here). The replica is the one the test
      // started with, by name: a Pod created since would hold the new file.
      const otherPod = async () => core.readNamespacedPod({ name: otherName, namespace: ns.name });
      await waitFor(
        async () => {
          const c = inSyncCondition(await otherPod());
          return c?.status === 'False' && c.reason === 'SubPathStale' ? true : undefined;
        },
        { what: "the other replica's condition False, SubPathStale", timeoutMs: 60_000, intervalMs: 500 },
      ).catch(async (error: Error) => {
        // What explains a failure here: the other agent's verdicts and the other Pod's containers.
        const other = await otherPod().catch(() => undefined);
        const why = JSON.stringify({
          condition: inSyncCondition(other),
          pod: otherName,
          verdicts: (await agentLog(ns.name, otherName).catch(() => [])).filter(
            (l) => l.target === 'app:/etc/log.yaml',
          ),
          containers: [
            ...(other?.status?.initContainerStatuses ?? []),
            ...(other?.status?.containerStatuses ?? []),
          ].map((c) => ({ name: c.name, restarts: c.restartCount, startedAt: c.state?.running?.startedAt })),
        });
        throw new Error(`${error.message}: ${why}`);
      });
      // Alert mode: nothing was restarted (the message names the workload and the reason, the
      // event's object the Pod whose agent restarted it).
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toEqual([]);
    });
  });

  describe('a deploy that changes the pod template and a subPath key at once', () => {
    const ns = useExample('e2e-deploy');
    it("is one rollout: the old Pods' agents leave it to the Deployment, none restarts it again", async () => {
      const before = await webPodsInSync(ns.admin, ns.name, 2);
      const apps = ns.admin.makeApiClient(AppsV1Api);
      const revision = async () =>
        (await apps.readNamespacedDeployment({ name: 'web', namespace: ns.name })).metadata?.annotations?.[
          'deployment.kubernetes.io/revision'
        ];
      expect(await revision()).toBe('1');
      const restartedBefore = await restartsOf(ns.admin, ns.name);

      // As a Helm upgrade applies them: the ConfigMap, then the Deployment's new template. The
      // old Pods' subPath file is stale from the first, and drifts after the 5 s debounce, while
      // the Deployment replaces them.
      await patchConfig(ns.name, { 'log.yaml': 'format: deployed\n' });
      await kubectl(
        '-n',
        ns.name,
        'patch',
        'deployment',
        'web',
        '--type',
        'merge',
        '-p',
        JSON.stringify({
          spec: {
            // Each new Pod counts as available only 10 s after it is ready, as in many a
            // production Deployment: the old Pods outlive their agents' debounce.
            minReadySeconds: 10,
            template: { metadata: { annotations: { 'example.com/release': '2' } } },
          },
        }),
      );
      const after = await webPodsReplaced(ns.admin, ns.name, before, 'the new Pods InSync', 120_000);
      expect(after.every((p) => p.metadata?.annotations?.['example.com/release'] === '2')).toBe(true);
      // Past the debounce of any old Pod's agent: the ReplicaSets stay two, the revision 2.
      const core = ns.admin.makeApiClient(CoreV1Api);
      await waitFor(
        async () =>
          (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' })).items.length ===
            2 || undefined,
        { what: 'the old Pods gone', timeoutMs: 60_000, intervalMs: 250 },
      );
      const replicaSets = await waitForSteady(
        async () =>
          (await apps.listNamespacedReplicaSet({ namespace: ns.name, labelSelector: 'app=web' })).items
            .length,
        { what: 'the ReplicaSets to stay as they are', quietMs: 8_000, timeoutMs: 60_000 },
      );
      expect(replicaSets).toBe(2);
      expect(await revision()).toBe('2');
      expect(await restartsOf(ns.admin, ns.name)).toBe(restartedBefore);
      expect((await eventsOf(ns.admin, ns.name)).filter((e) => e.reason === 'Healed')).toEqual([]);
    });
  });
});
