// The file watch must wake the loop, by inotify alone, for every change kubelet or a person can
// make to what the agent watches. The poll runs only once inotify is refused; the last block
// holds it to that, the refusal made real in a user namespace of its own.
// Real files on a real file system: the kubelet writer is the test harness's exact copy of
// kubelet's AtomicWriter.
import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { PayloadDigests } from '../../src/read/payload-digests.ts';
import { readVolume, volumeReader } from '../../src/read/volume.ts';
import { watchFiles } from '../../src/watch/file-watch.ts';
import { VolumeEntries } from '../../src/watch/volume-entries.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';
import { waitFor } from '../cluster/wait.ts';

const HOUR = 3_600_000;

let dir: string;
let abort: AbortController;
let done: Promise<void>;
let reasons: string[];
let pollingOnly: Error[];
let entries: VolumeEntries;
let payloads: PayloadDigests;
let barrierWatch: fs.FSWatcher;
let barriersSeen: Set<string>;

beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'file-watch-'));
  abort = new AbortController();
  reasons = [];
  pollingOnly = [];
  entries = new VolumeEntries();
  payloads = new PayloadDigests();
  barriersSeen = new Set();
  fs.mkdirSync(path.join(dir, 'barrier'));
  barrierWatch = fs.watch(path.join(dir, 'barrier'), (_event, name) => {
    if (name !== null) barriersSeen.add(name);
  });
});
afterEach(async () => {
  vi.useRealTimers();
  vi.restoreAllMocks(); // a spy of a test that failed must not count in the next
  barrierWatch.close();
  abort.abort();
  await done;
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Starts the watch; resolves once every watch is in place (its onReady). */
async function start(paths: string[], intervalMs = HOUR): Promise<void> {
  let ready = false;
  done = watchFiles(
    {
      paths,
      intervalMs,
      onChange: (r) => reasons.push(r),
      onPollingOnly: (e) => pollingOnly.push(e),
      onReady: () => {
        ready = true;
      },
      entries,
      payloads,
    },
    abort.signal,
  );
  await waitFor(() => ready, { what: 'the watches to be set up', timeoutMs: 5000, intervalMs: 5 });
}

/**
 * Resolves once every inotify event of what the test did before it has reached the watch.
 * All of node's fs.watch handles share the process's one inotify instance, whose queue keeps
 * the order of events: once the event of a directory made now in a directory of the test's own
 * is seen, the events before it have been handed out too. Returns reasons.length at that point.
 * (Not a barrier for chokidar's own change events, which it emits after a stat of its own.)
 */
let barriers = 0;
async function barrier(): Promise<number> {
  barriers += 1;
  const name = `b-${barriers}`;
  fs.mkdirSync(path.join(dir, 'barrier', name));
  await waitFor(() => barriersSeen.has(name), {
    what: `the event of ${name}`,
    timeoutMs: 3000,
    intervalMs: 5,
  });
  return reasons.length;
}

/** Waits until the watch has woken the loop since `mark` (an index into reasons). */
async function wokenSince(mark: number): Promise<string[]> {
  await waitFor(() => reasons.length > mark, { what: 'a wake', timeoutMs: 3000, intervalMs: 5 });
  return reasons.slice(mark);
}

/** Waits until the watch has woken the loop with a reason that ends with `suffix`, since `mark`. */
async function wokenFor(mark: number, suffix: string): Promise<void> {
  await waitFor(() => reasons.slice(mark).some((r) => r.endsWith(suffix)), {
    what: `a wake for ${suffix} (woken: ${JSON.stringify(reasons.slice(mark))})`,
    timeoutMs: 3000,
    intervalMs: 5,
  });
}

/**
 * What a child running the watch says: its stdout as JSON lines, parsed as they come, and said()
 * to wait until they hold what `found` looks for (failing at once, with its stderr, if it exits).
 */
function childOutput<Line>(child: ChildProcess) {
  const lines: Line[] = [];
  let stderr = '';
  let buffered = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    buffered += chunk.toString();
    const parts = buffered.split('\n');
    buffered = parts.pop() ?? '';
    for (const part of parts) lines.push(JSON.parse(part) as Line);
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    stderr += chunk.toString();
  });
  const said = <T>(what: string, found: (lines: Line[]) => T | undefined) =>
    waitFor(() => found(lines), {
      what,
      timeoutMs: 5000,
      intervalMs: 10,
      abortIf: () => (child.exitCode === null ? undefined : `it exited ${child.exitCode}: ${stderr}`),
    });
  return { lines, said };
}

function keys(n: number, value: string): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`key-${i}`, `${value}-${i}`]));
}

/** A volume kubelet wrote with `n` keys (`key-<i>` = `<value>-<i>`), watched from now on. */
async function watchedVolume(n: number, value = 'one'): Promise<string> {
  const volume = path.join(dir, 'volume');
  fs.mkdirSync(volume);
  atomicWrite(volume, configMapPayload({ data: keys(n, value) }));
  await start([volume]);
  return volume;
}

describe('watchFiles: inotify alone', () => {
  it('wakes on each ..data swap of a kubelet volume of 100 keys', async () => {
    const volume = await watchedVolume(100);
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
    const volume = await watchedVolume(3);
    let mark = reasons.length;
    atomicWrite(volume, configMapPayload({ data: { ...keys(3, 'one'), added: 'x' } }));
    let end = await barrier();
    expect(reasons.slice(mark, end).filter((r) => r.endsWith('/added'))).not.toEqual([]);
    mark = end;
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    end = await barrier();
    expect(reasons.slice(mark, end).filter((r) => r.endsWith('/added'))).not.toEqual([]);
    expect(pollingOnly).toEqual([]);
  });

  it('wakes for the rename of ..data, not for each step of kubelet’s update around it', async () => {
    const volume = await watchedVolume(10);
    for (const value of ['two', 'three']) {
      const mark = reasons.length;
      atomicWrite(volume, configMapPayload({ data: keys(10, value) }));
      // every event of the update, the late ones too (the old directory removed)
      const woken = reasons.slice(mark, await barrier());
      // The rename, once, and no wake for kubelet's payload entries (..<timestamp>, ..data_tmp).
      expect(woken).toEqual([`inotify rename ${volume}/..data`]);
    }
    expect(pollingOnly).toEqual([]);
  });

  it('wakes on a file changed in place, added and removed in a plain directory', async () => {
    const plain = path.join(dir, 'plain');
    fs.mkdirSync(plain);
    fs.writeFileSync(path.join(plain, 'app.yaml'), 'a: 1\n');
    await start([plain]);
    // chokidar's own event for each change (emitted after a stat of its own, so after its raw
    // event): each step waits for the one only it can cause.
    let mark = reasons.length;
    fs.writeFileSync(path.join(plain, 'app.yaml'), 'a: 2\n');
    await wokenFor(mark, `change ${path.join(plain, 'app.yaml')}`);
    mark = reasons.length;
    fs.writeFileSync(path.join(plain, 'new.yaml'), 'b: 1\n');
    await wokenFor(mark, `add ${path.join(plain, 'new.yaml')}`);
    mark = reasons.length;
    fs.rmSync(path.join(plain, 'new.yaml'));
    await wokenFor(mark, `unlink ${path.join(plain, 'new.yaml')}`);
  });

  it('wakes on a subPath file written in place', async () => {
    const file = path.join(dir, 'app.conf');
    fs.writeFileSync(file, 'one');
    await start([file]);
    const mark = reasons.length;
    fs.writeFileSync(file, 'two');
    expect(await wokenSince(mark)).not.toEqual([]);
  });

  it('counts the events naming a volume’s own entries, not those of ..data or kubelet’s payload', async () => {
    // The reader keeps a volume's listing while this count stands (volume-entries.ts): a key's
    // link made or removed must move it, and an update that adds or removes no key must not.
    const volume = await watchedVolume(3);
    expect(entries.version(volume)).toBe(0);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'two') }));
    await barrier();
    expect(entries.version(volume)).toBe(0);
    atomicWrite(volume, configMapPayload({ data: { ...keys(3, 'two'), added: 'x' } }));
    await barrier();
    const afterAdded = entries.version(volume) as number;
    expect(afterAdded).toBeGreaterThan(0);
    atomicWrite(volume, configMapPayload({ data: keys(3, 'two') }));
    await barrier();
    expect(entries.version(volume)).toBeGreaterThan(afterAdded);
    // A file made by hand beside the links is an entry of the volume too.
    const beforeHand = entries.version(volume) as number;
    fs.writeFileSync(path.join(volume, 'by-hand'), 'x');
    await barrier();
    expect(entries.version(volume)).toBeGreaterThan(beforeHand);
    abort.abort();
    await done;
    expect(entries.version(volume)).toBeUndefined();
  });

  it('does not wake for an owner or mode change that changes nothing read: a link’s, the volume’s own', async () => {
    // What kubelet does to a volume before each swap for a Pod with an fsGroup (a chown and a
    // chmod of every entry, the directory first), with the process's own owner so that any user
    // can run it: the kernel reports each all the same.
    const volume = await watchedVolume(3);
    const { uid, gid } = fs.statSync(volume);
    const mark = reasons.length;
    fs.lchownSync(volume, uid, gid);
    fs.chmodSync(volume, 0o2775);
    for (const entry of ['..data', ...Object.keys(keys(3, 'one'))])
      fs.lchownSync(path.join(volume, entry), uid, gid);
    expect(reasons.slice(mark, await barrier())).toEqual([]);
    expect(entries.version(volume)).toBe(0);
    // A key that is a file of its own (not kubelet's layout) written in place still wakes it, and
    // the volume directory moved away too.
    fs.rmSync(path.join(volume, 'key-0'));
    fs.writeFileSync(path.join(volume, 'key-0'), 'by hand');
    const replaced = await barrier();
    fs.appendFileSync(path.join(volume, 'key-0'), ', twice');
    expect(reasons.slice(replaced, await barrier())).toEqual([`inotify change ${volume}/key-0`]);
    const moved = await barrier();
    fs.renameSync(volume, `${volume}-moved`);
    expect(reasons.slice(moved, await barrier())).toEqual([`inotify rename ${volume}/volume`]);
  });

  it('looks up each link once for an fsGroup’s walks: the next walk’s events need no lstat', async () => {
    const volume = await watchedVolume(20);
    const { uid, gid } = fs.statSync(volume);
    const links = ['..data', ...Object.keys(keys(20, 'one'))];
    const walk = async () => {
      for (const entry of links) fs.lchownSync(path.join(volume, entry), uid, gid);
      const lstat = vi.spyOn(fs, 'lstatSync');
      const mark = reasons.length;
      const end = await barrier();
      const looked = lstat.mock.calls.map(([file]) => path.basename(String(file)));
      lstat.mockRestore();
      expect(reasons.slice(mark, end)).toEqual([]);
      return looked.filter((name) => links.includes(name));
    };
    expect((await walk()).sort()).toEqual([...links].sort());
    expect(await walk()).toEqual([]);
    // A link replaced (its `rename`) is looked up again at its next `change`.
    fs.rmSync(path.join(volume, 'key-5'));
    fs.symlinkSync('..data/key-5', path.join(volume, 'key-5'));
    await barrier();
    expect(await walk()).toEqual(['key-5']);
  });

  it('stays quiet while the volume is only read, as every pass reads it', async () => {
    // A read that woke the loop would make every pass wake the next one: the agent would never
    // idle. The events of the reads, if any, come before the barrier's.
    const volume = await watchedVolume(3);
    const mark = reasons.length;
    for (const key of Object.keys(keys(3, 'one'))) fs.readFileSync(path.join(volume, key));
    fs.readdirSync(volume);
    fs.readlinkSync(path.join(volume, '..data'));
    expect(reasons.slice(mark, await barrier())).toEqual([]);
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
    await start([volume], 20);
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
    const entriesModule = fileURLToPath(new URL('../../src/watch/volume-entries.ts', import.meta.url));
    const script = [
      `const { watchFiles } = await import(${JSON.stringify(module)});`,
      `const { VolumeEntries } = await import(${JSON.stringify(entriesModule)});`,
      'const say = (line) => process.stdout.write(JSON.stringify(line) + "\\n");',
      'const entries = new VolumeEntries();',
      `void watchFiles({ paths: [${JSON.stringify(volume)}], intervalMs: 50, entries,`,
      '  onChange: (r) => say(r), onPollingOnly: (e) => say("refused " + e.code), onReady: () => say("ready") },',
      '  new AbortController().signal);',
      `say("started, entries counted: " + (entries.version(${JSON.stringify(volume)}) !== undefined));`,
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
    const output = childOutput<string>(child);
    const { lines } = output;
    const said = (line: string) =>
      output.said(`the child to say ${JSON.stringify(line)}`, (all) => all.includes(line));
    try {
      // Polling only: no count, so the reader lists the volume at every pass.
      await said('started, entries counted: false');
      expect(lines).toContain('refused EMFILE');
      expect(lines).toContain('ready'); // the poll has taken over: the agent's first pass may run
      atomicWrite(volume, configMapPayload({ data: keys(3, 'two') }));
      await said(`stat ${volume}`);
      expect(lines.filter((l) => l.startsWith('inotify '))).toEqual([]);
    } finally {
      child.kill();
    }
  });
});

/**
 * kubelet's update of `volume` up to its swap (atomic_writer.go, steps 5 and 6), in steps a test
 * can come between: a new payload directory and every file written into it. The keys' links are
 * the volume's own from its first write.
 */
let payloadsWritten = 0;
function writePayload(volume: string, data: Record<string, string>): string {
  payloadsWritten += 1;
  const name = `..2026_12_05_00_00_00.${payloadsWritten}`;
  fs.mkdirSync(path.join(volume, name), { mode: 0o755 });
  for (const [key, value] of Object.entries(data)) fs.writeFileSync(path.join(volume, name, key), value);
  return name;
}

/** kubelet's swap (steps 8 and 9): `..data_tmp` made, then renamed over `..data`. */
function swap(volume: string, payload: string): void {
  fs.symlinkSync(payload, path.join(volume, '..data_tmp'));
  fs.renameSync(path.join(volume, '..data_tmp'), path.join(volume, '..data'));
}

/** Resolves once the hashing the events so far asked for is done (a few files a turn). */
const hashed = () =>
  waitFor(() => !payloads.hashing, { what: 'the payload hashed', timeoutMs: 3000, intervalMs: 1 });

const sha256 = (text: string) => ({
  sha256: createHash('sha256').update(text).digest('hex'),
  size: Buffer.byteLength(text),
});

describe('watchFiles and the reader: a kubelet update hashed while kubelet writes it', () => {
  const paths = Object.keys(keys(20, 'one'));
  async function volumeOf20(): Promise<{ volume: string; read: ReturnType<typeof volumeReader> }> {
    const volume = await watchedVolume(20);
    const read = volumeReader(Date.now, entries.version, payloads.take);
    read(volume, paths, false); // the agent's first pass
    return { volume, read };
  }

  /**
   * kubelet's new payload written and its events handed out, with the hashing turns they asked
   * for held back (`held`) for the test to run, as when the pass comes before them.
   */
  async function writtenWithHashingHeld() {
    const held: (() => void)[] = [];
    payloads = new PayloadDigests((run) => held.push(run));
    const { volume, read } = await volumeOf20();
    const payload = writePayload(volume, keys(20, 'two'));
    await barrier();
    return { held, volume, read, payload };
  }

  /** kubelet's new payload written, its events handed out, and every file it named hashed. */
  async function hashedPayload(volume: string): Promise<string> {
    const payload = writePayload(volume, keys(20, 'two'));
    await barrier();
    await hashed();
    return payload;
  }

  /** A pass's read, and the files it opened. */
  function passOpening(read: ReturnType<typeof volumeReader>, volume: string) {
    const open = vi.spyOn(fs, 'openSync');
    const after = read(volume, paths, false);
    const opened = open.mock.calls.map(([file]) => path.basename(String(file)));
    open.mockRestore();
    return { after, opened };
  }

  /** kubelet's swap to `payload`, then the pass it wakes: what it read, and the files it opened. */
  async function passAfterSwap(read: ReturnType<typeof volumeReader>, volume: string, payload: string) {
    swap(volume, payload);
    await barrier();
    return passOpening(read, volume);
  }

  /** A volume whose update was hashed ahead, swapped to, and read by the pass after the swap. */
  async function afterTheSwap() {
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    await passAfterSwap(read, volume, payload);
    return { volume, read, payload };
  }

  it('the pass after the swap opens no file, and gives what a full read gives', async () => {
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    // Before the swap the app still sees the old files, and so does a pass.
    expect(read(volume, paths, false).files.get('key-1')).toEqual(sha256('one-1'));
    const { after, opened } = await passAfterSwap(read, volume, payload);
    expect(opened).toEqual([]);
    expect(after.files.get('key-1')).toEqual(sha256('two-1'));
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it("takes the payload directory's own change (an fsGroup walk's chown and chmod of it) for no file's", async () => {
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    const changed = vi.spyOn(payloads, 'changed');
    fs.chmodSync(path.join(volume, payload), 0o755);
    await barrier();
    expect(payloads.hashing).toBe(false);
    expect(changed).not.toHaveBeenCalled();
    const { after, opened } = await passAfterSwap(read, volume, payload);
    expect(opened).toEqual([]);
    expect(after.files.get('key-1')).toEqual(sha256('two-1'));
  });

  it('the passes after it open no file either while nothing writes to the payload', async () => {
    // The files were written just now, too recently for the reader's own cache to keep them
    // (RACY_MS): without the watch's digests each of these passes read all 20 again.
    const { volume, read } = await afterTheSwap();
    for (let pass = 0; pass < 3; pass += 1) {
      const { after, opened } = passOpening(read, volume);
      expect(opened).toEqual([]);
      expect(after).toEqual(readVolume(volume, paths, false));
    }
  });

  it('a write to the payload after the swap drops its digests: the next pass reads the files', async () => {
    const { volume, read, payload } = await afterTheSwap();
    fs.writeFileSync(path.join(volume, payload, 'key-3'), 'tampered');
    await barrier();
    expect(payloads.take(volume, payload)).toBeUndefined();
    const { after, opened } = passOpening(read, volume);
    expect(opened).toContain('key-3');
    expect(after.files.get('key-3')).toEqual(sha256('tampered'));
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it('an attribute change of a payload file after the swap drops its digests too', async () => {
    // kubelet's chown and chmod of the whole volume for an fsGroup, or a person's chmod: not a
    // write, but nothing tells the two apart without reading.
    const { volume, read, payload } = await afterTheSwap();
    fs.chmodSync(path.join(volume, payload, 'key-7'), 0o600);
    await barrier();
    expect(payloads.take(volume, payload)).toBeUndefined();
    expect(passOpening(read, volume).opened).toContain('key-7');
  });

  it('drops the taken digests when told to distrust the watch (each --resync)', async () => {
    const { volume, read, payload } = await afterTheSwap();
    payloads.distrust();
    expect(payloads.take(volume, payload)).toBeUndefined();
    const { after, opened } = passOpening(read, volume);
    expect(opened).toHaveLength(20);
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it('keeps the digests of a payload kubelet still writes when told to distrust the watch', async () => {
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    payloads.distrust(); // a --resync pass while kubelet writes: its work is not thrown away
    const { opened } = await passAfterSwap(read, volume, payload);
    expect(opened).toEqual([]);
  });

  it('drops the digest of a file written after it was hashed: the pass reads that file', async () => {
    // The swap comes right after the write, as kubelet's would: the write's event is handed out
    // before the swap's, so it has outdated the digest by the time a pass runs. The hashing the
    // event asks for is held back here, as when the pass runs before it.
    const { held, volume, read, payload } = await writtenWithHashingHeld();
    while (held.length > 0) held.shift()?.();
    fs.writeFileSync(path.join(volume, payload, 'key-3'), 'written after');
    const { after, opened } = await passAfterSwap(read, volume, payload);
    expect(held).toHaveLength(1); // the write's event asked for a hashing, not yet run
    expect(opened).toEqual(['key-3']);
    expect(after.files.get('key-3')).toEqual(sha256('written after'));
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it('hashes again a file written after it was hashed, before the swap', async () => {
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    fs.writeFileSync(path.join(volume, payload, 'key-3'), 'written after');
    await barrier();
    await hashed();
    const { after, opened } = await passAfterSwap(read, volume, payload);
    expect(opened).toEqual([]);
    expect(after.files.get('key-3')).toEqual(sha256('written after'));
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it('reads a key through its link where the link is not kubelet’s own', async () => {
    // The app reads `key-4`, wherever its link points; kubelet's digest stands for it only
    // while the link is `..data/key-4`.
    const { volume, read } = await volumeOf20();
    const payload = await hashedPayload(volume);
    fs.writeFileSync(path.join(dir, 'elsewhere'), 'not kubelet’s');
    fs.rmSync(path.join(volume, 'key-4'));
    fs.symlinkSync(path.join(dir, 'elsewhere'), path.join(volume, 'key-4'));
    const { after } = await passAfterSwap(read, volume, payload);
    expect(after.files.get('key-4')).toEqual(sha256('not kubelet’s'));
    expect(after.files.get('key-5')).toEqual(sha256('two-5'));
    expect(after).toEqual(readVolume(volume, paths, false));
  });

  it('hashes ten files a turn of the event loop, so the swap’s event waits for no more', async () => {
    const { held } = await writtenWithHashingHeld();
    const open = vi.spyOn(fs, 'openSync');
    for (const run of held.splice(0)) run();
    expect(open).toHaveBeenCalledTimes(10);
    expect(held).toHaveLength(1); // another turn asked for, for the other ten
  });

  it('a swap before the hashing caught up: the first pass hashes the rest, the next opens none', async () => {
    const { held, volume, read, payload } = await writtenWithHashingHeld();
    held.shift()?.(); // one turn: ten files hashed
    const first = await passAfterSwap(read, volume, payload);
    expect(first.opened).toHaveLength(10);
    expect(first.after).toEqual(readVolume(volume, paths, false));
    const next = passOpening(read, volume);
    expect(next.opened).toEqual([]);
    expect(next.after).toEqual(first.after);
  });

  it('forgets a payload directory removed before any swap to it', async () => {
    const { volume } = await volumeOf20();
    const payload = await hashedPayload(volume);
    fs.rmSync(path.join(volume, payload), { recursive: true });
    await barrier();
    expect(payloads.take(volume, payload)).toBeUndefined();
  });
});

describe('watchFiles: the watches of kubelet’s payload directories', () => {
  /** Inotify watches of this process, all instances (the kernel's own count, in fdinfo). */
  function inotifyWatches(): number {
    let count = 0;
    for (const fd of fs.readdirSync('/proc/self/fd')) {
      let target = '';
      try {
        target = fs.readlinkSync(`/proc/self/fd/${fd}`);
      } catch {
        continue; // closed since the listing
      }
      if (target !== 'anon_inode:inotify') continue;
      count += fs.readFileSync(`/proc/self/fdinfo/${fd}`, 'utf8').match(/^inotify wd:/gm)?.length ?? 0;
    }
    return count;
  }

  it('does not look up kubelet’s `..data_tmp` link, made and renamed right before the swap', async () => {
    const volume = await watchedVolume(5, 'v0');
    // The events are handed to the watch after the writes return: the spy, set then, sees the
    // watch's calls only, not the writer's.
    atomicWrite(volume, configMapPayload({ data: keys(5, 'v1') }));
    const lstat = vi.spyOn(fs, 'lstatSync');
    await barrier();
    const looked = lstat.mock.calls.map(([file]) => path.basename(String(file)));
    lstat.mockRestore();
    expect(looked.some((name) => name.startsWith('..2'))).toBe(true); // the payload directories'
    expect(looked).not.toContain('..data_tmp');
  });

  it('keeps at most the current payload’s watch through updates, and none once stopped', async () => {
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume);
    atomicWrite(volume, configMapPayload({ data: keys(5, 'v0') }));
    const before = inotifyWatches();
    await start([volume]);
    const read = volumeReader(Date.now, entries.version, payloads.take);
    const withVolume = inotifyWatches();
    expect(withVolume).toBe(before + 1);
    for (let v = 1; v <= 5; v += 1) {
      atomicWrite(volume, configMapPayload({ data: keys(5, `v${v}`) }));
      await barrier();
      read(volume, Object.keys(keys(5, 'v')), false);
      expect(inotifyWatches()).toBeLessThanOrEqual(withVolume + 1);
    }
    abort.abort();
    await done;
    expect(inotifyWatches()).toBe(before);
  });

  it('stops following a payload once its digests are taken: kubelet’s removal of it later is one event', async () => {
    const volume = await watchedVolume(20);
    const read = volumeReader(Date.now, entries.version, payloads.take);
    const { timestampDir: first } = atomicWrite(volume, configMapPayload({ data: keys(20, 'two') }));
    await barrier();
    read(volume, Object.keys(keys(20, 'one')), false); // the pass after the swap takes them
    const changed = vi.spyOn(payloads, 'changed');
    atomicWrite(volume, configMapPayload({ data: keys(20, 'three') })); // removes `first`
    await barrier();
    expect(changed.mock.calls.filter(([, payload]) => payload === first)).toHaveLength(1);
  });
});

// kubelet runs as root and makes each payload directory 0700 before it chmods it 0755; the agent
// runs as another user, whose watch of the new directory may be refused until that chmod. The
// chmod's own event must try again, or the pass after the swap would read every file.
describe.skipIf(process.getuid?.() !== 0)('watchFiles as another user than kubelet', () => {
  it('hashes the payload ahead all the same: the pass after the swap opens no file', async () => {
    fs.chmodSync(dir, 0o755);
    const volume = path.join(dir, 'volume');
    fs.mkdirSync(volume, { mode: 0o755 });
    const paths = Object.keys(keys(20, 'one'));
    atomicWrite(volume, configMapPayload({ data: keys(20, 'one') }));
    const here = (file: string) => JSON.stringify(fileURLToPath(new URL(file, import.meta.url)));
    const script = [
      'import fs from "node:fs";',
      'import { createInterface } from "node:readline";',
      `const { watchFiles } = await import(${here('../../src/watch/file-watch.ts')});`,
      `const { VolumeEntries } = await import(${here('../../src/watch/volume-entries.ts')});`,
      `const { PayloadDigests } = await import(${here('../../src/read/payload-digests.ts')});`,
      `const { volumeReader } = await import(${here('../../src/read/volume.ts')});`,
      `const volume = ${JSON.stringify(volume)}, paths = ${JSON.stringify(paths)};`,
      'const say = (line) => process.stdout.write(JSON.stringify(line) + "\\n");',
      'const entries = new VolumeEntries(), payloads = new PayloadDigests();',
      'const read = volumeReader(Date.now, entries.version, payloads.take);',
      'void watchFiles({ paths: [volume], intervalMs: 3600000, entries, payloads, onChange: () => {},',
      '  onPollingOnly: (e) => say({ refused: e.code }), onReady: () => say({ ready: true }) },',
      '  new AbortController().signal);',
      'read(volume, paths, false);',
      'const openSync = fs.openSync; let opens = 0;',
      'fs.openSync = (...args) => { opens += 1; return openSync(...args); };',
      'createInterface({ input: process.stdin }).on("line", () => {',
      '  opens = 0; const r = read(volume, paths, false);',
      '  say({ uid: process.getuid(), opens, key1: r.files.get("key-1") });',
      '});',
    ].join('\n');
    const child = spawn(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--input-type=module',
        '-e',
        script,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const output = childOutput<Record<string, unknown>>(child);
    const { lines } = output;
    const said = (what: string, test: (line: Record<string, unknown>) => boolean) =>
      output.said(what, (all) => all.find(test));
    try {
      await said('the child ready', (l) => l.ready === true);
      // kubelet's steps, with a pause while the new directory is still 0700: the child's first
      // try to watch it is refused, and only the chmod's event lets it in.
      const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
      const payload = '..2026_12_05_00_00_00.77';
      fs.mkdirSync(path.join(volume, payload), { mode: 0o700 });
      await pause(200);
      fs.chmodSync(path.join(volume, payload), 0o755);
      for (const [key, value] of Object.entries(keys(20, 'two')))
        fs.writeFileSync(path.join(volume, payload, key), value, { mode: 0o644 });
      await pause(300); // the child's hashing
      swap(volume, payload);
      await pause(100); // the child sees the swap
      child.stdin.write('read\n');
      const answer = await said('the child’s read', (l) => l.opens !== undefined);
      expect(answer).toEqual({ uid: 65534, opens: 0, key1: sha256('two-1') });
      expect(lines.filter((l) => l.refused !== undefined)).toEqual([]);
    } finally {
      child.kill();
    }
  });

  // Reported in a round of faults: the sidecar (UID 65532) died with an uncaught EACCES when its
  // volume directory was made unreadable (chmod 000). The event of that chmod must wake the
  // loop, whose read says the volume is unreadable and why, and the watch must go on.
  it('a volume directory made unreadable: the change is told, the read says EACCES, nothing dies', async () => {
    fs.chmodSync(dir, 0o755);
    const volume = path.join(dir, 'locked');
    fs.mkdirSync(volume, { mode: 0o755 });
    const paths = Object.keys(keys(3, 'one'));
    atomicWrite(volume, configMapPayload({ data: keys(3, 'one') }));
    const here = (file: string) => JSON.stringify(fileURLToPath(new URL(file, import.meta.url)));
    const script = [
      'import { createInterface } from "node:readline";',
      `const { watchFiles } = await import(${here('../../src/watch/file-watch.ts')});`,
      `const { readVolume } = await import(${here('../../src/read/volume.ts')});`,
      `const volume = ${JSON.stringify(volume)}, paths = ${JSON.stringify(paths)};`,
      'const say = (line) => process.stdout.write(JSON.stringify(line) + "\\n");',
      'let changes = 0;',
      'void watchFiles({ paths: [volume], intervalMs: 3600000, onChange: () => { changes += 1; },',
      '  onPollingOnly: (e) => say({ refused: e.code }), onReady: () => say({ ready: true }) },',
      '  new AbortController().signal);',
      'createInterface({ input: process.stdin }).on("line", () => {',
      '  const r = readVolume(volume, paths, false);',
      '  say({ alive: true, changes, error: r.error ?? null, key1: r.files.get("key-1") ?? null });',
      '});',
    ].join('\n');
    const child = spawn(
      'setpriv',
      [
        '--reuid=65534',
        '--regid=65534',
        '--clear-groups',
        process.execPath,
        '--input-type=module',
        '-e',
        script,
      ],
      { stdio: ['pipe', 'pipe', 'pipe'] },
    );
    const output = childOutput<Record<string, unknown>>(child);
    const said = (what: string, test: (line: Record<string, unknown>) => boolean) =>
      output.said(what, (all) => all.findLast(test));
    // Asks the child to read until its answer passes `test` (the watch's event comes a moment
    // after the chmod), and returns that answer; each read is answered by one line.
    const readUntil = (what: string, test: (line: Record<string, unknown>) => boolean) =>
      waitFor(
        async () => {
          const answered = output.lines.filter((l) => l.alive === true).length;
          child.stdin.write('read\n');
          await waitFor(
            () => (output.lines.filter((l) => l.alive === true).length > answered ? true : undefined),
            { what: `the child's answer (${what})` },
          );
          const answer = output.lines.filter((l) => l.alive === true).at(-1) as Record<string, unknown>;
          return test(answer) ? answer : undefined;
        },
        { what, intervalMs: 50 },
      );
    try {
      await said('the child ready', (l) => l.ready === true);
      fs.chmodSync(volume, 0o000);
      const locked = await readUntil('the chmod told, and the read refused', (l) => Number(l.changes) > 0);
      expect(String(locked.error)).toMatch(/EACCES/);
      fs.chmodSync(volume, 0o755);
      const open = await readUntil('the volume read again', (l) => l.error === null);
      expect(open).toMatchObject({ error: null, key1: expect.anything() });
      expect(child.exitCode).toBeNull();
    } finally {
      fs.chmodSync(volume, 0o755);
      child.kill();
    }
  });
});
