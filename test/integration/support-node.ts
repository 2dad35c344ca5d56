// A node agent for the integration tests, on a node with no kubelet (test/cluster/node-sim.ts):
// its identity as deploy/node ships it (the ServiceAccount config-sync/config-sync-node, the
// ClusterRole bound in each namespace it serves, the admission policies), a token bound to a
// Pod of its own on the simulated node (so the API server puts that node in its requests'
// userInfo.extra, which the policy checks), kubelet's directory for the Pods the test places,
// and the `config-sync node` process, through the test's own proxy so that every request it
// makes is recorded. Cluster-scoped objects the files would share differently (the ClusterRole
// naming the namespaces it serves) get a name of the caller's own: the files run in parallel.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CoreV1Api, type KubeConfig, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { ApiProxy } from '../cluster/api-proxy.ts';
import { AgentProcess, root } from '../cluster/app.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { layInClusterDir, podEnv } from '../cluster/in-cluster.ts';
import { bindPod, createSimNode, layKubeletDirs, markRunning } from '../cluster/node-sim.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { controlPlane } from './support.ts';

export const AGENT_NS = 'config-sync';

/** The shipped manifests of deploy/node, by kind and name. */
export function shipped(kind: string, name: string): Record<string, unknown> {
  const dir = path.join(root, 'deploy/node');
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.yaml'))) {
    for (const doc of parseAllDocuments(fs.readFileSync(path.join(dir, file), 'utf8'))) {
      const o = doc.toJS() as { kind?: string; metadata?: { name?: string } };
      if (o?.kind === kind && o.metadata?.name === name) return o as Record<string, unknown>;
    }
  }
  throw new Error(`deploy/node has no ${kind} ${name}`);
}

function kubectlApply(objects: unknown[]): void {
  const res = spawnSync(
    controlPlane().kubectl,
    ['--kubeconfig', controlPlane().adminKubeconfig, 'apply', '--server-side', '-f', '-'],
    { input: objects.map((o) => JSON.stringify(o)).join('\n'), encoding: 'utf8' },
  );
  if (res.status !== 0) throw new Error(`kubectl apply: ${res.stderr}`);
}

export interface SimNodeAgent {
  readonly node: string;
  readonly token: string;
  readonly kubeletRoot: string;
  readonly stateDir: string;
  readonly proxy: ApiProxy;
  /** Binds a created Pod to the node (or `node`), sets it Running (started now) and lays out its kubelet dir. */
  place(namespace: string, pod: string, node?: string): Promise<V1Pod>;
  /** Starts `config-sync node` for `namespaces`, through the proxy. */
  start(args?: string[]): AgentProcess;
  /** Removes what it made outside the namespaces. */
  remove(): Promise<void>;
}

export async function simNodeAgent(
  admin: KubeConfig,
  namespaces: readonly string[],
  label: string,
): Promise<SimNodeAgent> {
  const core = admin.makeApiClient(CoreV1Api);
  const rbac = admin.makeApiClient(RbacAuthorizationV1Api);
  const suffix = Math.random().toString(36).slice(2, 7);
  const node = `sim-${label}-${suffix}`;
  await createSimNode(admin, node);
  await core.createNamespace({ body: { metadata: { name: AGENT_NS } } }).catch(() => {});
  const namespacesRole = `config-sync-node-namespaces-${suffix}`;
  const role = shipped('ClusterRole', 'config-sync-node-namespaces') as {
    metadata: { name: string };
    rules: { resourceNames: string[] }[];
  };
  role.metadata.name = namespacesRole;
  for (const rule of role.rules) rule.resourceNames = [...namespaces];
  const roleBinding = shipped('ClusterRoleBinding', 'config-sync-node-namespaces') as {
    metadata: { name: string };
    roleRef: { name: string };
  };
  roleBinding.metadata.name = namespacesRole;
  roleBinding.roleRef.name = namespacesRole;
  kubectlApply([
    shipped('ServiceAccount', 'config-sync-node'),
    shipped('ClusterRole', 'config-sync-node'),
    role,
    roleBinding,
    shipped('ValidatingAdmissionPolicy', 'config-sync-node-pods'),
    shipped('ValidatingAdmissionPolicyBinding', 'config-sync-node-pods'),
    shipped('ValidatingAdmissionPolicy', 'config-sync-node-restart-only'),
    shipped('ValidatingAdmissionPolicyBinding', 'config-sync-node-restart-only'),
  ]);
  const binding = shipped('RoleBinding', 'config-sync-node') as { metadata: { namespace: string } };
  for (const ns of namespaces)
    await rbac
      .createNamespacedRoleBinding({
        namespace: ns,
        body: { ...binding, metadata: { ...binding.metadata, namespace: ns } } as never,
      })
      .catch((error: { code?: number }) => {
        // Made by an earlier node agent of the same file.
        if (error.code !== 409) throw error;
      });
  const agentPod = `config-sync-node-${suffix}`;
  await core.createNamespacedPod({
    namespace: AGENT_NS,
    body: {
      metadata: { name: agentPod },
      spec: {
        nodeName: node,
        serviceAccountName: 'config-sync-node',
        automountServiceAccountToken: false,
        containers: [{ name: 'node', image: 'config-sync.invalid/agent:never-pulled' }],
      },
    },
  });
  const created = await core.readNamespacedPod({ name: agentPod, namespace: AGENT_NS });
  const { token } = await createServiceAccountIdentity(admin, {
    namespace: AGENT_NS,
    name: 'config-sync-node',
    existingServiceAccount: true,
    bindToPod: { name: agentPod, uid: created.metadata?.uid ?? '' },
  });
  const kubeletRoot = tempDir('node-kubelet-');
  const stateDir = tempDir('node-state-');
  const proxy = await ApiProxy.start(controlPlane());
  return {
    node,
    token,
    kubeletRoot,
    stateDir,
    proxy,
    async place(namespace, name, onNode = node) {
      await bindPod(admin, namespace, name, onNode);
      const bound = await core.readNamespacedPod({ name, namespace });
      // Its containers started now, after its ConfigMaps and Secrets were made: what they got at
      // their start is the objects' current version (an env target's start decides what it holds).
      markRunning(controlPlane(), namespace, bound, new Date());
      await layKubeletDirs(admin, kubeletRoot, bound);
      return bound;
    },
    start(args = []) {
      const layout = layInClusterDir(tempDir('node-agent-'), controlPlane(), { token, namespace: AGENT_NS });
      return AgentProcess.startCommand(
        'node',
        {
          ...podEnv(layout, AGENT_NS, agentPod),
          ...proxy.env,
          NODE_NAME: node,
          CONFIG_SYNC_NAMESPACES: namespaces.join(','),
          CONFIG_SYNC_KUBELET_ROOT: kubeletRoot,
          CONFIG_SYNC_STATE_DIR: stateDir,
        },
        args,
      );
    },
    async remove() {
      await proxy.stop();
      await core.deleteNode({ name: node }).catch(() => {});
      await core.deleteNamespacedPod({ name: agentPod, namespace: AGENT_NS }).catch(() => {});
      await rbac.deleteClusterRoleBinding({ name: namespacesRole }).catch(() => {});
      await rbac.deleteClusterRole({ name: namespacesRole }).catch(() => {});
    },
  };
}
