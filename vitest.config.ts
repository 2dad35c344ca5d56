import { defineConfig } from 'vitest/config';

// Two projects: `unit` is pure and fast (no cluster); `integration` talks to a real
// kube-apiserver that test/cluster/global-setup.ts starts once per run.
// The JSON report feeds .ci/run's closing "N passed, N failed" line.
export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/cluster/global-setup.ts'],
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
    ],
  },
});
