// The Helm chart and the kustomize bases are one truth: the files the chart shares with them
// (the admission policies, the alert rules, the dashboard) are byte-for-byte copies.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain .mjs script, typed below
import { CHART_FILES as chartFiles } from '../../scripts/sync-chart.mjs';

const CHART_FILES = chartFiles as Record<string, string>;

const root = path.resolve(import.meta.dirname, '../..');

describe('deploy/helm/config-sync/files', () => {
  it.each(Object.entries(CHART_FILES))('%s is %s (npm run chart:sync)', (name, source) => {
    expect(fs.readFileSync(path.join(root, 'deploy/helm/config-sync/files', name), 'utf8')).toBe(
      fs.readFileSync(path.join(root, source), 'utf8'),
    );
  });

  it('holds nothing else', () => {
    expect(fs.readdirSync(path.join(root, 'deploy/helm/config-sync/files')).sort()).toEqual(
      Object.keys(CHART_FILES).sort(),
    );
  });
});
