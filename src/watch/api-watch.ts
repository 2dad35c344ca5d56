// Follows one ConfigMap or Secret through the API: a list and then a watch, both with a
// `metadata.name` field selector so that RBAC `resourceNames` can limit the agent to exactly its
// sources. Every change is handed over as a SourceState (digests only).
//
// The cached state is evidence only while the watch is live and synced: a list proved it, and
// the watch that follows has lost nothing since. The moment that stops being true the source
// is reported `unreadable`, so its targets are Unknown and nothing acts on them, until a fresh
// list proves a view again. (Trusting the last copy across a break caused a false restart: a
// change made during a partition reaches the files through kubelet, and an old cache then calls
// the correct files drift; issue "Never act on a stale view".)
//
// The session, step by step:
//  (1) list by name -> the object's current state, and the list's resourceVersion;
//  (2) watch from that resourceVersion, with bookmarks;
//  (3) ADDED/MODIFIED -> present, DELETED -> absent, BOOKMARK -> remember the version;
//  (4) the server ends each watch after the timeoutSeconds asked of it (watchSeconds): a clean
//      end loses nothing, so reconnect at once from the last version (a watch request, not a
//      list), still live;
//  (5) 410 Gone (the version left the server's watch cache, e.g. after an API server restart):
//      not live; relist at once, with no backoff, since the server is up and answering;
//  (6) any other failure (connection refused or reset, a silent stream, a non-2xx answer):
//      not live; p-retry backoff (watch-forever.ts: 0.5 s doubling to 8 s, randomized so replicas
//      do not return in step), logged and counted, then a fresh list. A 403 is retried too,
//      slowly, since an admin may fix the Role;
//  (7) resync() (the agent saw a quorum read disagree with this cache): drop the stream and
//      relist, as in (5).
//
// Why a quiet watch needs care: the API server's watch cache sends a bookmark about once a
// minute, but only with a resourceVersion newer than the one the watch started from
// (k8s.io/apiserver's cacheWatcher.process), and that version moves only when some ConfigMap (or
// Secret) in the cluster changes, or at etcd's progress notifications (every 10 minutes by
// default). In a cluster where none changed, a watch resumed from the last version carries
// nothing until the server ends it. Over HTTP/1.1 with the server's end at 300 s the agent took
// such a watch for dead at 90 s, reported its targets Unknown and listed again, every 90 s (seen
// on the real node, 2026-12-06). Now the transport pings the HTTP/2 connection of a silent watch
// and keeps it while the ping is answered (transport.ts 4-6), so the watch can last as long as
// client-go's do; over HTTP/1.1 the server is asked to end it within a minute instead.
import type { V1ConfigMap, V1ConfigMapList, V1Secret, V1SecretList } from '@kubernetes/client-node';
import type { SourceRef } from '../discover/targets.ts';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { type ResourceRef, SOURCE_RESOURCE } from '../kube/resources.ts';
import { type SourceState, snapshotSource } from '../verify/source.ts';
import { watchForever } from './watch-forever.ts';

export interface SourceWatchEvents {
  onState(state: SourceState): void;
  onRestart(reason: 'closed' | 'error' | 'gone' | 'resync', detail?: string): void;
}

class GoneError extends Error {}
class ResyncRequested extends Error {}

/**
 * The timeoutSeconds of the next watch: the server ends the watch then, and the agent resumes
 * from the last version (a watch request served from the API server's watch cache, a new stream
 * of the connection the agent already has).
 * - A quiet watch kept (HTTP/2): 5 to 10 minutes, client-go's reflector's choice, random so that
 *   replicas started together do not all resume in the same second.
 * - Not kept (HTTP/1.1): 60 s, below INACTIVITY_MS, since only the server's clean end tells a
 *   quiet watch from a dead one there.
 */
export function watchSeconds(keepsQuietWatches: boolean, random: () => number = Math.random): number {
  return keepsQuietWatches ? Math.round(300 * (1 + random())) : 60;
}
/**
 * A watch silent this long has its connection pinged (HTTP/2): kept if answered, failed if not;
 * over HTTP/1.1 it is taken for dead.
 */
const INACTIVITY_MS = 90_000;
/**
 * The longest wait between attempts while the API cannot be reached. Short enough that an
 * agent is not blind for long after the API is back (it was 30 s), long enough, with jitter,
 * that every replica in a cluster does not relist at once.
 */
/** Relists at once after a 410 or a resync before the backoff applies. */
const QUICK_RELISTS = 2;

export class SourceWatch {
  private resourceVersion: string | undefined;
  private needList = true;
  private stream: AbortController | undefined;
  private readonly client: KubeClient;
  private readonly namespace: string;
  private readonly ref: SourceRef;
  private readonly events: SourceWatchEvents;
  private readonly clock: () => number;

  constructor(
    client: KubeClient,
    namespace: string,
    ref: SourceRef,
    events: SourceWatchEvents,
    clock: () => number = Date.now,
  ) {
    this.client = client;
    this.namespace = namespace;
    this.ref = ref;
    this.events = events;
    this.clock = clock;
  }

  private get collection(): ResourceRef {
    return { resource: SOURCE_RESOURCE[this.ref.kind], namespace: this.namespace };
  }

  /** A watch event's object: its change time includes when the agent saw it. */
  private toState(obj: V1ConfigMap | V1Secret | undefined): SourceState {
    if (!obj) return { state: 'absent', ref: this.ref };
    return { state: 'present', snapshot: snapshotSource(this.ref, obj, this.clock()) };
  }

  /** The cache is no longer evidence: its targets become Unknown until a list proves a view. */
  private notLive(why: string): void {
    this.needList = true;
    this.resourceVersion = undefined;
    this.events.onState({ state: 'unreadable', ref: this.ref, reason: `API watch not live: ${why}` });
  }

  /** (7) Drop the current stream and relist at once. */
  resync(): void {
    this.needList = true;
    this.stream?.abort(new ResyncRequested('resync'));
  }

  // (1)
  private async list(): Promise<void> {
    const fieldSelector = `metadata.name=${this.ref.name}`;
    const list = await this.client.get<V1ConfigMapList | V1SecretList>(this.collection, { fieldSelector });
    this.resourceVersion = list.metadata?.resourceVersion;
    this.needList = false;
    const item = list.items[0];
    // The first list reports the object as it is; its changedAt comes from the API alone.
    this.events.onState(
      item
        ? { state: 'present', snapshot: snapshotSource(this.ref, item) }
        : { state: 'absent', ref: this.ref },
    );
  }

  /** One watch connection, from the last known version; resolves when the server closes it. */
  private async watchOnce(signal: AbortSignal): Promise<void> {
    const query: Record<string, string | boolean | number> = {
      fieldSelector: `metadata.name=${this.ref.name}`,
      allowWatchBookmarks: true,
      timeoutSeconds: watchSeconds(this.client.keepsQuietWatches()),
    };
    if (this.resourceVersion) query.resourceVersion = this.resourceVersion;
    let failure: Error | undefined;
    const stream = new AbortController();
    this.stream = stream;
    const stop = () => stream.abort();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await this.client.watch(
        { target: this.collection, query, signal: stream.signal, inactivityMs: INACTIVITY_MS },
        // (3)
        ({ type, object }) => {
          const obj = object as (V1ConfigMap & { code?: number; message?: string }) | undefined;
          if (type === 'ERROR') {
            failure =
              obj?.code === 410 ? new GoneError(obj.message) : new Error(obj?.message ?? 'watch error');
            stream.abort();
            return;
          }
          if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
          if (type === 'BOOKMARK') return;
          this.events.onState(type === 'DELETED' ? this.toState(undefined) : this.toState(obj));
        },
      );
    } catch (error) {
      if (apiStatus(error) === 410) throw new GoneError('410');
      // A refused or failed watch says who was refused what (the client explained it).
      throw error;
    } finally {
      signal.removeEventListener('abort', stop);
      this.stream = undefined;
    }
    if (failure) throw failure;
    if (stream.signal.reason instanceof ResyncRequested) throw stream.signal.reason;
  }

  /**
   * One run of list-and-watch: returns on a clean end of the watch (4); a 410 or a resync
   * relists at once (5, 7), up to QUICK_RELISTS times in a row (a server that answers 410 to
   * every fresh list is in a state a relist does not fix: then the backoff applies); other
   * failures throw for p-retry (6).
   */
  private async session(signal: AbortSignal): Promise<void> {
    for (let quick = 0; ; quick++) {
      if (this.needList) await this.list();
      try {
        // (2)
        await this.watchOnce(signal);
        return;
      } catch (error) {
        const relist = error instanceof GoneError || error instanceof ResyncRequested;
        if (!relist || quick >= QUICK_RELISTS || signal.aborted) throw error;
        this.events.onRestart(error instanceof GoneError ? 'gone' : 'resync');
        this.notLive(error instanceof GoneError ? '410 Gone, relisting' : 'resync requested, relisting');
      }
    }
  }

  async start(signal: AbortSignal): Promise<void> {
    await watchForever((s) => this.session(s), signal, {
      // (4)
      onClosed: () => this.events.onRestart('closed'),
      // (6)
      onFailure: (error) => {
        const gone = error instanceof GoneError;
        const detail = gone ? `410 Gone after ${QUICK_RELISTS} relists in a row` : error.message;
        this.notLive(detail);
        this.events.onRestart(gone ? 'gone' : 'error', detail);
      },
    });
  }
}
