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
// client-node's Watch aborts a stream that is silent for 30 s, but the API server sends a
// bookmark on a quiet watch only about once a minute: with the default every quiet watch died
// at 30 s and was re-listed (measured: a list and a watch every 30 s at idle). The inactivity
// limit is raised above the bookmark interval, so a dead connection is still noticed.
import { CoreV1Api, type V1ConfigMap, type V1Secret, Watch } from '@kubernetes/client-node';
import pRetry from 'p-retry';
import type { SourceRef } from '../discover/targets.ts';
import { explainApiError } from '../kube/api-errors.ts';
import type { KubeClient } from '../kube/client.ts';
import { SOURCE_RESOURCE } from '../kube/resources.ts';
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
    return `/api/v1/namespaces/${this.namespace}/${SOURCE_RESOURCE[this.ref.kind]}`;
  }

  /** A watch event's object: its change time includes when the agent saw it. */
  private toState(obj: V1ConfigMap | V1Secret | undefined): SourceState {
    if (!obj) return { state: 'absent', ref: this.ref };
    return { state: 'present', snapshot: snapshotSource(this.ref, obj, this.clock()) };
  }

  // (1)
  private async list(): Promise<void> {
    const core = this.client.api(CoreV1Api);
    const fieldSelector = `metadata.name=${this.ref.name}`;
    try {
      const list =
        this.ref.kind === 'ConfigMap'
          ? await core.listNamespacedConfigMap({ namespace: this.namespace, fieldSelector })
          : await core.listNamespacedSecret({ namespace: this.namespace, fieldSelector });
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
  private watchOnce(signal: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        if (error) reject(error);
        else resolve();
      };
      const query: Record<string, string | boolean | number> = {
        fieldSelector: `metadata.name=${this.ref.name}`,
        allowWatchBookmarks: true,
        timeoutSeconds: WATCH_SECONDS,
      };
      if (this.resourceVersion) query.resourceVersion = this.resourceVersion;
      const watch = new Watch(this.client.config);
      (watch as unknown as { requestTimeoutMs: number }).requestTimeoutMs = INACTIVITY_MS;
      watch
        .watch(
          this.path,
          query,
          // (3)
          (type: string, obj: V1ConfigMap & { code?: number; message?: string }) => {
            if (type === 'ERROR') {
              finish(obj.code === 410 ? new GoneError(obj.message) : new Error(obj.message ?? 'watch error'));
              return;
            }
            if (obj?.metadata?.resourceVersion) this.resourceVersion = obj.metadata.resourceVersion;
            if (type === 'BOOKMARK') return;
            this.events.onState(type === 'DELETED' ? this.toState(undefined) : this.toState(obj));
          },
          (error: unknown) => {
            if ((error as { code?: number; statusCode?: number })?.statusCode === 410)
              finish(new GoneError('410'));
            else finish(error ?? undefined);
          },
        )
        .then((controller) => {
          if (signal.aborted) controller.abort();
          signal.addEventListener(
            'abort',
            () => {
              controller.abort();
              finish();
            },
            { once: true },
          );
        }, finish);
    });
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
