// Follows a collection through the API with a field selector, as kubelet follows the Pods bound
// to its node (`spec.nodeName=<node>`): a list, then a watch from its resourceVersion, handing
// over the whole set after every change. The node agent follows its node's Pods in each of its
// namespaces, and each namespace itself (by name, for its opt-in label), this way.
//
// The session, step by step (as api-watch.ts, for a collection):
//  (1) list with the field selector -> the set, and the list's resourceVersion;
//  (2) watch from that version, with bookmarks and a server-side end (watchSeconds);
//  (3) ADDED/MODIFIED set an item, DELETED removes it, BOOKMARK moves the version; the set is
//      handed over after each change;
//  (4) the server's clean end: watch again from the last version;
//  (5) 410 Gone: list again at once;
//  (6) any other failure: p-retry backoff (0.5 s doubling to 8 s, randomized), told, then a
//      fresh list. Until that list, the last set handed over stands (a Pod the node agent
//      serves is not dropped because its watch broke), and `live` says it may be behind.
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { apiStatus } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import type { ResourceRef } from '../kube/resources.ts';
import { watchSeconds } from './api-watch.ts';
import { watchForever } from './watch-forever.ts';

export interface CollectionEvents<T> {
  /** The whole set, by name, after every change; `live` false while it may be behind. */
  onSet(items: ReadonlyMap<string, T>, live: boolean): void;
  onRestart(reason: 'closed' | 'error' | 'gone', detail?: string): void;
}

interface Listed<T> {
  readonly metadata?: { readonly resourceVersion?: string };
  readonly items: T[];
}

class GoneError extends Error {}

/** A watch silent this long has its connection pinged (HTTP/2), as in api-watch.ts. */
const INACTIVITY_MS = 90_000;

export class CollectionWatch<T extends { readonly metadata?: V1ObjectMeta }> {
  private readonly items = new Map<string, T>();
  private resourceVersion: string | undefined;
  private needList = true;
  private readonly client: KubeClient;
  private readonly collection: ResourceRef;
  private readonly fieldSelector: string;
  private readonly events: CollectionEvents<T>;

  constructor(
    client: KubeClient,
    collection: ResourceRef,
    fieldSelector: string,
    events: CollectionEvents<T>,
  ) {
    this.client = client;
    this.collection = collection;
    this.fieldSelector = fieldSelector;
    this.events = events;
  }

  // (1)
  private async list(): Promise<void> {
    const list = await this.client.get<Listed<T>>(this.collection, { fieldSelector: this.fieldSelector });
    this.resourceVersion = list.metadata?.resourceVersion;
    this.needList = false;
    this.items.clear();
    for (const item of list.items) this.items.set(item.metadata?.name ?? '', item);
    this.events.onSet(this.items, true);
  }

  // (2), (3)
  private async watchOnce(signal: AbortSignal): Promise<void> {
    let failure: Error | undefined;
    const stream = new AbortController();
    const stop = () => stream.abort();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await this.client.watch(
        {
          target: this.collection,
          query: {
            fieldSelector: this.fieldSelector,
            allowWatchBookmarks: true,
            timeoutSeconds: watchSeconds(this.client.keepsQuietWatches()),
            ...(this.resourceVersion ? { resourceVersion: this.resourceVersion } : {}),
          },
          signal: stream.signal,
          inactivityMs: INACTIVITY_MS,
        },
        ({ type, object }) => {
          const obj = object as T & { code?: number; message?: string };
          if (type === 'ERROR') {
            failure =
              obj?.code === 410 ? new GoneError(obj.message) : new Error(obj?.message ?? 'watch error');
            stream.abort();
            return;
          }
          if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
          if (type === 'BOOKMARK') return;
          const name = obj.metadata?.name ?? '';
          if (type === 'DELETED') this.items.delete(name);
          else this.items.set(name, obj);
          this.events.onSet(this.items, true);
        },
      );
    } catch (error) {
      if (apiStatus(error) === 410) throw new GoneError('410');
      throw error;
    } finally {
      signal.removeEventListener('abort', stop);
    }
    if (failure) throw failure;
  }

  private async session(signal: AbortSignal): Promise<void> {
    for (;;) {
      if (this.needList) await this.list();
      try {
        await this.watchOnce(signal);
        return;
      } catch (error) {
        if (!(error instanceof GoneError) || signal.aborted) throw error;
        // (5)
        this.events.onRestart('gone');
        this.needList = true;
      }
    }
  }

  /** Lists and watches until `signal` aborts. */
  async start(signal: AbortSignal): Promise<void> {
    await watchForever((s) => this.session(s), signal, {
      // (4)
      onClosed: () => this.events.onRestart('closed'),
      // (6)
      onFailure: (error) => {
        this.needList = true;
        this.events.onSet(this.items, false);
        this.events.onRestart('error', error.message);
      },
    });
  }
}
