// Fifty replicas of one Deployment, one agent each, and one drift: exactly one restart. The
// other 49 find the restart already done (dedupe on the template's config hash), lose the
// conditional write (409) and re-read, or decide after the restart's rollout began deleting
// their own Pod (PodTerminating). The requests all of them sent are counted and printed: what
// one drift costs the API server at this scale.
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
} from './support-app.ts';

const REPLICAS = 50;
const running: AgentProcess[] = [];
afterAll(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

describe(`${REPLICAS} replicas drift together`, () => {
  const ns = useNamespace('fleet');

  it(`exactly one restart among ${REPLICAS} agents`, { timeout: 300_000 }, async () => {
    const pods: AppPod[] = await createApp(ns.admin, ns.name, REPLICAS);
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
    // A bound, not a target: about a dozen requests per agent (the quorum reads before acting,
    // the owner chain, the conditional patch or the dedupe read, the Events and the status).
    expect(total).toBeLessThan(REPLICAS * 20);
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
