// Writes deploy/sidecar/monitoring/prometheus-rule.yaml from alerts.rules.yaml: the same groups,
// wrapped as a PrometheusRule for the Prometheus Operator. `npm run alerts:sync`.
import fs from 'node:fs';
import { parse, stringify } from 'yaml';

const dir = 'deploy/sidecar/monitoring';
const rules = parse(fs.readFileSync(`${dir}/alerts.rules.yaml`, 'utf8'));
const doc = {
  apiVersion: 'monitoring.coreos.com/v1',
  kind: 'PrometheusRule',
  metadata: { name: 'config-sync', labels: { 'app.kubernetes.io/name': 'config-sync' } },
  spec: rules,
};
fs.writeFileSync(
  `${dir}/prometheus-rule.yaml`,
  `# The rules of alerts.rules.yaml for the Prometheus Operator. Generated from that file; a test\n# fails when the two differ (regenerate: npm run alerts:sync).\n${stringify(doc, { lineWidth: 0 })}`,
);
