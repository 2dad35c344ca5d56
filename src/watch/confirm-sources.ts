// What a cache of sources does before anything acts on it, for the sidecar's cache
// (source-cache.ts) and the node agent's shared one (shared-source-cache.ts) alike.
//
// A cache is evidence only while its watches are live (api-watch.ts reports a broken one as
// `unreadable`), and it can still be behind without knowing it (a stalled connection, an event
// in flight while kubelet already wrote the files). So before acting the agent asks for a quorum
// GET of each source it would act on (confirmSources):
//  (a) the GET returns what the cache has: confirmed;
//  (b) it returns something else: the cache was stale; it takes the fresh state and that
//      source's watch relists, so the view is whole again;
//  (c) the GET fails (the API unreachable, too slow, refused): not evidence; the source is
//      returned as unconfirmed, with the reason, and the cache is left as it is.
// And the first pass waits (briefly) for every source's first list (waitForInitialSync).
import type { KubeClient } from '../kube/client.ts';
import type { SourceRef } from '../kube/resources.ts';
import { readSource } from '../read/source.ts';
import { refKey, type SourceState, sameView, viewVersion } from '../verify/source.ts';

export interface Confirmation {
  /** (b) Some cached copy was stale and is corrected now. */
  readonly corrected: boolean;
  /** (c) Sources the API could not confirm, by refKey, each `unreadable` with the reason. */
  readonly unconfirmed: ReadonlyMap<string, SourceState>;
}

/** One source's place in a cache: what it holds, and how it takes a fresher state (b). */
export interface CachedSource {
  readonly state: SourceState | undefined;
  /** Take `fresh`, relist the source's watch, wake whoever reads it. */
  correct(fresh: SourceState): void;
}

/**
 * (a), (b), (c) for `refs`. `cached(ref)` is undefined where the cache no longer holds the source
 * (a node agent's Pod released meanwhile): nothing to correct there. `onStale` names the versions.
 */
export async function confirmSources(
  client: KubeClient,
  namespace: string,
  refs: readonly SourceRef[],
  cached: (ref: SourceRef) => CachedSource | undefined,
  onStale: (ref: SourceRef, cachedVersion: string, apiVersion: string) => void,
): Promise<Confirmation> {
  const fresh = await Promise.all(refs.map((ref) => readSource(client, namespace, ref)));
  const unconfirmed = new Map<string, SourceState>();
  let corrected = false;
  refs.forEach((ref, i) => {
    const state = fresh[i] as SourceState;
    const held = cached(ref);
    if (state.state === 'unreadable') {
      // (c)
      unconfirmed.set(refKey(ref), {
        ...state,
        reason: `could not confirm the cached copy with a fresh read before acting: ${state.reason}`,
      });
    } else if (held && !sameView(held.state, state)) {
      // (b)
      onStale(ref, viewVersion(held.state), viewVersion(state));
      held.correct(state);
      corrected = true;
    }
  });
  return { corrected, unconfirmed };
}

/** How long the first pass waits for every source's initial list before it decides anyway. */
const INITIAL_SYNC_MS = 30_000;

/**
 * Waits (briefly) for every source's initial list, so the first pass compares against the API
 * rather than reporting Unknown for what simply has not arrived yet. `sleep` is the loop's own
 * wait, which a change ends early.
 */
export async function waitForInitialSync(
  synced: () => boolean,
  sleep: (ms: number) => Promise<void>,
  signal: AbortSignal,
  clock: () => number,
): Promise<void> {
  const started = clock();
  while (!signal.aborted && !synced() && clock() - started < INITIAL_SYNC_MS) await sleep(1000);
}
