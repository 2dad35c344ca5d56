// The policy gate on the real node: the example's agents ask a real OPA server (on the node's
// bridge address, which Pods reach; built from the Go module proxy) before they restart. The
// Deployment is labelled config-sync.io/frozen, so a subPath change that only a restart would
// apply is refused: a PolicyDenied Event and condition, and no restart.
import { type ChildProcess, spawn } from 'node:child_process';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { root } from '../cluster/app.ts';
import { buildTool } from '../cluster/assets.ts';
import { BRIDGE_MAC, bridgeMac, NODE_IP } from '../cluster/node.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { waitFor } from '../cluster/wait.ts';
import {
  agentLogTail,
  describeOnNode,
  eventsOf,
  inSyncCondition,
  kubectl,
  patchConfig,
  restartsOf,
  useExample,
  useNode,
  webPodsInSync,
} from './support.ts';

let opa: ChildProcess | undefined;
let policyUrl = '';

describeOnNode('the policy gate on a real node', () => {
  useNode();
  const ns = useExample('e2e-policy');

  beforeAll(async () => {
    const bin = await buildTool('opa');
    // A port free on loopback is free on the bridge address too: nothing else binds there.
    const port = await freeLoopbackPort();
    const policies = ['decision.rego', 'frozen.rego', 'max-restarts.rego'].map((f) =>
      path.join(root, 'deploy/policy', f),
    );
    opa = spawn(
      bin,
      ['run', '--server', '--addr', `${NODE_IP}:${port}`, '--log-level', 'error', ...policies],
      {
        stdio: 'ignore',
      },
    );
    await waitFor(
      async () => (await fetch(`http://${NODE_IP}:${port}/health`).catch(() => undefined))?.ok || undefined,
      { what: 'the OPA server on the bridge' },
    );
    policyUrl = `http://${NODE_IP}:${port}/v1/data/configsync/restart`;
  }, 900_000);

  afterAll(() => {
    opa?.kill('SIGTERM');
  });

  it('a frozen workload: the agents ask OPA, which refuses; a PolicyDenied Event and condition, no restart', async () => {
    const patch = [
      {
        op: 'replace',
        path: '/spec/template/spec/initContainers/0/args',
        value: ['agent', '--policy-url', policyUrl],
      },
    ];
    await kubectl('-n', ns.name, 'patch', 'deployment', 'web', '--type', 'json', '-p', JSON.stringify(patch));
    await kubectl('-n', ns.name, 'rollout', 'status', 'deployment/web', '--timeout=120s');
    // The Pods of the last rollout torn down, their veths gone from the bridge, and the node's
    // bridge still has its own address: the Pods that stay still reach the API and OPA through it.
    const core = ns.admin.makeApiClient(CoreV1Api);
    await waitFor(
      async () =>
        (await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' })).items.length === 2,
      { what: 'the Pods of the last rollout gone', timeoutMs: 120_000, intervalMs: 500 },
    );
    expect(bridgeMac()).toBe(BRIDGE_MAC);
    await kubectl('-n', ns.name, 'label', 'deployment', 'web', 'config-sync.io/frozen=true');
    const before = await webPodsInSync(ns.admin, ns.name, 2);
    const restartedBefore = await restartsOf(ns.admin, ns.name);

    // A subPath key: kubelet never updates it, only a restart would.
    await patchConfig(ns.name, { 'log.yaml': 'format: frozen\n' });
    const denied = await waitFor(
      async () => (await eventsOf(ns.admin, ns.name)).find((e) => e.reason === 'PolicyDenied'),
      { what: 'the PolicyDenied Event', timeoutMs: 60_000, intervalMs: 500 },
    );
    expect(denied.message).toContain(
      `policy ${policyUrl}: denied: Deployment web is frozen (label config-sync.io/frozen=true)`,
    );
    await waitFor(
      async () => {
        const pods = await Promise.all(
          before.map((p) => core.readNamespacedPod({ name: p.metadata?.name ?? '', namespace: ns.name })),
        );
        return pods.every((p) => {
          const c = inSyncCondition(p);
          return c?.status === 'False' && c.message?.includes('frozen');
        })
          ? true
          : undefined;
      },
      {
        what: 'both conditions False, naming the refusal',
        timeoutMs: 60_000,
        intervalMs: 500,
        // Each Pod's condition as last written and its agent's last lines: which one did not
        // name the refusal, and what its agent did instead.
        onTimeout: async () => {
          const said = await Promise.all(
            before.map(async (p) => {
              const name = p.metadata?.name ?? '';
              const c = inSyncCondition(await core.readNamespacedPod({ name, namespace: ns.name }));
              return `${name}: ${c?.status} ${c?.reason}: ${c?.message}\n${await agentLogTail(ns.name, name)}`;
            }),
          );
          return said.join('\n');
        },
      },
    );
    expect(await restartsOf(ns.admin, ns.name)).toBe(restartedBefore);
    expect((await eventsOf(ns.admin, ns.name)).some((e) => e.reason === 'Healed')).toBe(false);
  });
});
