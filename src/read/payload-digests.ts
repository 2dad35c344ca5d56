// Digests of kubelet's new payload directory, taken while kubelet writes it, before it swaps
// `..data` to it: the pass that follows the swap then has nothing left to read, nor do the passes
// after it while nothing writes to the payload.
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
//  4. The pass takes the digests (take()), hashing first the files whose events came after the
//     last hashing turn. From then on the payload is what the app reads, and kubelet never
//     writes to it again: the first event of its watch after that (a person's write, a chmod,
//     kubelet's chown for an fsGroup or its removal of the directory at the next update) drops
//     every digest of it at once, and the passes after read or stat the files as any other.
//     Until then a later pass takes the same digests: the pass that confirms a reload right
//     after it was sent, and the pass on the API's next change, read nothing either (each read
//     every file again before, since files written within RACY_MS of a pass are not kept by
//     the reader's own cache: two full reads per update, measured in the reload bench).
// The holes are the kernel's and the event loop's: when its inotify queue overflows the kernel
// drops events, and libuv (node's fs.watch) drops the overflow notice too (it takes 16384 events
// queued in the agent's one instance, the default fs.inotify.max_queued_events, while its thread
// is busy); and a write to the payload after the swap whose event is not yet handed out when a
// pass runs is seen by the pass after the event, as a write made just after that pass would be.
// So the taken digests are dropped at least once every --resync too (distrust()), as the
// volume's listing is.
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
  /** A pass took the digests: the payload is `..data`'s, and any event of it drops them all. */
  taken: boolean;
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
    this.payloads.set(where(dir, payload), { digests: new Map(), pending: 'all', taken: false });
    this.schedule();
  }

  /**
   * An event of the payload's watch named `name` (null: any file may have changed). False when
   * the payload is no longer followed (ended, or dropped by this event after a pass took its
   * digests): its watch has nothing left to do.
   */
  changed(dir: string, payload: string, name: string | null): boolean {
    const key = where(dir, payload);
    const p = this.payloads.get(key);
    if (!p) return false;
    if (p.taken) {
      this.payloads.delete(key);
      return false;
    }
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
   * Drops every taken payload's digests (not those of a payload kubelet is still writing): the
   * passes after read or stat the files, so a lost event outdates nothing for longer than this.
   */
  distrust(): void {
    for (const [key, p] of this.payloads) if (p.taken) this.payloads.delete(key);
  }

  /**
   * The digests of `dir/payload`'s files that no event has outdated, by file name, once the files
   * still pending are hashed. The same digests for every pass until an event of the payload or
   * distrust() drops them (point 4 above); undefined where there are none.
   */
  readonly take = (dir: string, payload: string): ReadonlyMap<string, HashedFile> | undefined => {
    const path = where(dir, payload);
    const p = this.payloads.get(path);
    if (!p) return undefined;
    if (!p.taken) {
      hashSome(path, p, Number.POSITIVE_INFINITY);
      p.taken = true;
    }
    return p.digests;
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
      if (p.taken) continue;
      budget = hashSome(path, p, budget);
      if (p.pending !== 'all' && p.pending.size > 0) {
        this.schedule();
        return;
      }
    }
  }
}

/** Hashes `budget` of `p`'s pending files in `path` at most; returns what is left of the budget. */
function hashSome(path: string, p: Payload, budget: number): number {
  if (p.pending === 'all') p.pending = new Set(listing(path));
  for (const name of p.pending) {
    if (budget === 0) return 0;
    budget -= 1;
    p.pending.delete(name);
    try {
      p.digests.set(name, hashFile(`${path}/${name}`));
    } catch {
      // Gone, a directory, not a regular file: left for the pass to read and judge.
      p.digests.delete(name);
    }
  }
  return budget;
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
