// Drives kubelet's own AtomicWriter (test/cluster/go/kubelet-writer, built and cached by
// build-tool.sh): one long-lived process, one volume update per request, answered in order.
// Where a measurement or a test must see kubelet's own timing and events (its ownership walk
// with an fsGroup, its speed between the new directory and the swap), this replaces the
// TypeScript transcription in kubelet-volume.ts.
import { type ChildProcessByStdio, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Readable, Writable } from 'node:stream';
import { buildTool } from './assets.ts';
import { fromMonotonicNs } from './monotonic.ts';

export interface KubeletUpdate {
  /** User-visible path -> content, as a ConfigMap's data. */
  readonly files: Readonly<Record<string, string>>;
  /** The files' mode (a ConfigMap volume's defaultMode); 0644 unless given. */
  readonly mode?: number;
  /** The Pod's fsGroup: kubelet then chowns and chmods the whole volume before the swap. */
  readonly fsGroup?: number;
}

export interface KubeletWriter {
  /**
   * Writes one update. swappedAt is performance.now() of this process at the moment before
   * kubelet's `..data` swap (its symlink and rename still to come); undefined when the volume
   * already held the payload and nothing was written.
   */
  write(dir: string, update: KubeletUpdate): Promise<{ swappedAt?: number }>;
  close(): void;
}

export async function startKubeletWriter(): Promise<KubeletWriter> {
  const binary = await buildTool('kubelet-writer');
  const child: ChildProcessByStdio<Writable, Readable, null> = spawn(binary, [], {
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const waiting: { resolve: (v: { swappedAt?: number }) => void; reject: (e: Error) => void }[] = [];
  let exited: Error | undefined;
  createInterface({ input: child.stdout }).on('line', (line) => {
    const answer = JSON.parse(line) as { swapNs?: string; error?: string };
    const next = waiting.shift();
    if (!next) return;
    if (answer.error !== undefined) next.reject(new Error(`kubelet-writer: ${answer.error}`));
    else if (answer.swapNs) next.resolve({ swappedAt: fromMonotonicNs(answer.swapNs) });
    else next.resolve({});
  });
  child.once('exit', (code, signal) => {
    exited = new Error(`kubelet-writer exited (${signal ?? code})`);
    for (const w of waiting.splice(0)) w.reject(exited);
  });
  return {
    write(dir, update) {
      if (exited) return Promise.reject(exited);
      return new Promise((resolve, reject) => {
        waiting.push({ resolve, reject });
        const request = { dir, files: update.files, mode: update.mode ?? 0o644, fsGroup: update.fsGroup };
        child.stdin.write(`${JSON.stringify(request)}\n`);
      });
    },
    close() {
      child.stdin.end();
    },
  };
}
