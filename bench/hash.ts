// Measures 1 and 2: the reader's and the verify pass's own speed, against `openssl dgst` on the
// same files; no cluster.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { verifyPass } from '../src/agent/pass.ts';
import type { VolumeTarget } from '../src/discover/targets.ts';
import { hashFile, readVolume } from '../src/read/volume.ts';
import { keyedFingerprint } from '../src/verify/fingerprint.ts';
import { snapshotConfigMap } from '../src/verify/source.ts';
import { atomicWrite, configMapPayload } from '../test/cluster/kubelet-volume.ts';
import { work } from './lib/settings.ts';
import { fmt, median, rows } from './lib/table.ts';

function timeOpenssl(files: string[]): number {
  const t0 = performance.now();
  execFileSync('openssl', ['dgst', '-sha256', ...files], { stdio: ['ignore', 'ignore', 'inherit'] });
  return performance.now() - t0;
}

// --- 1. throughput --------------------------------------------------------------------------
export function throughput(): void {
  const big = path.join(work, 'big.bin');
  const size = 256 * 1024 * 1024;
  const chunk = Buffer.alloc(1024 * 1024);
  for (let i = 0; i < chunk.length; i += 4) chunk.writeUInt32LE((i * 2654435761) >>> 0, i);
  const fd = fs.openSync(big, 'w');
  for (let i = 0; i < size / chunk.length; i += 1) fs.writeSync(fd, chunk);
  fs.closeSync(fd);
  const ours: number[] = [];
  const theirs: number[] = [];
  for (let i = 0; i < 3; i += 1) {
    const t0 = performance.now();
    // The reader's own hashing, without the size bound a volume's key has (MAX_VALUE_BYTES).
    hashFile(big, Number.POSITIVE_INFINITY);
    ours.push(performance.now() - t0);
    theirs.push(timeOpenssl([big]));
  }
  const mbps = (ms: number) => size / 1024 / 1024 / (ms / 1000);
  const o = mbps(Math.min(...ours));
  const b = mbps(Math.min(...theirs));
  rows.push({
    what: 'verify throughput, 256 MiB file',
    ours: `${fmt(o, 0)} MB/s`,
    baseline: `openssl dgst ${fmt(b, 0)} MB/s`,
    relation: `${fmt((o / b) * 100, 0)} %`,
    target: '>= 90 %',
    ok: o / b >= 0.9,
  });
  fs.rmSync(big);
}

// --- 2. realistic volume ----------------------------------------------------------------------
export function realisticVolume(): void {
  const dir = path.join(work, 'volume');
  fs.mkdirSync(dir);
  const data: Record<string, string> = {};
  for (let i = 0; i < 100; i += 1)
    data[`key-${String(i).padStart(3, '0')}.yaml`] = `${'x'.repeat(10_480 - 1)}\n`;
  atomicWrite(dir, configMapPayload({ data }));
  const snapshot = snapshotConfigMap({ metadata: { name: 'big', resourceVersion: '1' }, data });
  const target: VolumeTarget = {
    type: 'volume',
    container: 'app',
    volume: 'v',
    mountPath: dir,
    sources: [{ ref: { kind: 'ConfigMap', name: 'big' }, optional: false, defaultMode: 0o644 }],
  };
  const pass = () =>
    verifyPass({
      targets: [target],
      lookup: () => ({ state: 'present', snapshot }),
      readVolume,
      volumePath: (t) => t.mountPath,
      baselines: {},
      memory: new Map(),
      windows: { graceMs: 90_000, debounceMs: 5000 },
      fingerprint: keyedFingerprint(Buffer.alloc(32)),
      now: Date.now(),
    });
  for (let i = 0; i < 20; i += 1) pass();
  const times: number[] = [];
  for (let i = 0; i < 200; i += 1) {
    const t0 = performance.now();
    const { verdicts } = pass();
    times.push(performance.now() - t0);
    if (verdicts[0]?.state !== 'InSync') throw new Error('bench volume not in sync');
  }
  const files = Object.keys(data).map((k) => path.join(dir, k));
  const openssl = Math.min(...[0, 1, 2].map(() => timeOpenssl(files)));
  const ms = median(times);
  rows.push({
    what: 'verify pass, 100 keys / 1 MiB volume (median of 200)',
    ours: `${fmt(ms, 2)} ms`,
    baseline: `openssl dgst (one process) ${fmt(openssl, 2)} ms`,
    relation: `${fmt(ms / openssl, 2)} x`,
    target: '<= 5 ms',
    ok: ms <= 5,
  });
}
