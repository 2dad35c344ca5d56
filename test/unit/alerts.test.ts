// The alert rules: valid for Prometheus, doing what their promtool unit tests say, and the same
// in the plain rule file and in the PrometheusRule.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { beforeAll, expect, it } from 'vitest';
import { parse } from 'yaml';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = path.join(root, 'deploy/sidecar/monitoring');
let promtool: string;

beforeAll(() => {
  // Debian's promtool, fetched once into the project cache (scripts/ensure-promtool.sh).
  promtool = execFileSync('bash', [path.join(root, 'scripts/ensure-promtool.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  }).trim();
}, 120_000);

it('promtool check rules accepts every rule', () => {
  const res = spawnSync(promtool, ['check', 'rules', 'alerts.rules.yaml'], { cwd: dir, encoding: 'utf8' });
  expect(res.stdout).toContain('SUCCESS: 7 rules found');
  expect(res.status).toBe(0);
});

it('promtool test rules: every alert fires when it should and not before', () => {
  const res = spawnSync(promtool, ['test', 'rules', 'alerts.test.yaml'], { cwd: dir, encoding: 'utf8' });
  expect(res.stdout + res.stderr).toContain('SUCCESS');
  expect(res.status).toBe(0);
});

it('the PrometheusRule carries exactly the rules of alerts.rules.yaml', () => {
  const rules = parse(fs.readFileSync(path.join(dir, 'alerts.rules.yaml'), 'utf8'));
  const crd = parse(fs.readFileSync(path.join(dir, 'prometheus-rule.yaml'), 'utf8'));
  expect(crd.kind).toBe('PrometheusRule');
  expect(crd.spec).toEqual(rules);
});

it('ships the runbook rule exactly as users have it', () => {
  const rules = parse(fs.readFileSync(path.join(dir, 'alerts.rules.yaml'), 'utf8'));
  const rule = rules.groups[0].rules.find((r: { alert: string }) => r.alert === 'ConfigHashMismatchHighRate');
  expect(rule).toMatchObject({
    expr: 'rate(config_hash_mismatch_total[1h]) > 0.05',
    for: '5m',
    labels: { severity: 'critical' },
  });
});

// Every metric an alert or a dashboard panel queries must be one the agent exports: a renamed
// metric must fail here, not silently empty a panel or an alert.
it('alerts and dashboard query only metrics the agent or the node agent exports', async () => {
  const { createMetrics } = await import('../../src/metrics/metrics.ts');
  const { createNodeMetrics } = await import('../../src/metrics/node-metrics.ts');
  const metrics = createNodeMetrics(createMetrics());
  const exported = new Set<string>();
  for (const m of await metrics.registry.getMetricsAsJSON()) {
    exported.add(m.name);
    if (String(m.type) === 'histogram') {
      for (const suffix of ['_bucket', '_sum', '_count']) exported.add(`${m.name}${suffix}`);
    }
  }
  const dashboard = JSON.parse(fs.readFileSync(path.join(dir, 'dashboard.json'), 'utf8')) as {
    panels: { targets: { expr: string }[] }[];
    templating: { list: { query?: string }[] };
  };
  const exprs = [
    ...dashboard.panels.flatMap((p) => p.targets.map((t) => t.expr)),
    ...dashboard.templating.list.map((v) => v.query ?? ''),
    ...parse(fs.readFileSync(path.join(dir, 'alerts.rules.yaml'), 'utf8')).groups[0].rules.map(
      (r: { expr: string }) => r.expr,
    ),
  ];
  const used = new Set(exprs.flatMap((e) => e.match(/\b(config_sync_\w+|config_hash_\w+)/g) ?? []));
  expect(used.size).toBeGreaterThan(8);
  expect([...used].filter((name) => !exported.has(name))).toEqual([]);
});
