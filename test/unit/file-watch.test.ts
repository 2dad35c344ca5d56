// The file watch must wake the loop, by inotify alone, for every change kubelet or a person can
// make to what the agent watches. The poll runs only once inotify is refused; the last block
// holds it to that, the refusal made real in a user namespace of its own.
// Real files on a real file system: the kubelet writer is the test harness's exact copy of
// kubelet's AtomicWriter.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { watchFiles } from '../../src/watch/file-watch.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';
import { waitFor } from '../cluster/wait.ts';

const HOUR = 3_600_000;

let dir: string;
let abort: AbortController;
let done: Promise<void>;
let reasons: string[];
let pollingOnly: Error[];

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'file-watch-'));
  abort = new AbortController();
  reasons = [];
  pollingOnly = [];
});
afterEach(async () => {
  vi.useRealTimers();
  abort.abort();
  await done;
  fs.rmSync(dir, { recursive: true, force: true });
});

function start(paths: string[], intervalMs = HOUR): void {
  done = watchFiles(
    { paths, intervalMs, onChange: (r) => reasons.push(r), onPollingOnly: (e) => pollingOnly.push(e) },
    abort.signal,
  );
}

/** Waits until the watch has woken the loop since `mark` (an index into reasons). */
async function wokenSince(mark: number, timeoutMs = 3000): Promise<string[]> {
  const until = Date.now() + timeoutMs;
  while (reasons.length === mark && Date.now() < until) await new Promise((r) => setTimeout(r, 10));
  return reasons.slice(mark);
}

/** Lets the watcher set up and any initial events settle, so each step sees only its own. */
async function settle(): Promise<void> {
  await new Promise((r) => setTimeout(r, 300));
}

function keys(n: number, value: string): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`key-${i}`, `${value}-${i}`]));
}

describe('watchFiles: inotify alone', () => {
  it('wakes on each ..data swap of a kubelet volume of 100 keys', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(100, 'one') }));
    start([volume]);
    await settle();
    for (const value of ['two', 'three']) {
      const mark = reasons.length;
      atomicWrite(volume, configMapPayload({ data: keys(100, value) }));
      expect(await wokenSince(mark)).not.toEqual([]);
    }
    expect(pollingOnly).toEqual([]);
  });

  it('wakes for the link of a key added or removed, made after the rename of ..data', async () => {
    // kubelet makes the link of a new key (and removes that of a key gone) after the rename:
    // a pass woken by the rename alone may run before it, and see the key missing (or still
    // there), so the link's own event must wake the loop again.
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    start([volume]);
    await settle();
    let mark = reasons.length;
    atomicWrite(volume, configMapPayload({ data: { ...keys(3, 'one'), added: 'x' } }));
    await settle();
    expect(reasons.slice(mark).filter((r) => r.endsWith('/added'))).not.toEqual([]);
    mark = reasons.length;
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    await settle();
    expect(reasons.slice(mark).filter((r) => r.endsWith('/added'))).not.toEqual([]);
    expect(pollingOnly).toEqual([]);
  });

  it('wakes for the rename of ..data, not for each step of kubelet’s update around it', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(10, 'one') }));
    start([volume]);
    await settle();
    for (const value of ['two', 'three']) {
      const mark = reasons.length;
      atomicWrite(volume, configMapPayload({ data: keys(10, value) }));
      await settle(); // the late events of the update too: the old directory removed
      const woken = reasons.slice(mark);
      // The rename, once, and no wake for kubelet's payload entries (..<timestamp>, ..data_tmp).
      expect(woken).toEqual([`inotify rename ${volume}/..data`]);
    }
    expect(pollingOnly).toEqual([]);
  });

  it('wakes on a file changed in place, added and removed in a plain directory', async () => {
    const plain = path.join(dir, 'plain');
    fs.mkdirSync(plain);
    fs.writeFileSync(path.join(plain, 'app.yaml'), 'a: 1\n');
    start([plain]);
    await settle();
    let mark = reasons.length;
    fs.writeFileSync(path.join(plain, 'app.yaml'), 'a: 2\n');
    expect(await wokenSince(mark)).not.toEqual([]);
    await settle();
    mark = reasons.length;
    fs.writeFileSync(path.join(plain, 'new.yaml'), 'b: 1\n');
    expect(await wokenSince(mark)).not.toEqual([]);
    await settle();
    mark = reasons.length;
    fs.rmSync(path.join(plain, 'new.yaml'));
    expect(await wokenSince(mark)).not.toEqual([]);
  });

  it('wakes on a subPath file written in place', async () => {
    const file = path.join(dir, 'app.conf');
    fs.writeFileSync(file, 'one');
    start([file]);
    await settle();
    const mark = reasons.length;
    fs.writeFileSync(file, 'two');
    expect(await wokenSince(mark)).not.toEqual([]);
  });

  it('stays quiet when nothing changes', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    start([volume]);
    await settle();
    const mark = reasons.length;
    await new Promise((r) => setTimeout(r, 300));
    expect(reasons.slice(mark)).toEqual([]);
  });
});

describe('watchFiles: the stat poll, the fallback when inotify is refused', () => {
  it('does not poll while inotify watches: a swap wakes the loop by inotify only', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    // The poll's clock is faked (inotify's events are real), so ten of its intervals pass at
    // once, with no sleep: a running poll would see the new ..data link in the first.
    vi.useFakeTimers({ toFake: ['setInterval', 'clearInterval'] });
    start([volume], 20);
    await settle();
    const mark = reasons.length;
    atomicWrite(volume, configMapPayload({ data: keys(3, 'two') }));
    expect(await wokenSince(mark)).not.toEqual([]);
    vi.advanceTimersByTime(200);
    const woken = reasons.slice(mark);
    expect(woken.filter((r) => r.startsWith('inotify '))).not.toEqual([]);
    expect(woken.filter((r) => r.startsWith('stat '))).toEqual([]);
    expect(pollingOnly).toEqual([]);
  });

  // The kernel's refusal for real: in a user namespace of its own (`unshare -U -r`) the child
  // may set its inotify instance limit to 0, and node's fs.watch then fails with EMFILE, as it
  // does on a node whose user ran out of fs.inotify.max_user_instances.
  it('says inotify was refused and catches a ..data swap by polling', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    const module = fileURLToPath(new URL('../../src/watch/file-watch.ts', import.meta.url));
    const script = [
      `const { watchFiles } = await import(${JSON.stringify(module)});`,
      'const say = (line) => process.stdout.write(JSON.stringify(line) + "\\n");',
      `void watchFiles({ paths: [${JSON.stringify(volume)}], intervalMs: 50,`,
      '  onChange: (r) => say(r), onPollingOnly: (e) => say("refused " + e.code) },',
      '  new AbortController().signal);',
      'say("started");',
    ].join('\n');
    const child = spawn(
      'unshare',
      [
        '-U',
        '-r',
        'sh',
        '-c',
        'echo 0 > /proc/sys/user/max_inotify_instances && exec "$0" --input-type=module -e "$1"',
        process.execPath,
        script,
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const lines: string[] = [];
    let stderr = '';
    let buffered = '';
    child.stdout.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      const parts = buffered.split('\n');
      buffered = parts.pop() ?? '';
      for (const part of parts) lines.push(JSON.parse(part) as string);
    });
    child.stderr.on('data', (chunk: Buffer) => {
      stderr += chunk.toString();
    });
    const said = (line: string) =>
      waitFor(() => lines.includes(line), {
        what: `the child to say ${JSON.stringify(line)}`,
        timeoutMs: 5000,
        intervalMs: 10,
        abortIf: () => (child.exitCode === null ? undefined : `it exited ${child.exitCode}: ${stderr}`),
      });
    try {
      await said('started');
      expect(lines).toContain('refused EMFILE');
      atomicWrite(volume, configMapPayload({ data: keys(3, 'two') }));
      await said(`stat ${volume}`);
      expect(lines.filter((l) => l.startsWith('inotify '))).toEqual([]);
    } finally {
      child.kill();
    }
  });
});
