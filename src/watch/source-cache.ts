// The agent's view of its sources in the API, in controller-runtime's shape: one watch per
// source (api-watch.ts) keeps a cache of SourceStates (digests only), the first use waits for
// every source's initial list, and lookup() reads the cache. The agent's loop only wakes on
// its changes and reads it; it never touches a watch.
//
// The cache is evidence only while its watches are live (api-watch.ts reports a broken one as
// `unreadable`). A cache can still be behind without knowing it (a stalled connection, an event
// in flight while kubelet already wrote the files), so before anything acts on it the agent asks
// confirm() for the sources it would act on:
//  (a) a quorum GET returns what the cache has: confirmed;
//  (b) it returns something else: the cache was stale; it takes the fresh state and that
//      source's watch relists, so the view is whole again;
//  (c) the GET fails (the API unreachable, too slow, refused): not evidence; the source is
//      returned as unconfirmed, with the reason, and the cache is left as it is.
import type { KubeClient } from '../kube/client.ts';
import type { SourceRef } from '../kube/resources.ts';
import { readSource } from '../read/source.ts';
import { refKey, type SourceState, sameView, viewVersion } from '../verify/source.ts';
import { SourceWatch } from './api-watch.ts';

export interface SourceCacheEvents {
  /** A source's state changed (a watch event, a relist, a correction): wake the loop. */
  onChange(): void;
  onRestart(ref: SourceRef, reason: 'closed' | 'error' | 'gone' | 'resync', detail?: string): void;
  /** (b) A quorum read found the cached copy stale; `cached` and `api` name the versions. */
  onStale(ref: SourceRef, cached: string, api: string): void;
}

export interface Confirmation {
  /** (b) Some cached copy was stale and is corrected now. */
  readonly corrected: boolean;
  /** (c) Sources the API could not confirm, by refKey, each `unreadable` with the reason. */
  readonly unconfirmed: ReadonlyMap<string, SourceState>;
}

/** How long the first pass waits for every source's initial list before it decides anyway. */
const INITIAL_SYNC_MS = 30_000;

export class SourceCache {
  private readonly states = new Map<string, SourceState>();
  private readonly watches = new Map<string, SourceWatch>();
  private readonly client: KubeClient;
  private readonly namespace: string;
  private readonly refs: readonly SourceRef[];
  private readonly events: SourceCacheEvents;
  private readonly clock: () => number;

  constructor(
    client: KubeClient,
    namespace: string,
    refs: readonly SourceRef[],
    events: SourceCacheEvents,
    clock: () => number = Date.now,
  ) {
    this.client = client;
    this.namespace = namespace;
    this.refs = refs;
    this.events = events;
    this.clock = clock;
  }

  /** The cached state of `ref`; undefined until its first list arrived. */
  readonly lookup = (ref: SourceRef): SourceState | undefined => this.states.get(refKey(ref));

  /** Every source has a state (its first list arrived, or failed and said why). */
  synced(): boolean {
    return this.refs.every((ref) => this.states.has(refKey(ref)));
  }

  /** One watch per source, until `signal` aborts; resolves when every watch has ended. */
  start(signal: AbortSignal, onError: (ref: SourceRef, error: Error) => void): Promise<void> {
    return Promise.all(
      this.refs.map((ref) => {
        const watch = new SourceWatch(
          this.client,
          this.namespace,
          ref,
          {
            onState: (state) => {
              this.states.set(refKey(ref), state);
              this.events.onChange();
            },
            onRestart: (reason, detail) => this.events.onRestart(ref, reason, detail),
          },
          this.clock,
        );
        this.watches.set(refKey(ref), watch);
        return watch.start(signal).catch((error) => onError(ref, error as Error));
      }),
    ).then(() => undefined);
  }

  /**
   * Waits (briefly) for every source's initial list, so the first pass compares against the API
   * rather than reporting Unknown for what simply has not arrived yet. `sleep` is the loop's
   * own wait, which a change ends early.
   */
  async waitForSync(sleep: (ms: number) => Promise<void>, signal: AbortSignal): Promise<void> {
    const started = this.clock();
    while (!signal.aborted && !this.synced() && this.clock() - started < INITIAL_SYNC_MS) await sleep(1000);
  }

  /** (a), (b), (c) for `refs`. */
  async confirm(refs: readonly SourceRef[]): Promise<Confirmation> {
    const fresh = await Promise.all(refs.map((ref) => readSource(this.client, this.namespace, ref)));
    const unconfirmed = new Map<string, SourceState>();
    let corrected = false;
    refs.forEach((ref, i) => {
      const key = refKey(ref);
      const state = fresh[i] as SourceState;
      if (state.state === 'unreadable') {
        // (c)
        unconfirmed.set(key, {
          ...state,
          reason: `could not confirm the cached copy with a fresh read before acting: ${state.reason}`,
        });
      } else if (!sameView(this.states.get(key), state)) {
        // (b)
        this.events.onStale(ref, viewVersion(this.states.get(key)), viewVersion(state));
        this.states.set(key, state);
        this.watches.get(key)?.resync();
        corrected = true;
      }
    });
    return { corrected, unconfirmed };
  }
}
