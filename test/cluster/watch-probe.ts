// The agent's file watch (src/watch/file-watch.ts) on paths of a test's choosing, set up as the
// agent sets it (a volume's entries counted, kubelet's payloads hashed), recording why it woke
// the loop, with a barrier: for tests that hold the watch to what a writer (kubelet's own, or a
// real kubelet) did.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PayloadDigests } from '../../src/read/payload-digests.ts';
import { watchFiles } from '../../src/watch/file-watch.ts';
import { VolumeEntries } from '../../src/watch/volume-entries.ts';
import { waitFor } from './wait.ts';

export interface WatchProbe {
  /** Each wake's reason, in order (a refused inotify shows as `polling only: ...`). */
  readonly reasons: string[];
  readonly entries: VolumeEntries;
  readonly payloads: PayloadDigests;
  /**
   * Resolves once every inotify event of what was done before the call has reached the watch:
   * the watches of a process share one inotify instance, whose events come in order, so once
   * the event of a directory made now in a watched directory of the probe's own is seen, the
   * events before it have been handed out too.
   */
  barrier(): Promise<void>;
  stop(): Promise<void>;
}

export async function startWatchProbe(paths: string[]): Promise<WatchProbe> {
  const reasons: string[] = [];
  const entries = new VolumeEntries();
  const payloads = new PayloadDigests();
  const abort = new AbortController();
  let ready = false;
  const done = watchFiles(
    {
      paths,
      intervalMs: 3_600_000,
      onChange: (r) => reasons.push(r),
      onPollingOnly: (e) => reasons.push(`polling only: ${e.message}`),
      onReady: () => {
        ready = true;
      },
      entries,
      payloads,
    },
    abort.signal,
  );
  const barrierDir = fs.mkdtempSync(path.join(os.tmpdir(), 'watch-probe-'));
  const seen = new Set<string>();
  const barrierWatch = fs.watch(barrierDir, (_event, name) => name && seen.add(name));
  let barriers = 0;
  await waitFor(() => ready, { what: 'the watch set up', timeoutMs: 5000 });
  return {
    reasons,
    entries,
    payloads,
    async barrier() {
      barriers += 1;
      const name = `b-${barriers}`;
      fs.mkdirSync(path.join(barrierDir, name));
      await waitFor(() => seen.has(name) || undefined, { what: `the event of ${name}`, timeoutMs: 5000 });
    },
    async stop() {
      barrierWatch.close();
      abort.abort();
      await done;
      fs.rmSync(barrierDir, { recursive: true, force: true });
    },
  };
}
