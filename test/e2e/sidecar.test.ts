// The shipped image in real Pods: deploy/sidecar applied unmodified into a namespace under Pod
// Security `restricted`, kubelet propagating the ConfigMap itself, and the one change kubelet
// never delivers (a subPath key) healed by exactly one rollout restart across three replicas.
import fs from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { sample } from '../cluster/app.ts';
import { waitFor, waitForSteady } from '../cluster/wait.ts';
import {
  agentLog,
  agentLogTail,
  agentMetrics,
  configVolumeOnNode,
  describeOnNode,
  eventsOf,
  inSync,
  kubectl,
  patchAppYamlDelivered,
  patchConfig,
  patchWebAndRollOut,
  restartsOf,
  scaleWeb,
  useExample,
  useNode,
  webPodsInSync,
  webPodsReplaced,
} from './support.ts';

describeOnNode('deploy/sidecar on a real node', () => {
  useNode();
  const ns = useExample('e2e-sidecar');

  describe('a change kubelet propagates', () => {
    it('is Propagating, then InSync, with the real propagation time, and nothing restarts', async () => {
      const [pod] = await webPodsInSync(ns.admin, ns.name, 2);
      const name = pod?.metadata?.name ?? '';
      await patchConfig(ns.name, { 'app.yaml': 'level: debug\n' });

      const propagated = await waitFor(
        async () => (await agentLog(ns.name, name)).find((l) => l.msg === 'propagated'),
        {
          what: 'the agent to see kubelet deliver the change',
          timeoutMs: 60_000,
          intervalMs: 500,
          onTimeout: () => agentLogTail(ns.name, name),
        },
      );
      const log = await agentLog(ns.name, name);
      const propagating = log.findIndex((l) => l.state === 'Propagating');
      expect(propagating).toBeGreaterThanOrEqual(0);
      expect(log.slice(propagating).some((l) => l.state === 'InSync')).toBe(true);
      // kubelet's own delay, at syncFrequency 1s with the Watch strategy.
      expect(propagated.propagationSeconds as number).toBeGreaterThan(0);
      expect(propagated.propagationSeconds as number).toBeLessThan(30);

      const metrics = await agentMetrics(pod as V1Pod);
      expect(sample(metrics, 'config_sync_propagation_seconds_count')).toBe(1);
      expect(sample(metrics, 'config_sync_in_sync')).toBe(1);
      expect(await restartsOf(ns.admin, ns.name)).toBeUndefined();
      expect(log.some((l) => l.state === 'Drifted')).toBe(false);
    });
  });

  describe('many quick updates (the agent as UID 65532, kubelet making 0700 payload directories)', () => {
    it('never costs the agent its inotify watch, and it ends in sync on the last one', async () => {
      const pods = await webPodsInSync(ns.admin, ns.name, 2);
      // Each update follows the one before as soon as kubelet has delivered it (read from the
      // node's disk): 30 back-to-back ..data swaps, every one of them real.
      const volume = configVolumeOnNode(pods[0]);
      for (let i = 0; i < 30; i++) await patchAppYamlDelivered(ns.name, volume, `level: burst-${i}\n`);
      for (const pod of pods) {
        const metrics = await waitFor(
          async () => {
            const text = await agentMetrics(pod);
            const log = await agentLog(ns.name, pod.metadata?.name ?? '');
            const last = log.findLast((l) => l.target === 'app:/etc/app' && l.state);
            return last?.state === 'InSync' && sample(text, 'config_sync_in_sync') === 1 ? text : undefined;
          },
          {
            what: 'in sync after the burst',
            timeoutMs: 60_000,
            intervalMs: 500,
            onTimeout: () => agentLogTail(ns.name, pod.metadata?.name ?? ''),
          },
        );
        expect(sample(metrics, 'config_sync_file_watch_polling')).toBe(0);
        const log = await agentLog(ns.name, pod.metadata?.name ?? '');
        expect(log.filter((l) => String(l.msg).startsWith('inotify refused'))).toEqual([]);
      }
      expect(await restartsOf(ns.admin, ns.name)).toBeUndefined();
    });
  });

  describe('kubectl exec into the sidecar', () => {
    it('runs `config-sync heal --dry-run` as the README says, and it finds nothing to do', async () => {
      const [pod] = await webPodsInSync(ns.admin, ns.name, 2);
      const out = await kubectl(
        '-n',
        ns.name,
        'exec',
        pod?.metadata?.name ?? '',
        '-c',
        'config-sync',
        '--',
        'config-sync',
        'heal',
        '--dry-run',
      );
      expect(out).toMatch(/nothing to do|in sync/i);
    });
  });

  describe('a subPath key changed', () => {
    it('three replicas, exactly one restart, and the new Pods InSync', async () => {
      await scaleWeb(ns.name, 3);
      const before = await webPodsInSync(ns.admin, ns.name, 3);
      await patchConfig(ns.name, { 'log.yaml': 'format: text\n' });

      const after = await webPodsReplaced(
        ns.admin,
        ns.name,
        before,
        'the rollout to replace every Pod with one InSync',
        150_000,
      );
      expect(after.every((p) => inSync(p) === 'True')).toBe(true);
      expect(await restartsOf(ns.admin, ns.name)).toBeDefined();

      const events = await eventsOf(ns.admin, ns.name);
      const healed = events.filter((e) => e.reason === 'Healed');
      expect(healed).toHaveLength(1);
      expect(healed[0]?.message).toMatch(/SubPathStale/);
      expect(events.some((e) => e.reason === 'Drifted' && /subPath/.test(e.message))).toBe(true);
      // One restart: one new ReplicaSet beside the first.
      const rs = await kubectl('-n', ns.name, 'get', 'replicasets', '-o', 'name');
      expect(rs.trim().split('\n')).toHaveLength(2);
    });
  });

  describe('a Pod with an fsGroup (kubelet chowns the whole volume before every swap)', () => {
    const grouped = useExample('e2e-fsgroup');
    it('an update costs the shipped agent two passes, not one for each entry kubelet chowns', async () => {
      // 40 keys more in the volume: kubelet's ownership walk chowns and chmods each entry (and
      // its link) before the swap; each of those events used to wake a pass.
      const extra = Object.fromEntries(
        Array.from({ length: 40 }, (_, k) => [`extra-${k}.yaml`, `n: ${k}\n`]),
      );
      await patchConfig(grouped.name, extra);
      const patch = [
        { op: 'add', path: '/spec/template/spec/securityContext/fsGroup', value: 65532 },
        { op: 'replace', path: '/spec/replicas', value: 1 },
      ];
      await patchWebAndRollOut(grouped.name, patch);
      const [pod] = await webPodsInSync(grouped.admin, grouped.name, 1);
      expect(pod?.spec?.securityContext?.fsGroup).toBe(65532);
      const delivered = configVolumeOnNode(pod);
      // What makes this case: kubelet applied the fsGroup to the volume it mounts.
      expect(fs.statSync(path.join(delivered, 'extra-0.yaml')).gid).toBe(65532);

      // The agent's passes that checked web-config (each pass checks every source once).
      const passes = async () => {
        const count = sample(await agentMetrics(pod as V1Pod), 'config_sync_checks_total', {
          kind: 'ConfigMap',
          name: 'web-config',
        });
        if (count === undefined) throw new Error('no config_sync_checks_total for web-config in /metrics');
        return count;
      };
      const settled = () =>
        waitForSteady(passes, { what: 'the agent to make no more passes', quietMs: 2000, timeoutMs: 30_000 });
      // Per update, two passes: the API's change and kubelet's swap, in either order; one more
      // in all is allowed for a pass of the agent's own timing (a retry, a resync) landing in
      // the window. Before the walk's events were told apart from the swap (4b393cf), each woke
      // a pass: 3 to 5 per update here (those arriving during a pass make one more between them),
      // 16 to 18 for the four.
      const perUpdate: number[] = [];
      let before = await settled();
      for (let i = 0; i < 4; i++) {
        await patchAppYamlDelivered(grouped.name, delivered, `level: grouped-${i}\n`);
        const after = await settled();
        perUpdate.push(after - before);
        before = after;
      }
      const total = perUpdate.reduce((a, b) => a + b, 0);
      expect(total, `passes per update: ${perUpdate.join(', ')}`).toBeLessThanOrEqual(
        2 * perUpdate.length + 1,
      );
    });
  });

  describe("the workload's own say (annotations on its Pod template)", () => {
    const said = useExample('e2e-annotated');
    it('on-drift alert-only: a subPath change is reported by every sidecar, and nothing restarts', async () => {
      await patchWebAndRollOut(said.name, [
        {
          op: 'add',
          path: '/spec/template/metadata/annotations',
          value: { 'config-sync.io/on-drift': 'alert-only' },
        },
      ]);
      const pods = await webPodsInSync(said.admin, said.name, 2);
      const generation = await restartsOf(said.admin, said.name);
      await patchConfig(said.name, { 'log.yaml': 'format: said\n' });
      for (const pod of pods) {
        const name = pod.metadata?.name ?? '';
        const alert = await waitFor(
          async () => (await agentLog(said.name, name)).find((l) => l.msg === 'not restarting: AlertOnly'),
          {
            what: `${name}'s alert-only decision`,
            timeoutMs: 60_000,
            intervalMs: 500,
            onTimeout: () => agentLogTail(said.name, name),
          },
        );
        expect(String(alert.reasons)).toContain(
          'not restarting: config-sync.io/on-drift=alert-only on the Pod',
        );
        const start = (await agentLog(said.name, name)).filter((l) => l.selection === true);
        expect(start.map((l) => l.msg)).toEqual(['on-drift alert-only, from config-sync.io/on-drift']);
      }
      const events = await eventsOf(said.admin, said.name);
      expect(events.some((e) => e.reason === 'Drifted' && /SubPathStale/.test(e.message))).toBe(true);
      expect(events.some((e) => e.reason === 'Healed')).toBe(false);
      expect(await restartsOf(said.admin, said.name)).toBe(generation);
    });
  });

  describe('with the readiness gate', () => {
    const gated = useExample('e2e-gate');
    it('a Pod is Ready only once InSync; a subPath change is healed once and the rollout completes', async () => {
      const patch = [
        {
          op: 'add',
          path: '/spec/template/spec/readinessGates',
          value: [{ conditionType: 'config-sync.io/InSync' }],
        },
      ];
      // rollout status waits for Ready, which the gate holds until the agent writes InSync=True.
      await patchWebAndRollOut(gated.name, patch);
      const before = await webPodsInSync(gated.admin, gated.name, 2);
      for (const p of before) {
        expect(p.spec?.readinessGates).toEqual([{ conditionType: 'config-sync.io/InSync' }]);
        expect(p.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      }
      await patchConfig(gated.name, { 'log.yaml': 'format: gated\n' });
      await waitFor(
        async () =>
          (await eventsOf(gated.admin, gated.name)).some((e) => e.reason === 'Healed') ? true : undefined,
        { what: 'the Healed Event', timeoutMs: 60_000, intervalMs: 500 },
      );
      await kubectl('-n', gated.name, 'rollout', 'status', 'deployment/web', '--timeout=120s');
      const after = await webPodsReplaced(gated.admin, gated.name, before, 'the new Pods InSync', 120_000);
      for (const p of after)
        expect(p.status?.conditions?.find((c) => c.type === 'Ready')?.status).toBe('True');
      expect((await eventsOf(gated.admin, gated.name)).filter((e) => e.reason === 'Healed')).toHaveLength(1);
    });
  });
});
