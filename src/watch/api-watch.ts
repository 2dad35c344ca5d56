// Follows one ConfigMap or Secret through the API: a list and then a watch, both with a
// `metadata.name` field selector so that RBAC `resourceNames` can limit the agent to exactly its
// sources. Every change is handed over as a SourceState (digests only).
//
// The session, step by step:
//  (1) list by name -> the object's current state, and the list's resourceVersion;
//  (2) watch from that resourceVersion, with bookmarks, so a reconnect resumes where it left
//      off without replaying or missing events;
//  (3) ADDED/MODIFIED -> present, DELETED -> absent, BOOKMARK -> remember the version;
//  (4) the server ends each watch after WATCH_SECONDS: reconnect at once from the last version
//      (a watch request, not a list);
//  (5) 410 Gone (the version was compacted away): back to (1), a fresh list;
//  (6) any other failure: p-retry backoff (0.5 s doubling to 30 s), logged and counted, then
//      resume from the last version if there is one (a relist only without one); a 403 is
//      retried too, slowly, since an admin may fix the Role.
//
// The API server sends a bookmark on a quiet watch only about once a minute, so the inactivity
// limit sits above that interval: a dead connection is still noticed, a quiet one is not killed.
// (client-node's Watch, used before, aborted after 30 s of silence, which re-listed every quiet
// watch every 30 s at idle.)
import type { V1ConfigMap, V1ConfigMapList, V1Secret, V1SecretList } from '@kubernetes/client-node';
import pRetry from 'p-retry';
import type { SourceRef } from '../discover/targets.ts';
import { explainApiError } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { resourcePath, SOURCE_RESOURCE } from '../kube/resources.ts';
import { type SourceState, snapshotSource } from '../verify/source.ts';

export interface SourceWatchEvents {
  onState(state: SourceState): void;
  onRestart(reason: 'closed' | 'error' | 'gone', detail?: string): void;
}

class GoneError extends Error {}

/** The server ends each watch after this long; reconnecting from the last version is cheap. */
const WATCH_SECONDS = 300;
/** Abort a watch that has been silent this long (bookmarks arrive about once a minute). */
const INACTIVITY_MS = 90_000;

export class SourceWatch {
  private resourceVersion: string | undefined;
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

  private get path(): string {
    return resourcePath({ resource: SOURCE_RESOURCE[this.ref.kind], namespace: this.namespace });
  }

  /** A watch event's object: its change time includes when the agent saw it. */
  private toState(obj: V1ConfigMap | V1Secret | undefined): SourceState {
    if (!obj) return { state: 'absent', ref: this.ref };
    return { state: 'present', snapshot: snapshotSource(this.ref, obj, this.clock()) };
  }

  // (1)
  private async list(): Promise<void> {
    const fieldSelector = `metadata.name=${this.ref.name}`;
    try {
      const list = await this.client.get<V1ConfigMapList | V1SecretList>(this.path, { fieldSelector });
      this.resourceVersion = list.metadata?.resourceVersion;
      const item = list.items[0];
      // The first list reports the object as it is; its changedAt comes from the API alone.
      this.events.onState(
        item
          ? { state: 'present', snapshot: snapshotSource(this.ref, item) }
          : { state: 'absent', ref: this.ref },
      );
    } catch (error) {
      const resource = SOURCE_RESOURCE[this.ref.kind];
      const explained = explainApiError(
        error,
        { verb: 'list', resource, namespace: this.namespace, name: this.ref.name },
        this.client.scope,
      );
      this.events.onState({
        state: 'unreadable',
        ref: this.ref,
        reason: `${explained.code}: ${explained.message}`,
      });
      throw explained;
    }
  }

  /** One watch connection, from the last known version; resolves when the server closes it. */
  private async watchOnce(signal: AbortSignal): Promise<void> {
    const query: Record<string, string | boolean | number> = {
      fieldSelector: `metadata.name=${this.ref.name}`,
      allowWatchBookmarks: true,
      timeoutSeconds: WATCH_SECONDS,
    };
    if (this.resourceVersion) query.resourceVersion = this.resourceVersion;
    let failure: Error | undefined;
    const stream = new AbortController();
    const stop = () => stream.abort();
    signal.addEventListener('abort', stop, { once: true });
    try {
      await this.client.watch(
        { path: this.path, query, signal: stream.signal, inactivityMs: INACTIVITY_MS },
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
      if ((error as { code?: number }).code === 410) throw new GoneError('410');
      throw error;
    } finally {
      signal.removeEventListener('abort', stop);
    }
    if (failure) throw failure;
  }

  async start(signal: AbortSignal): Promise<void> {
    let needList = true;
    while (!signal.aborted) {
      try {
        await pRetry(
          async () => {
            if (needList) {
              await this.list();
              needList = false;
            }
            // (2)
            await this.watchOnce(signal);
          },
          {
            retries: Number.POSITIVE_INFINITY,
            minTimeout: 500,
            maxTimeout: 30_000,
            signal,
            onFailedAttempt: ({ error }) => {
              // (5) and (6)
              const gone = error instanceof GoneError;
              if (gone || this.resourceVersion === undefined) {
                needList = true;
                this.resourceVersion = undefined;
              }
              this.events.onRestart(gone ? 'gone' : 'error', gone ? undefined : (error as Error).message);
            },
          },
        );
        // (4)
        if (!signal.aborted) this.events.onRestart('closed');
      } catch (error) {
        if (signal.aborted) return;
        throw error;
      }
    }
  }
}
