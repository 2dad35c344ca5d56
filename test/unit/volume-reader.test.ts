// The agent's reader hashes a file again only when it changed: these tests hold it to reading
// every change (a kubelet update, a file tampered with in place, a key removed) and to reading
// nothing that did not change. Real files; the only thing watched is how often a file is opened.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { RACY_MS, readVolume, volumeReader } from '../../src/read/volume.ts';
import { VolumeEntries } from '../../src/watch/volume-entries.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'volume-reader-'));
});
afterEach(() => {
  vi.restoreAllMocks();
  fs.rmSync(dir, { recursive: true, force: true });
});

/** A clock this far ahead makes every file written by the test older than the racy window. */
const later = () => Date.now() + 5000;
/** Waits until a file written now gets a later ctime than `ctimeMs` (the kernel's coarse clock). */
async function fileClockPast(ctimeMs: number): Promise<void> {
  const probe = path.join(dir, '.probe');
  for (const deadline = Date.now() + 2000; Date.now() < deadline; ) {
    fs.writeFileSync(probe, '');
    if (fs.statSync(probe).ctimeMs > ctimeMs) return;
    await new Promise((r) => setTimeout(r, 1));
  }
  throw new Error(`the file clock did not pass ${ctimeMs} in 2 s`);
}
const opens = () => vi.spyOn(fs, 'openSync');

function keys(n: number, value: string): Record<string, string> {
  return Object.fromEntries(Array.from({ length: n }, (_, i) => [`key-${i}`, `${value}-${i}`]));
}

describe('volumeReader', () => {
  it('does not read an unchanged file again, and gives the digests a full read gives', () => {
    atomicWrite(dir, configMapPayload({ data: keys(20, 'one') }));
    const read = volumeReader(later);
    const paths = Object.keys(keys(20, 'one'));
    const first = read(dir, paths, false);
    const open = opens();
    const second = read(dir, paths, false);
    expect(open).not.toHaveBeenCalled();
    expect(second).toEqual(first);
    expect(second).toEqual(readVolume(dir, paths, false));
  });

  it('reads every file of a kubelet update again, without a stat first', () => {
    atomicWrite(dir, configMapPayload({ data: keys(20, 'one') }));
    const read = volumeReader(later);
    const paths = Object.keys(keys(20, 'one'));
    const before = read(dir, paths, false);
    atomicWrite(dir, configMapPayload({ data: keys(20, 'two') }));
    const stat = vi.spyOn(fs, 'statSync');
    const after = read(dir, paths, false);
    expect(stat).not.toHaveBeenCalled(); // a new ..data: nothing to compare with, straight to reading
    expect(after).toEqual(readVolume(dir, paths, false));
    for (const p of paths) expect(after.files.get(p)).not.toEqual(before.files.get(p));
  });

  it('reads a file tampered with in place again, at the same size and with its mtime put back', async () => {
    const file = path.join(dir, 'app.conf');
    fs.writeFileSync(file, 'level: info');
    fs.utimesSync(file, 1_000_000, 1_000_000); // whole seconds, so it can be put back exactly
    const read = volumeReader(later);
    const before = read(file, [''], true);
    expect(read(file, [''], true)).toEqual(before); // cached from here on
    // The later clock calls the file old at once, so the tamper must land in a later tick of
    // the kernel's file clock than the write, or its ctime could not tell them apart.
    await fileClockPast(fs.statSync(file).ctimeMs);
    fs.writeFileSync(file, 'level: warn');
    fs.utimesSync(file, 1_000_000, 1_000_000); // the ctime moves all the same
    expect(fs.statSync(file).mtimeMs).toBe(1_000_000_000);
    const after = read(file, [''], true);
    expect(after).toEqual(readVolume(file, [''], true));
    expect(after.files.get('')).not.toEqual(before.files.get(''));
  });

  it('reads a file changed just before a read again at the next read (the racy window)', () => {
    const file = path.join(dir, 'app.conf');
    fs.writeFileSync(file, 'level: info');
    const read = volumeReader(); // the real clock: the file changed within the window
    read(file, [''], true);
    const open = opens();
    read(file, [''], true);
    expect(open).toHaveBeenCalledTimes(1);
  });

  it('keeps the digest of a file that changed more than the racy window before the read', async () => {
    // kubelet writes a volume a few hundred ms before the agent's first pass: that pass must
    // keep its digests, or the first --resync reads every file again.
    const file = path.join(dir, 'app.conf');
    fs.writeFileSync(file, 'level: info');
    const changedAt = fs.statSync(file).ctimeMs;
    await new Promise((r) => setTimeout(r, RACY_MS + 50));
    expect(Date.now() - changedAt).toBeGreaterThan(RACY_MS);
    const read = volumeReader(); // the real clock
    read(file, [''], true);
    const open = opens();
    read(file, [''], true);
    expect(open).not.toHaveBeenCalled();
  });

  it('says a removed key is missing, and keeps nothing of it', () => {
    atomicWrite(dir, configMapPayload({ data: keys(3, 'one') }));
    const read = volumeReader(later);
    const paths = Object.keys(keys(3, 'one'));
    read(dir, paths, false);
    atomicWrite(dir, configMapPayload({ data: { 'key-0': 'one-0', 'key-1': 'one-1' } }));
    const after = read(dir, paths, false);
    expect(after.files.get('key-2')).toBe('missing');
    expect(after.files.get('key-0')).toEqual(readVolume(dir, ['key-0'], false).files.get('key-0'));
  });

  it('keeps each mount apart', () => {
    const a = path.join(dir, 'a');
    const b = path.join(dir, 'b');
    fs.mkdirSync(a);
    fs.mkdirSync(b);
    atomicWrite(a, configMapPayload({ data: { k: 'from a' } }));
    atomicWrite(b, configMapPayload({ data: { k: 'from b' } }));
    const read = volumeReader(later);
    read(a, ['k'], false);
    expect(read(b, ['k'], false)).toEqual(readVolume(b, ['k'], false));
    expect(read(a, ['k'], false)).toEqual(readVolume(a, ['k'], false));
  });
});

describe("volumeReader: a volume's listing (its extra entries)", () => {
  const listings = () => vi.spyOn(fs, 'readdirSync');

  it('lists the directory at every read while no watch counts its entries', () => {
    atomicWrite(dir, configMapPayload({ data: keys(3, 'one') }));
    const read = volumeReader(later);
    const paths = Object.keys(keys(3, 'one'));
    const readdir = listings();
    read(dir, paths, false);
    read(dir, paths, false);
    expect(readdir).toHaveBeenCalledTimes(2);
  });

  it('keeps the listing through a kubelet update while the count stands', () => {
    atomicWrite(dir, configMapPayload({ data: keys(3, 'one') }));
    const read = volumeReader(later, () => 0);
    const paths = Object.keys(keys(3, 'one'));
    read(dir, paths, false);
    atomicWrite(dir, configMapPayload({ data: keys(3, 'two') }));
    const readdir = listings();
    const after = read(dir, paths, false);
    expect(readdir).not.toHaveBeenCalled();
    expect(after).toEqual(readVolume(dir, paths, false));
  });

  it('lists again once the count moves, and sees an entry the API does not have', () => {
    atomicWrite(dir, configMapPayload({ data: keys(3, 'one') }));
    let count = 0;
    const read = volumeReader(later, () => count);
    const paths = Object.keys(keys(3, 'one'));
    expect(read(dir, paths, false).extras).toEqual([]);
    // kubelet's update that added a key (the API's expectation has not caught up here): its link
    // is an entry of the volume, and the watch counts its event.
    atomicWrite(dir, configMapPayload({ data: { ...keys(3, 'one'), gone: 'x' } }));
    count += 1;
    const readdir = listings();
    expect(read(dir, paths, false).extras).toEqual(['gone']);
    expect(readdir).toHaveBeenCalledTimes(1);
  });

  it('sees an entry whose event was lost once the count is distrusted, as every --resync does', () => {
    // An overflowed inotify queue loses events without a word (libuv drops the kernel's notice).
    atomicWrite(dir, configMapPayload({ data: keys(3, 'one') }));
    const entries = new VolumeEntries();
    entries.watching(dir);
    const read = volumeReader(later, entries.version);
    const paths = Object.keys(keys(3, 'one'));
    read(dir, paths, false);
    fs.writeFileSync(path.join(dir, 'by-hand'), 'x'); // its event lost: the count stands
    expect(read(dir, paths, false).extras).toEqual([]);
    entries.distrust();
    expect(read(dir, paths, false).extras).toEqual(['by-hand']);
  });

  it('keeps no listing of a directory it could not list', () => {
    const missing = path.join(dir, 'not-yet');
    const read = volumeReader(later, () => 0);
    expect(read(missing, ['k'], false).error).toBe(`${missing} does not exist`);
    fs.mkdirSync(missing);
    atomicWrite(missing, configMapPayload({ data: { k: 'v' } }));
    expect(read(missing, ['k'], false)).toEqual(readVolume(missing, ['k'], false));
  });
});

describe('readVolume digests', () => {
  it('gives each file the SHA-256 and size of its bytes, below, at and above the read buffer (1 MiB)', () => {
    const mib = 1024 * 1024;
    const sizes = [0, 1, 10, mib - 1, mib, mib + 1, 3 * mib + 5];
    const data: Record<string, string> = {};
    sizes.forEach((size, i) => {
      // Bytes that differ along the file, so a chunk hashed twice or skipped changes the digest.
      data[`size-${size}`] = Array.from({ length: size }, (_, k) =>
        String.fromCharCode(97 + ((k * 7 + i) % 26)),
      ).join('');
    });
    atomicWrite(dir, configMapPayload({ data }));
    const { files } = readVolume(dir, Object.keys(data), false);
    for (const [key, value] of Object.entries(data)) {
      const sha256 = createHash('sha256').update(value).digest('hex');
      expect(files.get(key), key).toEqual({ sha256, size: value.length });
    }
  });
});

// Reported in a round of faults: a 20 GiB sparse file as a key held the agent's one thread while
// it was hashed (/healthz timed out, SIGTERM waited); a socket as a key was told as the volume's
// ENXIO; a key the agent may not read named its directory, not itself.
describe('readVolume refuses what no ConfigMap or Secret value can be, saying what and where', () => {
  it('a file larger than any value: not read, at once, with its size', () => {
    const volume = path.join(dir, 'big');
    fs.mkdirSync(volume);
    const fd = fs.openSync(path.join(volume, 'key'), 'w');
    fs.ftruncateSync(fd, 20 * 1024 ** 3); // 20 GiB, sparse
    fs.closeSync(fd);
    const t0 = performance.now();
    const result = readVolume(volume, ['key'], false);
    expect(performance.now() - t0).toBeLessThan(1_000);
    expect(result.error).toMatch(/key is 21474836480 bytes, more than any ConfigMap or Secret value can be/);
    expect(result.error).toMatch(/not read$/);
  });

  it('a socket: named as one', async () => {
    const net = await import('node:net');
    const volume = path.join(dir, 'sock');
    fs.mkdirSync(volume);
    const server = net.createServer();
    await new Promise<void>((resolve) => server.listen(path.join(volume, 'key'), resolve));
    try {
      expect(readVolume(volume, ['key'], false).error).toBe(
        `${path.join(volume, 'key')} is not a regular file (a socket); not read`,
      );
    } finally {
      server.close();
    }
  });

  // As another user than root, which the agent is in a Pod (UID 65532): root reads every file.
  it.skipIf(process.getuid?.() !== 0)('a key it may not read: the key is named, not called missing', () => {
    fs.chmodSync(dir, 0o755);
    const volume = path.join(dir, 'locked');
    fs.mkdirSync(volume, { mode: 0o755 });
    fs.writeFileSync(path.join(volume, 'key'), 'x', { mode: 0o600 });
    const reader = JSON.stringify(new URL('../../src/read/volume.ts', import.meta.url).pathname);
    const script = `const { readVolume } = await import(${reader}); console.log(readVolume(${JSON.stringify(volume)}, ['key'], false).error);`;
    const out = spawnSync(
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
      { encoding: 'utf8' },
    );
    expect(out.stdout.trim()).toBe(`cannot read ${path.join(volume, 'key')}: EACCES`);
  });
});
