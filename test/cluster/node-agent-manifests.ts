// deploy/node as `kubectl kustomize` renders it, set up for a test node and its namespaces (the
// e2e tests and the bench apply it so): CONFIG_SYNC_NAMESPACES and a RoleBinding in each, the
// namespaces' ClusterRole naming them, kubelet's root dir (the harness's, where the base says
// /var/lib/kubelet) and a state dir under the node's base directory, plus any environment.
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { root } from './app.ts';
import type { ControlPlaneInfo } from './control-plane.ts';
import { NODE_BASE } from './node.ts';

// biome-ignore lint/suspicious/noExplicitAny: manifests are edited as plain JSON
type Manifest = Record<string, any>;

export function nodeAgentManifests(
  plane: ControlPlaneInfo,
  namespaces: readonly string[],
  env: Readonly<Record<string, string>> = {},
): Manifest[] {
  const rendered = execFileSync(
    plane.kubectl,
    ['--kubeconfig', plane.adminKubeconfig, 'kustomize', path.join(root, 'deploy/node')],
    { encoding: 'utf8' },
  );
  const out: Manifest[] = [];
  for (const doc of parseAllDocuments(rendered).map((d) => d.toJS() as Manifest)) {
    if (doc.kind === 'RoleBinding') {
      for (const ns of namespaces) out.push({ ...doc, metadata: { ...doc.metadata, namespace: ns } });
      continue;
    }
    if (doc.kind === 'ClusterRole' && doc.metadata.name === 'config-sync-node-namespaces')
      for (const rule of doc.rules) rule.resourceNames = [...namespaces];
    if (doc.kind === 'DaemonSet') {
      const c = doc.spec.template.spec.containers[0];
      const extra = { CONFIG_SYNC_NAMESPACES: namespaces.join(','), ...env };
      c.env = [
        ...c.env.filter((e: { name: string }) => !(e.name in extra)),
        ...Object.entries(extra).map(([name, value]) => ({ name, value })),
      ];
      for (const v of doc.spec.template.spec.volumes) {
        if (v.name === 'kubelet') v.hostPath.path = path.join(NODE_BASE, 'kubelet');
        if (v.name === 'state') v.hostPath.path = path.join(NODE_BASE, 'config-sync-state');
      }
    }
    out.push(doc);
  }
  return out;
}
