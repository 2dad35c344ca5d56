// Tells the agent when to look at its mounts again. Never decides anything: every signal just
// wakes the reconcile loop, which re-reads and compares bytes.
//
// Two sources of signals:
//  - chokidar (inotify) on each mount's `..data` link, or on the mount itself where there is
//    none (a plain directory, a subPath file), with followSymlinks off and no descent into
//    kubelet's payload directories: kubelet's update is a rename of `..data`, which arrives as a
//    change of `..data` within milliseconds (watchedPathOf says why not the whole directory).
//    One watcher for the whole process: inotify instances are scarce on a node (128 per user by
//    default).
//    Its `raw` events wake the loop too: chokidar throttles its change events to one per path
//    per 50 ms, so a second swap soon after a first reached the loop only up to 50 ms late
//    (the benchmark's p99); the raw inotify event of the rename is not held back. A burst of
//    raw events costs at most one extra pass, because wakes coalesce in the loop. Raw events of
//    kubelet's own payload entries (the new `..<timestamp>` directory, `..data_tmp`, the old
//    directory removed) do not wake it: they are the steps of an update before and after its
//    one visible act, the rename of `..data`, whose own event wakes the loop. Waking for each
//    made five passes per update where one was needed, and the first of them could run
//    between the new link and its rename, on the old files.
//  - a poll every `intervalMs` of each mount's `..data` link (of every file's inode, mtime and
//    size where there is no `..data`): cheap, no hashing, and it catches what inotify misses (a refused watch, events
//    coalesced by chokidar's 50 ms throttle, a subPath file with no `..data`). If the kernel
//    refuses inotify, polling is all there is, and that is logged and exported.
import fs from 'node:fs';
import path from 'node:path';
import { type FSWatcher, watch } from 'chokidar';
import { DATA_LINK, readDataLink } from '../read/volume.ts';

export interface FileWatchOptions {
  /** Directories (or subPath files) to watch, as the agent sees them. */
  readonly paths: readonly string[];
  readonly intervalMs: number;
  readonly onChange: (reason: string) => void;
  readonly onPollingOnly: (error: Error) => void;
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

/** kubelet's own entries in a volume directory other than `..data`: `..<timestamp>` and `..data_tmp`. */
function isPayloadEntry(name: string): boolean {
  return name.startsWith('..') && name !== DATA_LINK;
}

/**
 * What chokidar watches for `p`: the `..data` link of a volume kubelet maintains, since every
 * update kubelet makes is its rename; otherwise `p` itself (a plain directory, a subPath file).
 * Why not the volume directory: chokidar reads and tracks every entry of a directory it watches,
 * which for a volume of 100 keys cost about 600 path operations at start, enough to have
 * path.normalize compiled by TurboFan (about 5 MiB resident), and a record per entry on the heap.
 */
function watchedPathOf(p: string): string {
  return readDataLink(p) === undefined ? p : path.join(p, DATA_LINK);
}

export async function watchFiles(options: FileWatchOptions, signal: AbortSignal): Promise<void> {
  const signatures = new Map(options.paths.map((p) => [p, statSignature(p)]));
  const poll = setInterval(() => {
    for (const p of options.paths) {
      const now = statSignature(p);
      if (now !== signatures.get(p)) {
        signatures.set(p, now);
        options.onChange(`stat ${p}`);
      }
    }
  }, options.intervalMs);

  const targets = options.paths.map((p) => ({ path: p, watched: watchedPathOf(p) }));
  const watched = new Set(targets.map((t) => t.watched));
  // Volumes kubelet maintains: every entry in them but `..data` is left to its rename. chokidar
  // reads the directory of a watched file at its first event, and would otherwise then report
  // (and track) every key's link as added: a wake per key at the first update.
  const volumes = new Set(targets.filter((t) => t.watched !== t.path).map((t) => t.path));
  let watcher: FSWatcher | undefined = watch([...watched], {
    followSymlinks: false,
    ignoreInitial: true,
    // The volume directory itself, never the payload directories in it: every update kubelet
    // makes is the rename of `..data`, an event on the volume directory, and kubelet makes each
    // new payload directory 0700 (os.MkdirTemp) before it chmods it 0755, so an agent running as
    // another UID that followed it in could be refused (EACCES) and fall back to polling for good.
    depth: 0,
    ignored: (p: string) =>
      !watched.has(p) && (isPayloadEntry(path.basename(p)) || volumes.has(path.dirname(p))),
    // `atomic` would hold back unlink events by 100 ms to pair them; the loop re-reads anyway.
    atomic: false,
  });
  watcher.on('all', (event, file) => options.onChange(`${event} ${file}`));
  watcher.on('raw', (event, file) => {
    if (isPayloadEntry(path.basename(String(file)))) return;
    options.onChange(`raw ${event} ${String(file)}`);
  });
  watcher.on('error', (error) => {
    options.onPollingOnly(error as Error);
    void watcher?.close();
    watcher = undefined;
  });

  await new Promise<void>((resolve) => {
    if (signal.aborted) resolve();
    signal.addEventListener('abort', () => resolve(), { once: true });
  });
  clearInterval(poll);
  await watcher?.close();
}
