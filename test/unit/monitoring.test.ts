// The shipped scrape configuration and the alert rules agree: the PodMonitor and the plain scrape
// config find every agent (the sidecar's container, the node agent's) on its metrics port and
// call its job what the rules ask for. Before, ConfigSyncAgentAbsent asked for a job no shipped
// manifest made, and so fired for ever.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { DEFAULT_SIDECAR, SIDECAR_NAME, sidecarContainer } from '../../src/inject/sidecar.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const read = (file: string) => parse(fs.readFileSync(path.join(root, file), 'utf8'));

interface Relabel {
  sourceLabels?: string[];
  source_labels?: string[];
  regex?: string;
  action?: string;
  targetLabel?: string;
  target_label?: string;
  replacement?: string;
}

const monitor = read('deploy/sidecar/monitoring/podmonitor.yaml') as {
  spec: { podMetricsEndpoints: { port: string; honorLabels: boolean; relabelings: Relabel[] }[] };
};
const scrape = read('deploy/sidecar/monitoring/scrape-config.yaml') as {
  job_name: string;
  honor_labels: boolean;
  relabel_configs: Relabel[];
};
const rules = read('deploy/sidecar/monitoring/alerts.rules.yaml') as {
  groups: { rules: { alert: string; expr: string }[] }[];
};

/** Whether a keep rule keeps a target with these source label values (Prometheus anchors the regex, joins with ;). */
function keeps(rule: Relabel, values: string[]): boolean {
  return new RegExp(`^(?:${rule.regex})$`).test(values.join(';'));
}

/** The node agent's container with a metrics port, and its Pods' component label, as deploy/node ships them. */
function nodeAgent(): { container: string; component: string } {
  const [ds] = parseAllDocuments(fs.readFileSync(path.join(root, 'deploy/node/daemonset.yaml'), 'utf8')).map(
    (d) => d.toJSON(),
  ) as {
    spec: {
      template: {
        metadata: { labels: Record<string, string> };
        spec: { containers: { name: string; ports?: { name: string }[] }[] };
      };
    };
  }[];
  const t = ds?.spec.template;
  const container = t?.spec.containers.find((c) => c.ports?.some((p) => p.name === 'metrics'));
  return {
    container: container?.name ?? '',
    component: t?.metadata.labels['app.kubernetes.io/component'] ?? '',
  };
}

describe('the shipped scrape configuration', () => {
  const jobs = new Set(
    rules.groups.flatMap((g) =>
      g.rules.flatMap((r) => [...r.expr.matchAll(/job="([^"]+)"/g)].map((m) => m[1])),
    ),
  );

  it('names the one job the alert rules ask for', () => {
    expect([...jobs]).toEqual(['config-sync']);
    const [endpoint] = monitor.spec.podMetricsEndpoints;
    expect(endpoint?.relabelings.find((r) => r.targetLabel === 'job')?.replacement).toBe('config-sync');
    expect(scrape.job_name).toBe('config-sync');
  });

  it("finds the sidecar's container and the node agent's on their metrics port, and nothing else", () => {
    const sidecar = sidecarContainer({ containers: [{ name: 'app' }] }, DEFAULT_SIDECAR);
    expect(sidecar.ports?.map((p) => p.name)).toContain('metrics');
    const node = nodeAgent();
    const [endpoint] = monitor.spec.podMetricsEndpoints;
    expect(endpoint?.port).toBe('metrics');
    for (const keep of [
      endpoint?.relabelings.find((r) => r.action === 'keep') as Relabel,
      scrape.relabel_configs.find((r) => r.action === 'keep') as Relabel,
    ]) {
      expect(keeps(keep, [SIDECAR_NAME, ''])).toBe(true);
      expect(keeps(keep, [SIDECAR_NAME, 'web'])).toBe(true);
      expect(keeps(keep, [node.container, node.component])).toBe(true);
      expect(keeps(keep, ['app', ''])).toBe(false);
      expect(keeps(keep, [node.container, ''])).toBe(false); // a container named node in another app
    }
    // The two say the same: the plain config's keep is the PodMonitor's, and it keeps the port too.
    expect(scrape.relabel_configs[0]?.source_labels).toEqual(endpoint?.relabelings[0]?.sourceLabels);
    expect(scrape.relabel_configs[0]?.regex).toBe(endpoint?.relabelings[0]?.regex);
    expect(keeps(scrape.relabel_configs[1] as Relabel, ['metrics'])).toBe(true);
    // The node agent's series carry its served Pods' namespace: kept as scraped.
    expect(endpoint?.honorLabels).toBe(true);
    expect(scrape.honor_labels).toBe(true);
  });
});
