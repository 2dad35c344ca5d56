// The node agent's view of the ConfigMaps and Secrets its Pods read: one API watch per distinct
// object on the node (api-watch.ts), shared by every Pod that reads it, and dropped when the
// last such Pod goes. Twenty replicas of a Deployment on one node that mount the same ConfigMap
// hold one watch of it, not twenty; a Pod not served is never read.
//
// Each Pod gets a view (view()): its lookup, the quorum read before it acts (confirm-sources.ts;
// a stale copy is corrected for every Pod that reads it, and its watch relists), the wait
// for its sources' first lists, and release(), which the node agent calls when it stops
// serving the Pod. A change of an object wakes every Pod that reads it.
import type { KubeClient } from '../kube/client.ts';
import type { SourceRef } from '../kube/resources.ts';
import { refKey, type SourceState } from '../verify/source.ts';
import { SourceWatch } from './api-watch.ts';
import { type Confirmation, confirmSources, waitForInitialSync } from './confirm-sources.ts';

export interface SharedSourceEvents {
  onRestart(
    namespace: string,
    ref: SourceRef,
    reason: 'closed' | 'error' | 'gone' | 'resync',
    detail?: string,
  ): void;
  onStale(namespace: string, ref: SourceRef, cached: string, api: string): void;
  onError(namespace: string, ref: SourceRef, error: Error): void;
}

/** One Pod's view of the shared cache. */
export interface PodSourceView {
  readonly lookup: (ref: SourceRef) => SourceState | undefined;
  confirm(refs: readonly SourceRef[]): Promise<Confirmation>;
  waitForSync(sleep: (ms: number) => Promise<void>, signal: AbortSignal): Promise<void>;
  /** The Pod is no longer served: the watches only it held end. */
  release(): void;
}

interface Entry {
  readonly watch: SourceWatch;
  state: SourceState | undefined;
  readonly users: Set<() => void>;
  readonly stop: AbortController;
}

export class SharedSourceCache {
  private readonly entries = new Map<string, Entry>();
  private readonly client: KubeClient;
  private readonly events: SharedSourceEvents;
  private readonly clock: () => number;
  private readonly signal: AbortSignal;

  /** `signal` ends every watch (the node agent stops). */
  constructor(
    client: KubeClient,
    events: SharedSourceEvents,
    signal: AbortSignal,
    clock: () => number = Date.now,
  ) {
    this.client = client;
    this.events = events;
    this.signal = signal;
    this.clock = clock;
  }

  /** API watches held now: one per distinct object some served Pod reads. */
  watches(): number {
    return this.entries.size;
  }

  /** A view for one Pod of `namespace` reading `refs`; `onChange` wakes it when one changes. */
  view(namespace: string, refs: readonly SourceRef[], onChange: () => void): PodSourceView {
    const keyOf = (ref: SourceRef) => `${namespace}/${refKey(ref)}`;
    for (const ref of refs) this.acquire(namespace, ref, keyOf(ref)).users.add(onChange);
    let released = false;
    const lookup = (ref: SourceRef) => this.entries.get(keyOf(ref))?.state;
    return {
      lookup,
      confirm: (asked) => this.confirm(namespace, asked, keyOf),
      waitForSync: (sleep, signal) =>
        waitForInitialSync(() => refs.every((ref) => lookup(ref) !== undefined), sleep, signal, this.clock),
      release: () => {
        if (released) return;
        released = true;
        for (const ref of refs) {
          const key = keyOf(ref);
          const entry = this.entries.get(key);
          if (!entry) continue;
          entry.users.delete(onChange);
          if (entry.users.size === 0) {
            entry.stop.abort();
            this.entries.delete(key);
          }
        }
      },
    };
  }

  private acquire(namespace: string, ref: SourceRef, key: string): Entry {
    const held = this.entries.get(key);
    if (held) return held;
    const stop = new AbortController();
    const entry: Entry = {
      state: undefined,
      users: new Set(),
      stop,
      watch: new SourceWatch(
        this.client,
        namespace,
        ref,
        {
          onState: (state) => {
            entry.state = state;
            for (const wake of entry.users) wake();
          },
          onRestart: (reason, detail) => this.events.onRestart(namespace, ref, reason, detail),
        },
        this.clock,
      ),
    };
    this.entries.set(key, entry);
    entry.watch
      .start(AbortSignal.any([this.signal, stop.signal]))
      .catch((error) => this.events.onError(namespace, ref, error as Error));
    return entry;
  }

  /** The quorum read before acting; a stale copy is corrected for every Pod that reads it. */
  private confirm(
    namespace: string,
    refs: readonly SourceRef[],
    keyOf: (ref: SourceRef) => string,
  ): Promise<Confirmation> {
    return confirmSources(
      this.client,
      namespace,
      refs,
      (ref) => {
        const entry = this.entries.get(keyOf(ref));
        return (
          entry && {
            state: entry.state,
            correct: (fresh) => {
              entry.state = fresh;
              entry.watch.resync();
              for (const wake of entry.users) wake();
            },
          }
        );
      },
      (ref, cached, api) => this.events.onStale(namespace, ref, cached, api),
    );
  }
}
