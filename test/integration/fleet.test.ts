// Fifty replicas of one Deployment, one agent each, and one drift: exactly one restart. Each
// agent decides at an offset of its own within a second past its window (heal/spread.ts), so
// the others mostly find the restart already done (dedupe on the template's config hash) with
// one read of the workload; a few that decide within a round trip of the first lose the
// conditional write and re-read. What one drift costs the API server at this scale is counted
// and held: at most 4 requests per agent (the confirming read, the workload, the status, and
// the restart's own few spread over all), and the Events of one Pod only.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  createApp,
  expectOneRestart,
  sample,
  updateConfig,
  webKeepingOldPods,
} from './support-app.ts';

const REPLICAS = 50;
const running: AgentProcess[] = [];
afterAll(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

describe(`${REPLICAS} replicas drift together`, () => {
  const ns = useNamespace('fleet');

  it(`exactly one restart among ${REPLICAS} agents`, { timeout: 300_000 }, async () => {
    const pods: AppPod[] = await createApp(ns.admin, ns.name, REPLICAS, webKeepingOldPods(REPLICAS));
    // --poll 2s (the default): 50 processes polling every 200 ms would be the test's own load.
    for (const p of pods) running.push(AgentProcess.start(p, ['--grace', '1s', '--poll', '2s']));
    await Promise.all(running.map((a) => a.waitFor((l) => l.state === 'InSync', 'InSync', 120_000)));
    const before = await requestTotals();

    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    await expectOneRestart(running, 120_000);

    // What the drift cost: every request of every agent from the change to its decision.
    const after = await waitFor(async () => requestTotals(), { what: 'the request counts' });
    const spent = Object.fromEntries(
      Object.entries(after).map(([verb, n]) => [verb, n - (before[verb] ?? 0)] as const),
    );
    const total = Object.values(spent).reduce((x, y) => x + y, 0);
    const conflicts = await Promise.all(
      running.map(
        async (a) =>
          sample(await a.metrics(), 'config_sync_heal_total', { action: 'restart', result: 'conflict' }) ?? 0,
      ),
    );
    console.log(
      `[fleet] ${REPLICAS} agents, one drift: 1 restart, ${conflicts.reduce((x, y) => x + y, 0)} conflicts re-read, ` +
        `${total} API requests (${Object.entries(spent)
          .map(([verb, n]) => `${verb} ${n}`)
          .join(', ')})`,
    );
    expect(total).toBeLessThanOrEqual(REPLICAS * 4);
    // The drift's Events: the restarting Pod's Drifted and Healed; the others' log lines,
    // metrics and InSync conditions say it, not 98 Events more.
    const told = (await ns.admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns.name })).items
      .filter((e) => e.source?.component === 'config-sync')
      .map((e) => `${e.involvedObject.name} ${e.reason}`);
    const restarter = pods[running.findIndex((a) => a.lines.some((l) => l.msg === 'restarted workload'))];
    expect(told.sort()).toEqual([`${restarter?.name} Drifted`, `${restarter?.name} Healed`]);
  });
});

async function requestTotals(): Promise<Record<string, number>> {
  const totals: Record<string, number> = {};
  for (const a of running) {
    const text = await a.metrics();
    for (const verb of ['get', 'list', 'watch', 'patch', 'create']) {
      totals[verb] = (totals[verb] ?? 0) + (sample(text, 'config_sync_api_requests_total', { verb }) ?? 0);
    }
  }
  return totals;
}
