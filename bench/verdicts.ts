// Measures 6 and 7: how soon the agent's verdict follows a change, on disk (a `..data` swap,
// against raw inotify) and in the API (against a raw watch), with the idle agent measures 3 to 5
// started.
import fs from 'node:fs';
import path from 'node:path';
import { Watch } from '@kubernetes/client-node';
import { atomicWrite, configMapPayload } from '../test/cluster/kubelet-volume.ts';
import { waitFor } from '../test/cluster/wait.ts';
import type { TimedLine } from './idle.ts';
import type { ProcessBench } from './lib/process-bench.ts';
import { only } from './lib/settings.ts';
import { latencyRow, rows } from './lib/table.ts';

/** Measures 6 and 7 on the agent whose log lines are `lines` (InSync on `data` under `mount`). */
export async function verdictRows(
  lines: readonly TimedLine[],
  { kc, core, namespace, data, mount }: ProcessBench,
): Promise<void> {
  const dir = path.join(mount, 'etc/app');
  const changed = { ...data, 'key-000.yaml': 'changed\n' };
  // --- 6. file change -> verdict ---
  if (only('file')) {
    const fileLatency: number[] = [];
    const inotifyLatency: number[] = [];
    for (let i = 0; i < 50; i += 1) {
      for (const [content, state] of [
        [changed, 'Propagating'],
        [data, 'InSync'],
      ] as const) {
        const seen = lines.length;
        let raw = 0;
        const w = fs.watch(dir, (_event, name) => {
          if (name === '..data') raw ||= performance.now();
        });
        // Measured from the swap, not from the start of the write: kubelet writes the new files
        // into a fresh directory first, invisible to the app, and the rename publishes them.
        const { swappedAt } = atomicWrite(dir, configMapPayload({ data: content }));
        if (swappedAt === undefined) throw new Error('the writer did not swap ..data');
        const got = await waitFor(() => lines.slice(seen).find((l) => l.line.state === state), {
          what: `${state} after a swap`,
          timeoutMs: 10_000,
          intervalMs: 1,
        });
        await waitFor(() => raw || undefined, { what: 'the raw inotify event of the swap', intervalMs: 1 });
        w.close();
        fileLatency.push(got.at - swappedAt);
        inotifyLatency.push(raw - swappedAt);
      }
    }
    rows.push(
      latencyRow(
        '..data swap -> verdict',
        fileLatency,
        { name: 'raw inotify', samples: inotifyLatency },
        { maxMs: 50 },
      ),
    );
  }

  // --- 7. API change -> verdict ---
  if (only('api')) {
    const apiLatency: number[] = [];
    const watchLatency: number[] = [];
    let lastWatchEvent = 0;
    const rawWatch = await new Watch(kc).watch(
      `/api/v1/namespaces/${namespace}/configmaps`,
      { fieldSelector: 'metadata.name=app' },
      () => {
        lastWatchEvent = performance.now();
      },
      () => {},
    );
    for (let i = 0; i < 30; i += 1) {
      for (const [content, state] of [
        [changed, 'Propagating'],
        [data, 'InSync'],
      ] as const) {
        if (state === 'InSync') atomicWrite(dir, configMapPayload({ data }));
        const seen = lines.length;
        lastWatchEvent = 0;
        const t = performance.now();
        await core.replaceNamespacedConfigMap({
          name: 'app',
          namespace,
          body: { metadata: { name: 'app' }, data: content },
        });
        const got = await waitFor(() => lines.slice(seen).find((l) => l.line.state === state), {
          what: `${state} after an API change`,
          timeoutMs: 10_000,
          intervalMs: 1,
        });
        apiLatency.push(got.at - t);
        await waitFor(() => lastWatchEvent || undefined, { what: 'the raw watch event', intervalMs: 1 });
        watchLatency.push(lastWatchEvent - t);
        if (state === 'Propagating') atomicWrite(dir, configMapPayload({ data }));
      }
    }
    rawWatch.abort();
    if (process.env.BENCH_SAMPLES)
      console.log(`[bench] api samples: ${apiLatency.map((x) => x.toFixed(0)).join(' ')}`);
    rows.push(
      latencyRow(
        'API change -> verdict',
        apiLatency,
        { name: 'raw watch', samples: watchLatency },
        { maxMs: 100 },
      ),
    );
  }
}
