// Measures 3 to 5: start -> ready, idle RSS and CPU, and API requests at idle, of agents run as
// in a Pod, against a bare `node` HTTP server in the same window.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { atomicWrite, configMapPayload } from '../test/cluster/kubelet-volume.ts';
import { freeLoopbackPort } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/wait.ts';
import type { ProcessBench } from './lib/process-bench.ts';
import {
  apiRequestsByVerb,
  cpuSeconds,
  inPodEnv,
  processMemory,
  ready,
  spawnAgent,
} from './lib/processes.ts';
import { idleSeconds, only, sidecarEnv, work } from './lib/settings.ts';
import { fmt, log, memoryGoal, percentile, rows, signed } from './lib/table.ts';

/** A log line of the agent, with when this process read it (performance.now()). */
export interface TimedLine {
  readonly at: number;
  readonly line: Record<string, unknown>;
}

/**
 * Starts the in-cluster agent, a bare `node` server, an agent on the admin kubeconfig and a busy
 * agent (--resync 1s), and measures the idle rows (when BENCH_ONLY names idle); the others are
 * stopped, and the in-cluster agent, InSync, is handed on with its log lines for measures 6 and 7.
 */
export async function idleRows({ core, plane, namespace, layout, agentArgs }: ProcessBench): Promise<{
  agent: ReturnType<typeof spawn>;
  lines: TimedLine[];
}> {
  const agentPort = await freeLoopbackPort();
  const barePort = await freeLoopbackPort();
  const t0 = performance.now();
  const agent = spawn(process.execPath, agentArgs(agentPort), {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: {
      PATH: process.env.PATH ?? '',
      ...sidecarEnv,
      ...inPodEnv(layout, work, namespace),
    },
  });
  await ready(agentPort);
  const agentStart = performance.now() - t0;
  const t1 = performance.now();
  const bare = spawn(
    process.execPath,
    ['-e', `require('http').createServer((q,s)=>s.end('ok')).listen(${barePort},'127.0.0.1')`],
    { stdio: 'ignore', env: { PATH: process.env.PATH ?? '', ...sidecarEnv } },
  );
  await ready(barePort);
  const bareStart = performance.now() - t1;
  const offClusterPort = await freeLoopbackPort();
  const offCluster = spawn(
    process.execPath,
    [...agentArgs(offClusterPort), '--kubeconfig', plane.info.adminKubeconfig, '--namespace', namespace],
    {
      stdio: 'ignore',
      env: { PATH: process.env.PATH ?? '', ...sidecarEnv, HOME: work },
    },
  );
  await ready(offClusterPort);
  // The same agent in a Pod after an hour's work: every full compare (--resync, 60 s by default)
  // runs the pass over all files, and what runs often enough is compiled again by V8's
  // optimizing compilers, whose code and the binary's pages stay resident. A second in-cluster
  // agent compares every second through the idle window, so the window holds as many
  // compares as an hour at the default (for the default 60 s window).
  const busyPort = await freeLoopbackPort();
  const busy = spawn(process.execPath, [...agentArgs(busyPort), '--resync', '1s'], {
    stdio: 'ignore',
    env: {
      PATH: process.env.PATH ?? '',
      ...sidecarEnv,
      ...inPodEnv(layout, work, namespace),
    },
  });
  await ready(busyPort);
  // Measured whatever BENCH_ONLY says (the other rows need these agents started), reported with
  // the idle rows, whose group it belongs to.
  if (only('idle'))
    rows.push({
      what: 'start -> ready',
      ours: `${fmt(agentStart, 0)} ms`,
      baseline: `bare node ${fmt(bareStart, 0)} ms`,
      relation: `${signed(agentStart - bareStart, 0)} ms`,
      target: '<= bare + 300 ms',
      ok: agentStart - bareStart <= 300,
    });

  const lines: TimedLine[] = [];
  createInterface({ input: agent.stdout }).on('line', (l) => {
    try {
      lines.push({ at: performance.now(), line: JSON.parse(l) as Record<string, unknown> });
    } catch {
      // not JSON
    }
  });
  const metricsText = async () => (await fetch(`http://127.0.0.1:${agentPort}/metrics`)).text();
  /** The agent's API requests so far: watch requests, and all the others. */
  const requestsOf = async () => {
    const byVerb = apiRequestsByVerb(await metricsText());
    return {
      watches: byVerb.watch ?? 0,
      others: Object.entries(byVerb)
        .filter(([verb]) => verb !== 'watch')
        .reduce((n, [, count]) => n + count, 0),
    };
  };

  await waitFor(() => lines.find((l) => l.line.state === 'InSync'), { what: 'the agent InSync' });
  if (only('idle')) {
    // The same agent after its config changed: ten updates of a 1 MiB ConfigMap (100 keys),
    // each made in the API and then on disk, before the idle window. What an update leaves
    // behind (heap grown for its events, code the update path had compiled) stays resident.
    const bigData = (tag: string) => {
      const d: Record<string, string> = {};
      for (let i = 0; i < 100; i += 1) {
        const head = `${tag} ${i}\n`;
        d[`key-${String(i).padStart(3, '0')}.yaml`] = head + 'x'.repeat(10_480 - head.length);
      }
      return d;
    };
    const bigDir = path.join(work, 'mount-big/etc/app');
    fs.mkdirSync(bigDir, { recursive: true });
    atomicWrite(bigDir, configMapPayload({ data: bigData('v0') }));
    await core.createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'big' }, data: bigData('v0') },
    });
    const updatedPort = await freeLoopbackPort();
    const updated = spawnAgent(
      agentArgs(updatedPort, '/etc/app=configmap/big', path.join(work, 'mount-big')),
      inPodEnv(layout, work, namespace),
    );
    await ready(updatedPort);
    await waitFor(() => updated.lines.find((l) => l.state === 'InSync'), {
      what: 'the updated agent InSync',
    });
    const updates = 10;
    for (let u = 1; u <= updates; u += 1) {
      const content = bigData(`v${u}`);
      const seen = updated.lines.length;
      await core.replaceNamespacedConfigMap({
        name: 'big',
        namespace,
        body: { metadata: { name: 'big' }, data: content },
      });
      const propagating = await waitFor(
        () => {
          const at = updated.lines.findIndex((l, k) => k >= seen && l.state === 'Propagating');
          return at >= 0 ? at : undefined;
        },
        { what: `update ${u} of the 1 MiB ConfigMap seen in the API` },
      );
      atomicWrite(bigDir, configMapPayload({ data: content }));
      await waitFor(() => updated.lines.slice(propagating).find((l) => l.state === 'InSync'), {
        what: `update ${u} of the 1 MiB ConfigMap seen on disk`,
      });
    }
    log(`idle for ${idleSeconds}s`);
    // The agent's API requests are read from its /metrics before the window's CPU and after
    // it: a scrape is work, not idleness (the bare node is never scraped), and its own cost
    // has a row of its own below.
    const requestsBefore = await requestsOf();
    const before = {
      agent: cpuSeconds(agent.pid as number),
      bare: cpuSeconds(bare.pid as number),
    };
    const idleStart = Date.now();
    await waitFor(() => (Date.now() - idleStart >= idleSeconds * 1000 ? true : undefined), {
      what: 'the idle window',
      timeoutMs: idleSeconds * 1000 + 5000,
      intervalMs: 500,
    });
    const after = {
      agent: cpuSeconds(agent.pid as number),
      bare: cpuSeconds(bare.pid as number),
    };
    const requestsAfter = await requestsOf();
    const agentRss = processMemory(agent.pid as number);
    const bareRss = processMemory(bare.pid as number);
    const offClusterRss = processMemory(offCluster.pid as number).total;
    const busyRss = processMemory(busy.pid as number);
    const updatedRss = processMemory(updated.child.pid as number).total;
    updated.child.kill('SIGTERM');
    // What one Prometheus scrape costs the idle agent, read after its RSS above so that the RSS
    // rows hold the same two scrapes as before this row: its third to seventh scrapes (the
    // first compiles the path), CPU time from the request to the full answer, median of five.
    const scrapeMs: number[] = [];
    for (let i = 0; i < 5; i += 1) {
      const cpu0 = cpuSeconds(agent.pid as number);
      await metricsText();
      scrapeMs.push((cpuSeconds(agent.pid as number) - cpu0) * 1000);
    }
    const perScrapeMs = percentile(scrapeMs, 50);
    const compares = await fetch(`http://127.0.0.1:${busyPort}/metrics`)
      .then((r) => r.text())
      .then((t) => Number(/^config_sync_duration_seconds_count (\d+)/m.exec(t)?.[1] ?? Number.NaN));
    rows.push({
      what: 'idle RSS, in-cluster (as in a Pod)',
      ...memoryGoal(agentRss, bareRss, 'bare node'),
    });
    rows.push({
      what: `idle RSS, in-cluster, after ${compares} full compares`,
      ...memoryGoal(busyRss, bareRss, 'bare node'),
    });
    rows.push({
      what: `idle RSS, in-cluster, after ${updates} updates of a 1 MiB ConfigMap`,
      ours: `${fmt(updatedRss)} MiB`,
      baseline: `bare node ${fmt(bareRss.total)} MiB`,
      relation: `${signed(updatedRss - bareRss.total)} MiB`,
      target: '(report)',
      ok: true,
    });
    rows.push({
      what: 'idle RSS, from a kubeconfig',
      ours: `${fmt(offClusterRss)} MiB`,
      baseline: `bare node ${fmt(bareRss.total)} MiB`,
      relation: `${signed(offClusterRss - bareRss.total)} MiB`,
      target: '(report)',
      ok: true,
    });
    const pct = (s: number) => (s / idleSeconds) * 100;
    rows.push({
      what: `idle CPU over ${idleSeconds}s`,
      ours: `${fmt(pct(after.agent - before.agent), 2)} % of a core`,
      baseline: `bare node ${fmt(pct(after.bare - before.bare), 2)} %`,
      relation: `${signed(pct(after.agent - before.agent - (after.bare - before.bare)), 2)} %`,
      target: '<= 0.05 % (issue 13)',
      ok: pct(after.agent - before.agent) <= 0.05,
    });
    rows.push({
      what: 'CPU per /metrics scrape, idle agent',
      ours: `${fmt(perScrapeMs, 1)} ms`,
      baseline: '-',
      relation: `${fmt((perScrapeMs / 1000 / 30) * 100, 3)} % of a core at a 30 s scrape interval`,
      target: '(report)',
      ok: true,
    });
    const perHour = ((requestsAfter.others - requestsBefore.others) * 3600) / idleSeconds;
    const watchesInWindow = requestsAfter.watches - requestsBefore.watches;
    // With a Pod, the heartbeat adds its status write (one patch) every --heartbeat (15 m): 4 an
    // hour.
    rows.push({
      what: 'non-watch API requests per agent-hour, idle',
      ours: `${fmt(perHour, 0)} measured + 4 heartbeat writes`,
      baseline: '-',
      relation: `${fmt(perHour + 4, 0)} / h`,
      target: '<= 12 / h',
      ok: perHour + 4 <= 12,
    });
    // The watch of the agent's one source, resumed each time the server ends it: what every Pod
    // costs the API server at idle. A window shorter than a watch (5 to 10 minutes over HTTP/2)
    // may hold none; BENCH_IDLE_SECONDS=600 or more gives a figure.
    rows.push({
      what: `watch requests in the idle window (${idleSeconds}s), one source`,
      ours: `${watchesInWindow}`,
      baseline: '-',
      relation: `${fmt((watchesInWindow * 3600) / idleSeconds, 0)} / h`,
      target: '(report)',
      ok: true,
    });
  }
  bare.kill();
  offCluster.kill('SIGTERM');
  busy.kill('SIGTERM');
  return { agent, lines };
}
