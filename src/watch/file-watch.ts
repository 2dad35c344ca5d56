// Tells the agent when to look at its mounts again. Never decides anything: every signal just
// wakes the reconcile loop, which re-reads and compares bytes.
//
// Three sources of signals:
//  - a volume kubelet maintains (one with a `..data` link): one inotify watch (node's fs.watch)
//    on the volume directory, waking the loop for `..data` and for the user-visible entries
//    (the keys' links), not for kubelet's own payload entries. A new payload directory gets a
//    watch of its own while kubelet writes it, which wakes nothing: it keeps the digests of
//    its files current (src/read/payload-digests.ts), so the pass after the swap reads none.
//    kubelet's update is the rename of `..data` (one event, within a millisecond), then the
//    links of keys added or removed; the steps before and after (the new `..<timestamp>`
//    directory, `..data_tmp`, the old directory removed) are not news, and waking for each made
//    five passes per update where one was needed, the first of them possibly between the new
//    link and its rename, on the old files.
//    Why not chokidar here: it watches a file through its directory, and answered every event
//    in it by reading the directory again and lstat'ing each entry (about 300 calls of its
//    filters and path operations per update for 100 keys), on the agent's one thread while the
//    pass ran, and enough at the first update to have path.normalize compiled by TurboFan for
//    good (about 5 MiB resident).
//  - chokidar (inotify) on any other path: a plain directory given with --watch, a subPath
//    file, with followSymlinks off and no descent. It follows a file replaced by a rename,
//    which a bare fs.watch of the file would lose. Its raw events wake the loop as well as its
//    (throttled) change events.
//  - once the kernel refuses inotify (or a watch fails), and only then, a poll every
//    `intervalMs` of each mount's `..data` link (of every file's inode, mtime and size where
//    there is no `..data`): cheap, no hashing, and logged and exported, since it is then all
//    there is. While inotify watches, it does not run: the watches above cover every change
//    kubelet or a person makes, and the loop's own --resync compares everything anyway. (Not
//    an overflowed inotify queue: libuv drops the kernel's overflow notice without a word, so
//    the events lost in it wait for the --resync. It takes 16384 events queued while the
//    agent's thread is busy, the default fs.inotify.max_queued_events.) Each poll was a wakeup
//    of the process, and at the default 2 s they were most of the idle agent's wakeups
//    (strace) and of its idle CPU.
// The watches are all on one inotify instance of the process (libuv's, shared by every fs.watch):
// instances are scarce on a node (128 per user by default).
import fs from 'node:fs';
import path from 'node:path';
import { type FSWatcher, watch } from 'chokidar';
import type { PayloadDigests } from '../read/payload-digests.ts';
import { DATA_LINK, readDataLink } from '../read/volume.ts';
import type { VolumeEntries } from './volume-entries.ts';

export interface FileWatchOptions {
  /** Directories (or subPath files) to watch, as the agent sees them. */
  readonly paths: readonly string[];
  readonly intervalMs: number;
  readonly onChange: (reason: string) => void;
  readonly onPollingOnly: (error: Error) => void;
  /**
   * Called once, when every watch is in place (or the poll has taken over): a change made after
   * it is seen. chokidar sets its watches up asynchronously, so a first pass of the loop made
   * before this could miss a change made between that pass and the watch.
   */
  readonly onReady?: () => void;
  /**
   * Told of every event that names a volume's own entry (a key's link, not `..data` or
   * kubelet's payload), so the reader can keep a volume's listing between such events.
   */
  readonly entries?: VolumeEntries;
  /** Told of kubelet's new payload directories and of every write into them. */
  readonly payloads?: PayloadDigests;
}

/**
 * A string that changes whenever anything kubelet could have changed in `p` changed. For a
 * volume kubelet maintains that is the `..data` link alone: every update, of any key, swaps it
 * (one readlink a poll, where a stat of every file cost most of the agent's idle CPU). A
 * directory without `..data` (a plain directory given with --watch) and a subPath file are
 * stat'ed in full. A file changed in place, which kubelet never does, is left to inotify and
 * the periodic --resync.
 */
export function statSignature(p: string): string {
  const link = readDataLink(p);
  if (link !== undefined) return `link:${link}`;
  // no ..data: stat what is there
  const parts: string[] = [];
  const stat = (file: string) => {
    try {
      const st = fs.statSync(file);
      parts.push(`${file}:${st.ino}:${st.mtimeMs}:${st.size}`);
    } catch {
      parts.push(`${file}:-`);
    }
  };
  let entries: string[] = [];
  try {
    entries = fs.statSync(p).isDirectory()
      ? fs
          .readdirSync(p)
          .filter((e) => !e.startsWith('..'))
          .sort()
      : [];
  } catch {
    entries = [];
  }
  if (entries.length === 0) stat(p);
  for (const e of entries) stat(path.join(p, e));
  return parts.join('|');
}

/** kubelet's name for the new `..data` link before its rename over `..data` (AtomicWriter). */
const NEW_DATA_LINK = '..data_tmp';

/** kubelet's own entries in a volume directory other than `..data`: `..<timestamp>` and `..data_tmp`. */
function isPayloadEntry(name: string): boolean {
  return name.startsWith('..') && name !== DATA_LINK;
}

/**
 * Whether an event of a volume's watch, naming `name`, can have changed nothing a pass reads.
 * Two cases, each told by an lstat at handling time (an entry replaced or removed since the
 * event has an event of its own, which is handled on its own):
 *  - a `change` (inotify's IN_MODIFY or IN_ATTRIB: node's fs.watch does not tell them apart) of
 *    a symlink (`..data`, a key's link): a link cannot be written, and its owner or mode changes
 *    nothing about where it leads;
 *  - the directory's own owner or mode: libuv names the watched directory itself by its base
 *    name, and reports a directory's IN_ATTRIB as `rename`. It is that when there is no entry
 *    of that name and the directory is still the one watched (a directory removed or moved away
 *    is not: that wakes the loop). A change of its mode that keeps the agent out is found by the
 *    next --resync's pass.
 * Why: with a Pod fsGroup, kubelet chowns and chmods the whole volume just before each swap,
 * the directory first, and each of these events woke a pass that read the current payload again
 * (its files' ctimes changed too) while the swap waited: 103 wakes per update for 100 keys.
 */
function changesNothingRead(
  dir: string,
  self: WatchedDirectory,
  event: fs.WatchEventType,
  name: string,
): boolean {
  // Any other `rename` is an entry made, removed or renamed, `..data`'s swap among them: news,
  // with no system call before the wake.
  if (event === 'rename' && name !== self.name) return false;
  try {
    const st = fs.lstatSync(`${dir}/${name}`, { throwIfNoEntry: false });
    if (st) return event === 'change' && st.isSymbolicLink();
    if (name !== self.name) return false;
    const now = fs.statSync(dir, { throwIfNoEntry: false });
    return now !== undefined && now.ino === self.ino && now.dev === self.dev;
  } catch {
    // The directory can no longer be searched (its mode changed to keep the agent out, a chmod
    // 000): news. Thrown here, in the watch's callback, the error ended the process; the pass it
    // wakes reports the volume unreadable, with the reason, and the agent goes on.
    return false;
  }
}

/** The watched directory as its own events name it (libuv: its base name), and its inode. */
interface WatchedDirectory {
  readonly name: string;
  readonly ino: number;
  readonly dev: number;
}

/**
 * One inotify watch on a volume kubelet maintains: wakes for `..data` and the keys' links, not
 * for kubelet's payload entries, nor for an attribute change that changes nothing read
 * (changesNothingRead). An event without a name (none comes on Linux, where libuv names the
 * watched directory itself) wakes too, since anything may have changed.
 */
function watchVolume(
  dir: string,
  options: FileWatchOptions,
  onError: (error: Error) => void,
): { close(): void } {
  const payloads = options.payloads && payloadWatches(dir, options.payloads);
  const { ino, dev } = fs.statSync(dir);
  const self: WatchedDirectory = { name: path.basename(dir), ino, dev };
  // The entries an lstat showed to be symlinks (`..data`, the keys' links), until an event says
  // the entry was made, removed or renamed (`rename`). A `change` of one is then told without
  // an lstat: inotify hands out the events in order, so an entry replaced since has had its
  // `rename` handled first. Why: an fsGroup's walk changes the owner and mode of every link
  // right before each swap, 100 lstats for 100 keys on the way to the swap's event.
  const links = new Set<string>();
  const watcher = fs.watch(dir, (event, name) => {
    if (name !== null && isPayloadEntry(name)) {
      payloads?.entryChanged(name);
      return;
    }
    if (name !== null && event === 'rename') links.delete(name);
    if (name !== null && event === 'change' && links.has(name)) return;
    if (name !== null && changesNothingRead(dir, self, event, name)) {
      if (event === 'change') links.add(name); // true for a `change` only where it is a symlink
      return;
    }
    if (name !== DATA_LINK) options.entries?.changed(dir);
    options.onChange(`inotify ${event} ${dir}/${name ?? '*'}`);
  });
  watcher.on('error', onError);
  options.entries?.watching(dir);
  return {
    close() {
      watcher.close();
      payloads?.close();
    },
  };
}

/**
 * The watches of a volume's payload directories: one from the moment a new `..<timestamp>`
 * directory appears (kubelet makes it, writes every file into it, then swaps `..data` to it)
 * until it is gone (kubelet removes it at the next update). Its events go to the digests, not
 * to the loop. A directory the agent cannot watch (gone already, or not yet open to other
 * users: kubelet makes it 0700 and chmods it 0755 at once, an event of its own) is tried again
 * at its next event, and otherwise simply read by the pass.
 */
function payloadWatches(dir: string, digests: PayloadDigests) {
  const watches = new Map<string, fs.FSWatcher>();
  const stop = (name: string) => {
    watches.get(name)?.close();
    watches.delete(name);
    digests.end(dir, name);
  };
  return {
    entryChanged(name: string): void {
      // kubelet's new link, made and renamed over `..data` right before the swap's event: a
      // link, never a payload directory, so its two events need no lstat. (A directory's own
      // events all come as `rename`, its chmod too: libuv adds IN_ISDIR to the mask it reads.)
      if (name === NEW_DATA_LINK) return;
      const full = `${dir}/${name}`;
      let isDirectory = false;
      try {
        isDirectory = fs.lstatSync(full).isDirectory();
      } catch {
        // gone
      }
      if (!isDirectory) {
        if (watches.has(name)) stop(name);
        return;
      }
      if (watches.has(name)) return;
      try {
        // Closed at the first event after the digests were taken: kubelet's removal of the
        // directory at the next update would otherwise be a hundred events for nothing.
        const watch = fs.watch(full, (_event, file) => {
          // The directory's own change (kubelet's chmod of it, an fsGroup walk's chown) comes
          // named after the directory itself: no file of it changed.
          if (file === name) return;
          if (!digests.changed(dir, name, file)) watch.close();
        });
        watch.on('error', () => stop(name));
        watches.set(name, watch);
      } catch {
        return;
      }
      digests.begin(dir, name);
    },
    close(): void {
      for (const name of [...watches.keys()]) stop(name);
    },
  };
}

export async function watchFiles(options: FileWatchOptions, signal: AbortSignal): Promise<void> {
  // Taken before any watch is set, so the poll, if it has to start later, still sees a change
  // made while the watches were being set up.
  const signatures = new Map(options.paths.map((p) => [p, statSignature(p)]));
  let poll: NodeJS.Timeout | undefined;
  const startPolling = () => {
    poll ??= setInterval(() => {
      for (const p of options.paths) {
        const now = statSignature(p);
        if (now !== signatures.get(p)) {
          signatures.set(p, now);
          options.onChange(`stat ${p}`);
        }
      }
    }, options.intervalMs);
  };

  const volumes = options.paths.filter((p) => readDataLink(p) !== undefined);
  const others = options.paths.filter((p) => !volumes.includes(p));
  const volumeWatches: { close(): void }[] = [];
  let watcher: FSWatcher | undefined;
  let refused = false;
  let isReady = false;
  const ready = () => {
    if (!isReady) options.onReady?.();
    isReady = true;
  };
  // A refused or failed watch: everything falls back to the poll, said once.
  const fallBack = (error: Error) => {
    if (!refused) options.onPollingOnly(error);
    refused = true;
    options.entries?.unwatched();
    options.payloads?.clear();
    startPolling();
    ready();
    for (const w of volumeWatches.splice(0)) w.close();
    void watcher?.close();
    watcher = undefined;
  };
  try {
    for (const dir of volumes) volumeWatches.push(watchVolume(dir, options, fallBack));
  } catch (error) {
    fallBack(error as Error);
  }
  if (!refused && others.length > 0) {
    watcher = watch(others, {
      followSymlinks: false,
      ignoreInitial: true,
      depth: 0,
      // `atomic` would hold back unlink events by 100 ms to pair them; the loop re-reads anyway.
      atomic: false,
    });
    watcher.on('all', (event, file) => options.onChange(`${event} ${file}`));
    // Its raw events too: chokidar throttles its change events to one per path per 50 ms, so a
    // second change soon after a first would reach the loop up to 50 ms late.
    watcher.on('raw', (event, file) => options.onChange(`raw ${event} ${String(file)}`));
    watcher.on('error', (error) => fallBack(error as Error));
    watcher.on('ready', ready);
  } else {
    ready();
  }

  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
  clearInterval(poll);
  options.entries?.unwatched();
  options.payloads?.clear();
  for (const w of volumeWatches) w.close();
  await watcher?.close();
}
