// Reads a mounted target from disk and digests it: the edge that verify's pure decide() needs.
//
// A volume kubelet maintains is read through its user-visible names (`key -> ..data/key`), so a
// read sees one consistent version unless kubelet swaps `..data` in the middle of it; a read
// that fails with ENOENT is retried once for that reason (the old timestamped directory was
// removed between readdir and open). The `..data` link target is returned as the volume's
// version marker, for logs.
import { createHash, hash } from 'node:crypto';
import fs from 'node:fs';
import { kindOf } from '../kube/regular-file.ts';
import type { KeyDigest } from '../verify/source.ts';
import type { VolumeObservation } from '../verify/verdict.ts';

export const DATA_LINK = '..data';

// One buffer for every read of the process: hashing in chunks keeps memory flat whatever the
// file size (a 256 MiB file is never held in memory), and it is faster than reading the whole
// file first: measured 1.6 GB/s against 0.9 GB/s (docs/benchmarks.md).
const CHUNK = Buffer.allocUnsafe(1024 * 1024);

/**
 * Regular files only, and no more bytes than the file had when it was opened. kubelet writes
 * nothing else, and anything else would hang the agent's one thread: a FIFO blocks the open,
 * a link to /dev/zero never ends. O_NONBLOCK makes the open of a FIFO return at once (it does
 * nothing to a regular file); fstat of the open descriptor then says what it really is.
 */
export function hashFile(file: string, maxBytes = MAX_VALUE_BYTES): HashedFile {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (error) {
    // A socket cannot be opened at all (ENXIO): say what it is, as for a FIFO or a device.
    const st = (error as NodeJS.ErrnoException).code === 'ENXIO' ? statOrUndefined(file) : undefined;
    if (st) throw notRegular(file, st);
    throw error;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw notRegular(file, st);
    // A value no ConfigMap or Secret can have: not read, since hashing it would hold the agent's
    // one thread (a 20 GiB sparse file kept /healthz from answering and SIGTERM from acting).
    if (st.size > maxBytes) {
      throw Object.assign(
        new Error(
          `${file} is ${st.size} bytes, more than any ConfigMap or Secret value can be (the API server takes objects of at most 1.5 MiB); not read`,
        ),
        { code: 'ETOOLARGE' },
      );
    }
    let size = 0;
    if (st.size <= CHUNK.length) {
      // The common case, a value that fits the buffer: read it whole and hash it in one call.
      // A Hash object per file was most of the hashing cost of a volume of short values (about
      // 0.2 of 0.9 ms for 100 keys of a few bytes, measured).
      while (size < st.size) {
        const n = fs.readSync(fd, CHUNK, size, st.size - size, null);
        if (n === 0) break;
        size += n;
      }
      return {
        digest: { sha256: hash('sha256', CHUNK.subarray(0, size), 'hex'), size },
        identity: identityOf(st),
      };
    }
    const streamed = createHash('sha256');
    while (size < st.size) {
      const n = fs.readSync(fd, CHUNK, 0, Math.min(CHUNK.length, st.size - size), null);
      if (n === 0) break;
      streamed.update(n === CHUNK.length ? CHUNK : CHUNK.subarray(0, n));
      size += n;
    }
    return { digest: { sha256: streamed.digest('hex'), size }, identity: identityOf(st) };
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * The largest file the reader hashes: well above what any ConfigMap or Secret value can be (the
 * API server refuses objects over 1.5 MiB in all), and still hashed in about 10 ms.
 */
export const MAX_VALUE_BYTES = 16 * 1024 * 1024;

function notRegular(file: string, st: fs.Stats): Error {
  return Object.assign(new Error(`${file} is not a regular file (${kindOf(st)}); not read`), {
    code: 'ENOTREGULAR',
  });
}

function statOrUndefined(file: string): fs.Stats | undefined {
  try {
    return fs.statSync(file);
  } catch {
    return undefined;
  }
}

/** A file's digest, and the identity (fstat) of the descriptor it was read through. */
export interface HashedFile {
  readonly digest: KeyDigest;
  readonly identity: FileIdentity;
}

/**
 * A file as stat sees it: device, inode, size, and the times of its last write (mtime) and of
 * its last change of any kind (ctime, which no unprivileged process can set back).
 */
interface FileIdentity {
  readonly dev: number;
  readonly ino: number;
  readonly size: number;
  readonly mtimeMs: number;
  readonly ctimeMs: number;
}

function identityOf(st: fs.Stats): FileIdentity {
  return { dev: st.dev, ino: st.ino, size: st.size, mtimeMs: st.mtimeMs, ctimeMs: st.ctimeMs };
}

function sameFile(a: FileIdentity, b: FileIdentity): boolean {
  return (
    a.ino === b.ino &&
    a.ctimeMs === b.ctimeMs &&
    a.mtimeMs === b.mtimeMs &&
    a.size === b.size &&
    a.dev === b.dev
  );
}

/**
 * Digests already computed, by file path, with the identity of the file they were computed from.
 * Owned by one reader (volumeReader); readVolume without one hashes every file.
 */
type DigestCache = Map<string, { readonly identity: FileIdentity; readonly digest: KeyDigest }>;

/**
 * How long before a read a file must have last changed for its digest to be kept. File times
 * come from the kernel's coarse clock (a tick of 1 to 10 ms), so a write in the same tick as
 * the read, after it, would leave the identity unchanged; a file that changed ten ticks or more
 * before the read cannot be in that case (git's "racy clean" entries, the same problem).
 * Why not longer: kubelet writes a Pod's volumes just before it starts the agent, so the
 * agent's first pass comes a few hundred ms after the write. With a window of a second that
 * pass kept no digest, and the first --resync read every file again (measured: the largest
 * piece of the agent's first idle minute).
 */
export const RACY_MS = 100;

/**
 * A cached read: the digests known, those this read used or made, when the read began, and the
 * digests of the volume's current payload taken while kubelet wrote it, by key (the key's link
 * checked), if there are any.
 */
interface Caching {
  readonly cache: DigestCache;
  readonly used: DigestCache;
  readonly startedAt: number;
  readonly prehashed: ((key: string) => HashedFile | undefined) | undefined;
}

function digestFile(file: string, key: string, caching?: Caching): KeyDigest | 'missing' {
  for (let attempt = 0; ; attempt += 1) {
    try {
      if (!caching) return hashFile(file).digest;
      const { cache, used } = caching;
      // (0) A digest taken while kubelet wrote the file, that no event of its directory's watch
      // has outdated since (payload-digests.ts): the file is not touched at all. Kept in the
      // reader's own cache under the same rule as one read here, since it was read the same
      // way: the passes after the watch's digests are dropped stat the file against it.
      const prehashed = attempt === 0 ? caching.prehashed?.(key) : undefined;
      if (prehashed) {
        if (prehashed.identity.ctimeMs <= caching.startedAt - RACY_MS) used.set(file, prehashed);
        return prehashed.digest;
      }
      // (1) A digest known for the path, and a stat (through the key's link) whose identity
      // matches the one it was computed from: the file is unchanged since, so the digest stands
      // without reading it.
      const known = cache.get(file);
      const st = known && fs.statSync(file, { throwIfNoEntry: false });
      if (known && st?.isFile() && sameFile(known.identity, st)) {
        used.set(file, known);
        return known.digest;
      }
      // (2) Otherwise read and hash it, and keep the digest with the identity of the descriptor
      // that was read (not of the stat above: the file may have been replaced in between),
      // unless the file changed too shortly before the read to be told from a later write.
      const { digest, identity } = hashFile(file);
      if (identity.ctimeMs <= caching.startedAt - RACY_MS) used.set(file, { identity, digest });
      return digest;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && attempt === 0) continue;
      if (code === 'ENOENT' || code === 'ENOTDIR') return 'missing';
      throw error;
    }
  }
}

export type ReadVolumeResult = VolumeObservation;

/**
 * `dir` is where the target is mounted in the agent's view; `expectedPaths` are relative to it.
 * For a subPath target, `dir` is the file itself and the expected path is ''.
 * Every file is read and hashed: for one-shot commands. The agent's loop uses volumeReader().
 */
export function readVolume(dir: string, expectedPaths: Iterable<string>, subPath: boolean): ReadVolumeResult {
  return readVolumeWith(dir, expectedPaths, subPath, listDirectory);
}

function listDirectory(dir: string): string[] {
  return fs.readdirSync(dir);
}

/** A symlink's target, or undefined where `file` is no symlink or is not there. */
function readLink(file: string): string | undefined {
  try {
    return fs.readlinkSync(file);
  } catch {
    return undefined;
  }
}

/**
 * How many times a watch saw a directory's own entries change (src/watch/volume-entries.ts), or
 * undefined while nothing watches them.
 */
export type EntriesVersion = (dir: string) => number | undefined;

/**
 * The digests of the files of `dir`'s payload directory `payload`, by name, taken while kubelet
 * wrote it and outdated by no event of its watch since (src/read/payload-digests.ts); undefined
 * if there are none.
 */
export type TakePayloadDigests = (
  dir: string,
  payload: string,
) => ReadonlyMap<string, HashedFile> | undefined;

/**
 * What a volume directory's own entries were when a pass last looked: its listing and the
 * targets of the keys' links, each read when first needed, for one count of its watch's events.
 */
interface DirectoryView {
  readonly version: number | undefined;
  entries?: string[];
  readonly links: Map<string, string | undefined>;
}

/**
 * readVolume for a process that reads the same files again and again: a file whose identity
 * (device, inode, size, mtime, ctime) is what it was when it was hashed is not read again.
 * Why: the agent compares every file at least every --resync, and hashing 100 unchanged files a
 * minute was most of its idle work, enough for V8 to compile the hashing path with its
 * optimizing compilers after an hour or so (about 7 MiB resident, measured). A write of any kind
 * changes the ctime, so a file tampered with on disk is read again at the next pass; kubelet's
 * updates are new files (new inodes) in a new payload directory.
 * The cache holds one entry per file the last call for that mount read, nothing else.
 */
export function volumeReader(
  clock: () => number = Date.now,
  entriesVersion: EntriesVersion = () => undefined,
  takePayload: TakePayloadDigests = () => undefined,
): typeof readVolume {
  const caches = new Map<string, { readonly dataLink: string | undefined; readonly digests: DigestCache }>();
  // A directory's listing and keys' links, kept while its watch sees none of its entries change:
  // a kubelet update that adds or removes no key leaves them as they were, and listing the
  // directory right after the swap waits for kubelet's removal of the old payload there
  // (volume-entries.ts). The count is taken before the reads, so an event for a change they
  // missed moves it past. Without a watch (a count of undefined) every pass reads them again.
  const views = new Map<string, DirectoryView>();
  const viewOf = (dir: string): DirectoryView => {
    const version = entriesVersion(dir);
    const known = views.get(dir);
    if (version !== undefined && known?.version === version) return known;
    const view: DirectoryView = { version, links: new Map() };
    if (version === undefined) views.delete(dir);
    else views.set(dir, view);
    return view;
  };
  return (dir, expectedPaths, subPath) => {
    // A new `..data` target is a kubelet update: every file is new and none can match, so none
    // is stat'ed first (100 stats were about 0.5 ms more between the swap and the reload).
    const dataLink = subPath ? undefined : readDataLink(dir);
    const known = caches.get(dir);
    const cache: DigestCache = known && known.dataLink === dataLink ? known.digests : new Map();
    const used: DigestCache = new Map();
    const view = viewOf(dir);
    // Digests of the payload `..data` names, taken while kubelet wrote it: they stand for what
    // the app reads through a key only where the key's link is kubelet's own (`key ->
    // ..data/key`). A watch of the directory is needed to keep that answer between passes.
    const taken =
      dataLink !== undefined && view.version !== undefined ? takePayload(dir, dataLink) : undefined;
    const prehashed =
      taken &&
      ((key: string) => {
        if (!view.links.has(key)) view.links.set(key, readLink(`${dir}/${key}`));
        return view.links.get(key) === `${DATA_LINK}/${key}` ? taken.get(key) : undefined;
      });
    const list = (d: string) => {
      view.entries ??= listDirectory(d);
      return view.entries;
    };
    const result = readVolumeWith(dir, expectedPaths, subPath, list, {
      cache,
      used,
      startedAt: clock(),
      prehashed,
    });
    caches.set(dir, { dataLink, digests: used });
    return result;
  };
}

/**
 * Where a volume's `..data` link points (kubelet's current payload directory), or undefined where
 * there is none: not a volume kubelet maintains (a plain directory, a subPath file).
 */
export function readDataLink(dir: string): string | undefined {
  return readLink(`${dir}/${DATA_LINK}`);
}

function readVolumeWith(
  dir: string,
  expectedPaths: Iterable<string>,
  subPath: boolean,
  list: (dir: string) => string[],
  caching?: Caching,
): ReadVolumeResult {
  try {
    if (subPath) return { files: new Map([['', digestFile(dir, '', caching)]]), extras: [] };
    const files = new Map<string, KeyDigest | 'missing'>();
    const expectedTop = new Set<string>();
    // Concatenated, not path.join: the paths are the API's keys and items' paths, which the API
    // server validates (relative, no `..`), and a join per file per pass made path.normalize hot
    // enough at start to be compiled by TurboFan, about 5 MiB resident for good.
    const base = dir.endsWith('/') ? dir : `${dir}/`;
    for (const p of expectedPaths) {
      files.set(p, digestFile(base + p, p, caching));
      expectedTop.add(p.split('/')[0] as string);
    }
    let entries: string[];
    try {
      entries = list(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        return { files, extras: [], error: `${dir} does not exist` };
      throw error;
    }
    // kubelet reserves names starting with `..`; anything else that is not expected is a key the
    // API no longer has but the disk still shows.
    const extras = entries.filter((e) => !e.startsWith('..') && !expectedTop.has(e)).sort();
    return { files, extras };
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    // The file itself where the error names it (a key the agent may not read: EACCES), else the
    // volume directory.
    const why =
      e.code === 'ENOTREGULAR' || e.code === 'ETOOLARGE'
        ? e.message
        : `cannot read ${e.path ?? dir}: ${e.code ?? e.message}`;
    return { files: new Map(), extras: [], error: why };
  }
}
