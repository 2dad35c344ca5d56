// Digests of kubelet's new payload directory, taken while kubelet writes it, before it swaps
// `..data` to it: the pass that follows the swap then has nothing left to read.
//
// Why: a kubelet update writes every file of the volume into a new `..<timestamp>` directory
// and only then renames `..data` to point at it. The app can reload only after the swap, and in
// reload mode the agent tells it to only after its pass has read every file and compared it
// with the API: for 100 keys that read is 400 system calls (open, fstat, read, close) and about
// 2.5 ms, most of the time between the swap and the reload POST (docs/benchmarks.md). kubelet
// itself takes 5 to 15 ms between making the directory and the swap (its own AtomicWriter, 100
// keys, measured), time in which the agent has nothing else to do.
//
// How a digest can be trusted without reading the file again at the pass:
//  1. The file watch (file-watch.ts) sets an inotify watch on the new directory as soon as it
//     appears, and only then tells begin(): every write into the directory after that point
//     has an event.
//  2. The files are read and hashed after begin() (a listing of the directory first, then each
//     file named by an event), so a write before the watch is in what was read.
//  3. Every event naming a file drops its digest and reads it again later: a write made while
//     or after it was read drops what that read gave. The events of one inotify instance are
//     handed out in the order they happened, so the `..data` rename that wakes the pass comes
//     after the events of every write before it, and the pass sees no digest a write outdated.
//  4. The pass takes the digests once (take()): a pass after it reads the files or stats
//     them against their identity, as for any other file. The trust in the watch lasts from
//     the write to the first pass after the swap, a few milliseconds.
// The one hole is the kernel's: when its inotify queue overflows it drops events, and libuv
// (node's fs.watch) drops the overflow notice too. It takes 16384 events queued in the agent's
// one instance (the default fs.inotify.max_queued_events) while its thread is busy; a
// digest a dropped event outdated would then be used by that one pass.
//
// Only files directly in the payload directory are kept: a watch does not see into its
// subdirectories, so a key with a nested path (`items: [{path: a/b}]`) is read by the pass.
import fs from 'node:fs';
import { type HashedFile, hashFile } from './volume.ts';

/** About 0.25 ms of hashing for short files (25 us each, measured beside kubelet's writes). */
const FILES_PER_TURN = 10;

interface Payload {
  readonly digests: Map<string, HashedFile>;
  /** Names whose digest is missing or outdated; 'all' until the directory was first listed. */
  pending: Set<string> | 'all';
}

export class PayloadDigests {
  /** By `<volume dir>/<payload dir name>`. */
  private readonly payloads = new Map<string, Payload>();
  private scheduled = false;
  /** Runs the hashing soon, after the events already queued: setImmediate in the agent. */
  private readonly later: (run: () => void) => void;

  constructor(later: (run: () => void) => void = (run) => setImmediate(run)) {
    this.later = later;
  }

  /** A watch of `dir/payload` is in place: from now on every write into it is told to changed(). */
  begin(dir: string, payload: string): void {
    this.payloads.set(where(dir, payload), { digests: new Map(), pending: 'all' });
    this.schedule();
  }

  /**
   * An event of the payload's watch named `name` (null: any file may have changed). False when
   * the payload is no longer followed (taken, or ended): its watch has nothing left to do.
   */
  changed(dir: string, payload: string, name: string | null): boolean {
    const p = this.payloads.get(where(dir, payload));
    if (!p) return false;
    if (name === null) {
      p.digests.clear();
      p.pending = 'all';
    } else {
      p.digests.delete(name);
      if (p.pending !== 'all') p.pending.add(name);
    }
    this.schedule();
    return true;
  }

  /** Whether a hashing turn is asked for: files events named are still to be hashed. */
  get hashing(): boolean {
    return this.scheduled;
  }

  /** The payload directory is gone, or no longer watched: nothing of it may be used. */
  end(dir: string, payload: string): void {
    this.payloads.delete(where(dir, payload));
  }

  /** Every watch is gone (polling only, or stopped). */
  clear(): void {
    this.payloads.clear();
  }

  /**
   * The digests of `dir/payload`'s files that no event has outdated, by file name, handed over
   * once: the payload is forgotten, so no later pass relies on the watch alone.
   */
  readonly take = (dir: string, payload: string): ReadonlyMap<string, HashedFile> | undefined => {
    const key = where(dir, payload);
    const p = this.payloads.get(key);
    this.payloads.delete(key);
    return p?.digests;
  };

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.later(() => {
      this.scheduled = false;
      this.hashPending();
    });
  }

  /**
   * Hashes the files events asked for, FILES_PER_TURN at most, and asks for another turn if
   * some are left: the swap's event, handed out between turns, then waits for a few files'
   * hashing at most, never for a whole payload's.
   */
  private hashPending(): void {
    let budget = FILES_PER_TURN;
    for (const [path, p] of this.payloads) {
      if (p.pending === 'all') p.pending = new Set(listing(path));
      for (const name of p.pending) {
        if (budget === 0) {
          this.schedule();
          return;
        }
        budget -= 1;
        p.pending.delete(name);
        try {
          p.digests.set(name, hashFile(`${path}/${name}`));
        } catch {
          // Gone, a directory, not a regular file: left for the pass to read and judge.
          p.digests.delete(name);
        }
      }
    }
  }
}

function where(dir: string, payload: string): string {
  return `${dir.endsWith('/') ? dir.slice(0, -1) : dir}/${payload}`;
}

function listing(dir: string): string[] {
  try {
    return fs.readdirSync(dir);
  } catch {
    return [];
  }
}
