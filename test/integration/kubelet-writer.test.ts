// kubelet's own AtomicWriter (k8s.io/kubernetes at the harness's pinned version, driven through
// test/cluster/go/kubelet-writer) against what the agent's unit tests stand on:
//  - the harness's TypeScript transcription (test/cluster/kubelet-volume.ts), the writer every
//    unit test uses, lays a volume out exactly as kubelet does;
//  - the file watch and the reader, at kubelet's own speed and with its own events, with and
//    without a Pod fsGroup (kubelet then chowns and chmods the whole volume before each swap):
//    one wake per update, and the pass after each swap reads what a full read reads.
// No API server is needed here; the file is in the integration project for the Go tool's build.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { readVolume, volumeReader } from '../../src/read/volume.ts';
import { atomicWrite, type Payload } from '../cluster/kubelet-volume.ts';
import { type KubeletWriter, startKubeletWriter } from '../cluster/kubelet-writer.ts';
import { startWatchProbe } from '../cluster/watch-probe.ts';

let kubelet: KubeletWriter;
let dir: string;

// Seconds once the cluster is built (Go's build cache holds kubelet's packages); about 2.5
// minutes on this machine with that cache empty.
beforeAll(async () => {
  kubelet = await startKubeletWriter();
}, 900_000);
afterAll(() => kubelet.close());
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kubelet-writer-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const TIMESTAMP = /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/;

/**
 * A volume as a reader finds it, with kubelet's timestamped names made one: every entry of the
 * volume root (a link's target, or a payload directory), and every file under `..data` with its
 * mode and content.
 */
function layout(volume: string): Record<string, string> {
  const seen: Record<string, string> = {};
  const stamp = (name: string) => (TIMESTAMP.test(name) ? '..<timestamp>' : name);
  for (const entry of fs.readdirSync(volume)) {
    const full = path.join(volume, entry);
    const st = fs.lstatSync(full);
    seen[stamp(entry)] = st.isSymbolicLink()
      ? `-> ${stamp(fs.readlinkSync(full))}`
      : `${st.isDirectory() ? 'dir' : 'file'} ${(st.mode & 0o7777).toString(8)}`;
  }
  const walk = (rel: string) => {
    for (const entry of fs.readdirSync(path.join(volume, '..data', rel), { withFileTypes: true })) {
      const sub = path.join(rel, entry.name);
      if (entry.isDirectory()) walk(sub);
      else {
        const full = path.join(volume, '..data', sub);
        const mode = (fs.statSync(full).mode & 0o7777).toString(8);
        seen[`..data/${sub}`] = `${mode} ${fs.readFileSync(full, 'utf8')}`;
      }
    }
  };
  walk('');
  return seen;
}

function payloadOf(files: Record<string, string>, mode: number): Payload {
  return Object.fromEntries(Object.entries(files).map(([p, text]) => [p, { data: Buffer.from(text), mode }]));
}

function keys(n: number, value: string): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`key-${i}.yaml`, `${value} ${i}\n`]));
}

describe('the harness’s kubelet writer', () => {
  it('lays a volume out as kubelet’s own AtomicWriter does, through additions and removals', async () => {
    const ours = path.join(dir, 'transcription');
    const theirs = path.join(dir, 'kubelet');
    fs.mkdirSync(ours);
    fs.mkdirSync(theirs);
    const updates: [Record<string, string>, number][] = [
      [{ 'a.yaml': 'one\n', 'nested/b.txt': 'two', 'nested/deeper/c': '' }, 0o644],
      [{ 'a.yaml': 'one, changed\n', 'nested/b.txt': 'two', 'd.json': '{}' }, 0o644],
      [{ 'd.json': '{"x":1}' }, 0o400],
    ];
    for (const [files, mode] of updates) {
      atomicWrite(ours, payloadOf(files, mode));
      await kubelet.write(theirs, { files, mode });
      expect(layout(ours)).toEqual(layout(theirs));
    }
    // What the comparison stands on: the last update left one key, its link and its mode.
    expect(layout(theirs)).toEqual({
      '..<timestamp>': 'dir 755',
      '..data': '-> ..<timestamp>',
      'd.json': '-> ..data/d.json',
      '..data/d.json': '400 {"x":1}',
    });
  });
});

describe.each([
  { pod: 'without an fsGroup', fsGroup: undefined },
  { pod: 'with an fsGroup', fsGroup: process.getgid?.() ?? 0 },
])('the file watch and the reader, kubelet’s own writer, a Pod $pod', ({ fsGroup }) => {
  it('wake once per update, and the pass after each swap reads what a full read reads', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    const update = (files: Record<string, string>) =>
      kubelet.write(volume, { files, ...(fsGroup === undefined ? {} : { fsGroup }) });
    const paths = Object.keys(keys(50, ''));
    await update(keys(50, 'v0'));

    const probe = await startWatchProbe([volume]);
    try {
      const read = volumeReader(Date.now, probe.entries.version, probe.payloads.take);
      read(volume, paths, false); // the agent's first pass
      for (let i = 1; i <= 5; i += 1) {
        const files = keys(50, `v${i}`);
        const mark = probe.reasons.length;
        await update(files);
        await probe.barrier();
        // The swap alone: no wake for kubelet's payload, its clean-up, or its fsGroup walk.
        expect(probe.reasons.slice(mark)).toEqual([`inotify rename ${volume}/..data`]);
        const pass = read(volume, paths, false);
        expect(pass).toEqual(readVolume(volume, paths, false));
        expect(pass.files.get('key-7.yaml')).toEqual({
          sha256: createHash('sha256').update(`v${i} 7\n`).digest('hex'),
          size: Buffer.byteLength(`v${i} 7\n`),
        });
      }
    } finally {
      await probe.stop();
    }
  });
});
