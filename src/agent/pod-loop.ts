// One Pod's reconciler on a loop of its own, with the watches of its files: what the sidecar
// runs once (agent.ts) and the node agent runs for each Pod it serves (node-agent.ts). The API
// side (the source watches and their cache) is the caller's: the sidecar's own, or the node's
// shared one.
//
// Steps:
//  (1) watch the Pod's volume directories (watch/file-watch.ts): every event only wakes the
//      loop; the watch also tells the reader which volume entries changed and hashes kubelet's
//      new payloads while it writes them (read/payload-digests.ts);
//  (2) wait for the file watches and for the sources' first lists, so the first pass compares
//      against the API and no change falls between it and the watch that should see it;
//  (3) reconcile (reconciler.ts), then sleep until a wake-up, the pass's deadline or --resync;
//      at least once every --resync a pass reads the volumes' own entries again and reads the
//      files of kubelet's current payload, rather than keep what the file watch said was
//      unchanged: an overflowed inotify queue loses events silently.
import type { Logger } from 'pino';
import type { LoopConfig } from '../config/agent-config.ts';
import { ownerResolver } from '../heal/owner.ts';
import { PayloadDigests } from '../read/payload-digests.ts';
import { volumeReader } from '../read/volume.ts';
import { watchFiles } from '../watch/file-watch.ts';
import { VolumeEntries } from '../watch/volume-entries.ts';
import type { Liveness } from './liveness.ts';
import { runLoop, type Wakeup } from './loop.ts';
import type { PodMetrics } from './pod-metrics.ts';
import { createReconciler, type SourceView } from './reconciler.ts';
import type { Runtime } from './runtime.ts';

export interface PodLoopDeps {
  readonly rt: Runtime;
  /** The API's view of the Pod's sources, and the wait for their first lists. */
  readonly view: SourceView & {
    waitForSync(sleep: (ms: number) => Promise<void>, signal: AbortSignal): Promise<void>;
  };
  readonly wakeup: Wakeup;
  readonly metrics: PodMetrics;
  /** inotify was refused: the files are polled from now on (told once per process). */
  readonly onPollingOnly: (error: Error) => void;
  readonly log: Logger;
  readonly options: Pick<LoopConfig, 'resyncMs' | 'pollMs' | 'heartbeatMs'>;
  /** When the agent began serving this Pod. */
  readonly startedAt: number;
  readonly liveness?: Liveness;
  readonly clock?: () => number;
}

export interface PodLoop {
  /** A pass has completed. */
  ready(): boolean;
  /** Resolves once `signal` aborted and every watch and the loop have ended. */
  readonly done: Promise<void>;
}

export function startPodLoop(deps: PodLoopDeps, signal: AbortSignal): PodLoop {
  const { rt, view, wakeup, log, options } = deps;
  const clock = deps.clock ?? Date.now;
  // Every pass reads every mount; an unchanged file is not hashed again, a volume directory
  // whose own entries the file watch saw no event for is not listed again (volumeReader), and
  // the files of a kubelet update are hashed while kubelet writes them, before its swap.
  const volumeEntries = new VolumeEntries();
  const payloadDigests = new PayloadDigests();
  const readVolume = volumeReader(Date.now, volumeEntries.version, payloadDigests.take);
  let watchTrustedSince = clock();
  // The owner chain is found now, while nothing else is asked of the API: at a drift, every
  // replica asks at once (heal/owner.ts, ownerResolver).
  const owner = ownerResolver(rt.client, rt.namespace, rt.pod);
  void owner.warm();

  const reconciler = createReconciler({
    rt,
    view,
    readVolume,
    metrics: deps.metrics,
    log,
    clock,
    heartbeatMs: options.heartbeatMs,
    startedAt: deps.startedAt,
    currentOwner: owner.read,
    wake: () => wakeup.wake(),
    signal,
  });

  // (3)
  async function reconcile(): Promise<number | undefined> {
    const now = clock();
    if (now - watchTrustedSince >= options.resyncMs) {
      volumeEntries.distrust();
      payloadDigests.distrust();
      watchTrustedSince = now;
    }
    return reconciler.reconcile();
  }

  const done = (async () => {
    const tasks: Promise<void>[] = [];
    // (1)
    const paths = rt.targets.flatMap((t) => (t.type === 'volume' ? [rt.volumePath(t)] : []));
    let watchesReady = Promise.resolve();
    if (paths.length > 0) {
      const watched = Promise.withResolvers<void>();
      signal.addEventListener('abort', () => watched.resolve(), { once: true });
      watchesReady = watched.promise;
      tasks.push(
        watchFiles(
          {
            paths,
            intervalMs: options.pollMs,
            onChange: () => wakeup.wake(),
            onReady: () => watched.resolve(),
            entries: volumeEntries,
            payloads: payloadDigests,
            onPollingOnly: deps.onPollingOnly,
          },
          signal,
        ),
      );
    }
    await runLoop(
      {
        wakeup,
        // (2)
        synced: async () => {
          await watchesReady;
          await view.waitForSync((ms) => wakeup.sleep(ms, signal), signal);
        },
        reconcile,
        resyncMs: options.resyncMs,
        clock,
        onError: (error) => log.error({ err: error.message }, 'reconcile failed'),
        ...(deps.liveness ? { liveness: deps.liveness } : {}),
      },
      signal,
    );
    await Promise.all(tasks);
  })();

  return { ready: () => reconciler.ready(), done };
}
