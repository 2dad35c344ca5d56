// Copies into the Helm chart the files it shares with the kustomize bases, so the two stay one
// truth: the admission policies and the monitoring. test/unit/chart-files.test.ts fails when a
// copy differs from its source (run `npm run chart:sync`).
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const CHART_FILES = {
  'own-pod-policy.yaml': 'deploy/sidecar/rbac/own-pod-policy.yaml',
  'own-workload-policy.yaml': 'deploy/sidecar/rbac/own-workload-policy.yaml',
  'own-rollout-policy.yaml': 'deploy/sidecar/rbac/own-rollout-policy.yaml',
  'node-clusterrole.yaml': 'deploy/node/clusterrole.yaml',
  'node-pod-policy.yaml': 'deploy/node/node-pod-policy.yaml',
  'node-workload-policy.yaml': 'deploy/node/node-workload-policy.yaml',
  'prometheus-rule.yaml': 'deploy/sidecar/monitoring/prometheus-rule.yaml',
  'dashboard.json': 'deploy/sidecar/monitoring/dashboard.json',
  'podmonitor.yaml': 'deploy/sidecar/monitoring/podmonitor.yaml',
};

if (import.meta.url === `file://${process.argv[1]}`) {
  const dir = path.join(root, 'deploy/helm/config-sync/files');
  fs.mkdirSync(dir, { recursive: true });
  for (const [name, source] of Object.entries(CHART_FILES)) {
    fs.copyFileSync(path.join(root, source), path.join(dir, name));
    console.log(`${source} -> deploy/helm/config-sync/files/${name}`);
  }
}
