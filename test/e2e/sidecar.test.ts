// The shipped image in real Pods: deploy/sidecar applied unmodified into a namespace under Pod
// Security `restricted`, kubelet propagating the ConfigMap itself, and the one change kubelet
// never delivers (a subPath key) healed by exactly one rollout restart across three replicas.
import fs from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { sample } from '../cluster/app.ts';
import { NODE_BASE } from '../cluster/node.ts';
import { waitFor } from '../cluster/wait.ts';
import {
  agentLog,
  agentMetrics,
  describeOnNode,
  eventsOf,
  inSync,
  kubectl,
  patchConfig,
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
        { what: 'the agent to see kubelet deliver the change', timeoutMs: 60_000, intervalMs: 500 },
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
      const delivered = path.join(
        NODE_BASE,
        'kubelet/pods',
        pods[0]?.metadata?.uid ?? '',
        'volumes/kubernetes.io~configmap/config/app.yaml',
      );
      for (let i = 0; i < 30; i++) {
        const content = `level: burst-${i}\n`;
        await patchConfig(ns.name, { 'app.yaml': content });
        await waitFor(
          async () =>
            (await fs.promises.readFile(delivered, 'utf8').catch(() => '')) === content || undefined,
          { what: `kubelet to deliver update ${i}`, timeoutMs: 30_000, intervalMs: 20 },
        );
      }
      for (const pod of pods) {
        const metrics = await waitFor(
          async () => {
            const text = await agentMetrics(pod);
            const log = await agentLog(ns.name, pod.metadata?.name ?? '');
            const last = log.findLast((l) => l.target === 'app:/etc/app' && l.state);
            return last?.state === 'InSync' && sample(text, 'config_sync_in_sync') === 1 ? text : undefined;
          },
          { what: 'in sync after the burst', timeoutMs: 60_000, intervalMs: 500 },
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
      await kubectl(
        '-n',
        gated.name,
        'patch',
        'deployment',
        'web',
        '--type',
        'json',
        '-p',
        JSON.stringify(patch),
      );
      // rollout status waits for Ready, which the gate holds until the agent writes InSync=True.
      await kubectl('-n', gated.name, 'rollout', 'status', 'deployment/web', '--timeout=120s');
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
