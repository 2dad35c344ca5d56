// The agent's view of its sources in the API, in controller-runtime's shape: one watch per
// source (api-watch.ts) keeps a cache of SourceStates (digests only), the first use waits for
// every source's initial list, and lookup() reads the cache. The agent's loop only wakes on
// its changes and reads it; it never touches a watch.
//
// Before anything acts on it, confirm() asks the API for the sources it would act on
// (confirm-sources.ts: a quorum read; a stale copy is corrected and its watch relists).
import type { KubeClient } from '../kube/client.ts';
import type { SourceRef } from '../kube/resources.ts';
import { refKey, type SourceState } from '../verify/source.ts';
import { SourceWatch } from './api-watch.ts';
import { type Confirmation, confirmSources, waitForInitialSync } from './confirm-sources.ts';

export interface SourceCacheEvents {
  /** A source's state changed (a watch event, a relist, a correction): wake the loop. */
  onChange(): void;
  onRestart(ref: SourceRef, reason: 'closed' | 'error' | 'gone' | 'resync', detail?: string): void;
  /** A quorum read found the cached copy stale; `cached` and `api` name the versions. */
  onStale(ref: SourceRef, cached: string, api: string): void;
}

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

  /** Waits (briefly) for every source's initial list (confirm-sources.ts). */
  waitForSync(sleep: (ms: number) => Promise<void>, signal: AbortSignal): Promise<void> {
    return waitForInitialSync(() => this.synced(), sleep, signal, this.clock);
  }

  /** The quorum read before acting, for `refs` (confirm-sources.ts). */
  confirm(refs: readonly SourceRef[]): Promise<Confirmation> {
    return confirmSources(
      this.client,
      this.namespace,
      refs,
      (ref) => ({
        state: this.states.get(refKey(ref)),
        correct: (fresh) => {
          this.states.set(refKey(ref), fresh);
          this.watches.get(refKey(ref))?.resync();
        },
      }),
      (ref, cached, api) => this.events.onStale(ref, cached, api),
    );
  }
}
