import { defineConfig } from 'vitest/config';

// Three projects: `unit` is pure and fast (no cluster); `integration` talks to a real
// kube-apiserver that test/cluster/global-setup.ts starts once per run; `e2e` runs the shipped
// image in real Pods on a real node (test/e2e/global-setup.ts), after the other two, one file at
// a time (one node serves them all, and it is what the 2 cores are spent on).
// The JSON report feeds .ci/run's closing "N passed, N failed" line.
export default defineConfig({
  test: {
    reporters: ['default', ['json', { outputFile: 'reports/vitest.json' }]],
    projects: [
      {
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          // Without a groupOrder on every project, vitest runs them all in parallel.
          sequence: { groupOrder: 0 },
          testTimeout: 10_000,
        },
      },
      {
        test: {
          name: 'integration',
          include: ['test/integration/**/*.test.ts'],
          globalSetup: ['test/cluster/global-setup.ts'],
          sequence: { groupOrder: 0 },
          testTimeout: 60_000,
          hookTimeout: 120_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          globalSetup: ['test/e2e/global-setup.ts'],
          sequence: { groupOrder: 1 },
          fileParallelism: false,
          testTimeout: 180_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});
