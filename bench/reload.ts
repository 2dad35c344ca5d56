// Measure 8: reload mode, kubelet's `..data` swap -> the app's reload POST, against a bare
// inotify -> POST process on the same swap.

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { startKubeletWriter } from '../test/cluster/kubelet-writer.ts';
import { fromMonotonicNs } from '../test/cluster/monotonic.ts';
import { freeLoopbackPort } from '../test/cluster/ports.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { agentProfile } from './lib/agent-profile.ts';
import { Arrivals } from './lib/arrivals.ts';
import type { ProcessBench } from './lib/process-bench.ts';
import {
  cpuSeconds,
  inPodEnv,
  mainThreadWaitSeconds,
  metricsOf,
  passesOf,
  passesRow,
  perSampleMs,
  ready,
  spawnAgent,
} from './lib/processes.ts';
import {
  CPU_PROF_OPTIONS,
  cpuProfDir,
  latencySamples,
  reloadKeys,
  sidecarEnv,
  work,
} from './lib/settings.ts';
import { latencyRow, perChangeRow, rows } from './lib/table.ts';

// What a user of reload mode sees: from kubelet's swap to the app's reload endpoint being
// called. kubelet's own AtomicWriter writes the volume (test/cluster/go/kubelet-writer, in
// a process of its own, as kubelet is), so the agent sees kubelet's events at kubelet's
// speed. Twice: as for a Pod without an fsGroup, and with one, for which kubelet chowns and
// chmods every file of the volume just before the swap. The baseline does the same job
// with nothing but inotify: bench/baselines/raw-reload.mjs, a bare `node` process of its
// own like the agent, POSTs on every `..data` swap of the same directory (what
// configmap-reload does), to the same app. So both figures include a process waking up, an
// HTTP request and the app's own event loop, and each sample pairs the two on the same
// swap. Each change: the API first (the agent waits, Propagating), then the swap. Changes
// are spaced past --reload-settle (200 ms here: the settle time only tells a burst from an
// isolated change, and each change here is an isolated one, reloaded at once), so 300
// samples fit in a minute and a half and p99 is not simply the slowest.
export async function reloadRows({
  core,
  namespace,
  data,
  mount,
  layout,
  agentArgs,
}: ProcessBench): Promise<void> {
  const kubelet = await startKubeletWriter();
  const reloadData = Object.fromEntries(Object.entries(data).slice(0, reloadKeys));
  const keysNamed = `${reloadKeys} key${reloadKeys === 1 ? '' : 's'}`;
  // Each variant: its label in the rows, its volume's directory, what kubelet's writer is told.
  const variants = [
    { variant: '', mountName: 'reload-mount', writeAs: {} },
    { variant: ', fsGroup', mountName: 'reload-mount-2000', writeAs: { fsGroup: 2000 } },
  ];
  for (const { variant, mountName, writeAs } of variants) {
    const reloadMount = path.join(work, mountName);
    const reloadDir = path.join(reloadMount, 'etc/app');
    fs.mkdirSync(reloadDir, { recursive: true });
    const update = (files: Record<string, string>) => kubelet.write(reloadDir, { files, ...writeAs });
    await update(reloadData);
    await core.replaceNamespacedConfigMap({
      name: 'app',
      namespace,
      body: { metadata: { name: 'app' }, data: reloadData },
    });
    // The app runs in a process of its own (bench/reload-app.mjs), as in a Pod. Its stamps
    // are process.hrtime (ns), the clock kubelet-writer stamps too.
    const posts: Record<string, number> = {};
    const postArrivals = new Arrivals();
    const reloadApp = spawn(process.execPath, [path.join(import.meta.dirname, 'reload-app.mjs')], {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { PATH: process.env.PATH ?? '' },
    });
    const appPort = new Promise<number>((resolve) => {
      createInterface({ input: reloadApp.stdout as NodeJS.ReadableStream }).on('line', (l) => {
        const line = JSON.parse(l) as { port?: number; url?: string; atNs?: string };
        if (line.port !== undefined) resolve(line.port);
        if (line.url === undefined || line.atNs === undefined) return;
        posts[line.url] ||= fromMonotonicNs(line.atNs);
        postArrivals.poke();
      });
    });
    const serverUrl = `http://127.0.0.1:${await appPort}`;
    const reloadPort = await freeLoopbackPort();
    const profiled = cpuProfDir ? fs.mkdtempSync(path.join(work, 'cpu-prof-')) : undefined;
    const { child: reloader, lines: reloadLines } = spawnAgent(
      [
        ...agentArgs(reloadPort).map((a) => (a === mount ? reloadMount : a)),
        '--on-drift',
        'reload',
        '--reload-url',
        `${serverUrl}/agent`,
        '--reload-settle',
        '200ms',
      ],
      {
        ...inPodEnv(layout, work, namespace),
        ...(profiled
          ? { NODE_OPTIONS: `${sidecarEnv.NODE_OPTIONS ?? ''} ${CPU_PROF_OPTIONS}${profiled}` }
          : {}),
      },
    );
    const rawReloader = spawn(
      process.execPath,
      [path.join(import.meta.dirname, 'baselines/raw-reload.mjs'), reloadDir, `${serverUrl}/raw`],
      {
        stdio: ['ignore', 'pipe', 'inherit'],
        env: { PATH: process.env.PATH ?? '', ...sidecarEnv },
      },
    );
    await new Promise((resolve) => rawReloader.stdout.once('data', resolve));
    await ready(reloadPort);
    await waitFor(() => reloadLines.find((l) => l.state === 'InSync'), {
      what: 'the reload agent InSync',
    });
    const postLatency: number[] = [];
    const rawPostLatency: number[] = [];
    // CPU, and the main thread's wait for a core, over the samples, per update: the agent's
    // include its pass on the API's change (Propagating) and its hashing while the files are
    // written, the baseline's only its wake-up and POST.
    const pids = { agent: reloader.pid as number, raw: rawReloader.pid as number };
    // Read before the CPU counters start: a scrape is work of the agent's too.
    const reloaderMetrics = `http://127.0.0.1:${reloadPort}/metrics`;
    const passes0 = passesOf(await metricsOf(reloaderMetrics));
    const cpuSince = perSampleMs(cpuSeconds, pids);
    const waitSince = perSampleMs(mainThreadWaitSeconds, pids);
    const updatesFromUs = Number(process.hrtime.bigint() / 1000n);
    for (let i = 0; i < latencySamples; i += 1) {
      const content = { ...reloadData, 'key-000.yaml': `reload ${i}\n` };
      const seen = reloadLines.length;
      await core.replaceNamespacedConfigMap({
        name: 'app',
        namespace,
        body: { metadata: { name: 'app' }, data: content },
      });
      await waitFor(() => reloadLines.slice(seen).find((l) => l.state === 'Propagating'), {
        what: 'Propagating before the swap',
        intervalMs: 1,
      });
      for (const key of Object.keys(posts)) delete posts[key];
      const { swappedAt } = await update(content);
      if (swappedAt === undefined) throw new Error('kubelet did not swap ..data');
      await postArrivals.wait(
        () => (posts['/agent'] && posts['/raw'] ? true : undefined),
        'the reload POSTs of the agent and the raw baseline',
      );
      postLatency.push((posts['/agent'] as number) - swappedAt);
      rawPostLatency.push((posts['/raw'] as number) - swappedAt);
      // Past --reload-settle, so the next change is an isolated one.
      const quietUntil = performance.now() + 250;
      await waitFor(() => (performance.now() >= quietUntil ? true : undefined), {
        what: 'a quiet spell',
      });
    }
    const cpuPerUpdateMs = cpuSince(latencySamples);
    const waitPerUpdateMs = waitSince(latencySamples);
    const updatesToUs = Number(process.hrtime.bigint() / 1000n);
    const passes = passesOf(await metricsOf(reloaderMetrics)) - passes0;
    if (process.env.BENCH_SAMPLES)
      console.log(
        `[bench] reload${variant} samples, agent/raw ms: ${postLatency
          .map((x, j) => `${x.toFixed(2)}/${(rawPostLatency[j] as number).toFixed(2)}`)
          .join(' ')}`,
      );
    reloader.kill('SIGTERM');
    rawReloader.kill('SIGTERM');
    reloadApp.kill('SIGTERM');
    if (profiled)
      await agentProfile(
        profiled,
        `${path.join(import.meta.dirname, '../dist')}/`,
        [updatesFromUs, updatesToUs],
        latencySamples,
        `process-reload${variant}`,
      );
    rows.push(
      latencyRow(
        reloadKeys === 100 && variant === ''
          ? '..data swap -> reload POST'
          : `..data swap -> reload POST, ${keysNamed}${variant}`,
        postLatency,
        { name: 'raw inotify -> POST', samples: rawPostLatency },
        { overBaselineMs: 2, why: 'issue 13' },
      ),
    );
    rows.push(
      perChangeRow(
        `CPU per update, reload mode, ${keysNamed}${variant}`,
        cpuPerUpdateMs,
        'raw inotify -> POST',
      ),
      perChangeRow(
        `  waited for a core per update (main thread)${variant}`,
        waitPerUpdateMs,
        'raw inotify -> POST',
        "(report: the machine's contention)",
      ),
      passesRow(`  the agent's passes per update${variant}`, passes, latencySamples),
    );
  }
  kubelet.close();
}
