// The node agent (`config-sync node`, a DaemonSet): the sidecar's verification, heal, status
// and metrics for every opted-in Pod on its node, at one process per node.
//
// Steps:
//  (1) in each of its namespaces, follow the Pods bound to its node (a list and watch with
//      `spec.nodeName=<node>`, as kubelet does) and the namespace itself (for its opt-in label);
//  (2) after every change of either, decide again which Pods it serves (discover/node-pods.ts:
//      opted in by the namespace's label or the Pod's annotation, Running, no config-sync
//      sidecar of its own); a Pod not served is never read;
//  (3) a Pod newly served gets a Runtime (node-pod-runtime.ts: its targets in kubelet's
//      directories, its own key), a view of the node's shared source cache (one watch per
//      distinct object: watch/shared-source-cache.ts) and a reconciler on a loop of its own
//      (pod-loop.ts), exactly as the sidecar runs for its one Pod;
//  (4) a Pod no longer served (deleted, opted out, ended) has its loop stopped, its view
//      released (the watches only it held end) and its out-of-sync series removed.
// Ready once every namespace's Pods were listed; live while no Pod's pass is stuck.
import type { V1Namespace, V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { LoopConfig } from '../config/agent-config.ts';
import { nodeAgentServes } from '../discover/node-pods.ts';
import type { NodeMetrics } from '../metrics/node-metrics.ts';
import { refKey } from '../verify/source.ts';
import { CollectionWatch } from '../watch/collection-watch.ts';
import { type PodSourceView, SharedSourceCache } from '../watch/shared-source-cache.ts';
import { Liveness, stuckAfterMs } from './liveness.ts';
import { Wakeup } from './loop.ts';
import { NodeVerdicts } from './node-pod-metrics.ts';
import { type NodeBase, nodePodRuntime } from './node-pod-runtime.ts';
import { type PodLoop, startPodLoop } from './pod-loop.ts';
import { sourceWatchReports } from './source-watch-reports.ts';

export interface NodeAgentDeps {
  readonly base: NodeBase;
  readonly log: Logger;
  readonly metrics: NodeMetrics;
  readonly options: Pick<LoopConfig, 'resyncMs' | 'pollMs' | 'heartbeatMs'>;
  readonly clock?: () => number;
}

export interface NodeAgentHandle {
  /** Every namespace's Pods were listed once. */
  ready(): boolean;
  /** No served Pod's pass is stuck. */
  live(): boolean;
  /** Pods served now, as `namespace/name`. */
  served(): string[];
  /** API watches of sources held now. */
  watches(): number;
  readonly done: Promise<void>;
}

interface Served {
  readonly namespace: string;
  readonly name: string;
  readonly stop: AbortController;
  readonly view: PodSourceView;
  readonly loop: PodLoop;
  readonly liveness: Liveness;
}

export function startNodeAgent(deps: NodeAgentDeps, signal: AbortSignal): NodeAgentHandle {
  const { base, log, metrics, options } = deps;
  const clock = deps.clock ?? Date.now;
  const { client, config } = base;
  const reports = sourceWatchReports(metrics, log);
  const shared = new SharedSourceCache(
    client,
    {
      onRestart: (namespace, ref, reason, detail) => reports.restart(ref, reason, detail, { namespace }),
      onStale: (namespace, ref, cached, api) => reports.stale(ref, cached, api, { namespace }),
      onError: (namespace, ref, error) => log.error({ namespace, source: refKey(ref) }, error.message),
    },
    signal,
    clock,
  );
  const verdicts = new NodeVerdicts(metrics);
  const podsByNamespace = new Map<string, ReadonlyMap<string, V1Pod>>();
  const labelsByNamespace = new Map<string, Readonly<Record<string, string>> | undefined>();
  const served = new Map<string, Served>();
  const loops = new Set<Promise<void>>();
  /** Why each Pod not served is not, as last told: told once per change. */
  const toldNotServed = new Map<string, string>();
  const stuckMs = stuckAfterMs(config.agent.requestTimeoutMs);
  let pollingTold = false;

  // (3)
  function startServing(uid: string, pod: V1Pod): void {
    const namespace = pod.metadata?.namespace ?? '';
    const name = pod.metadata?.name ?? '';
    const made = nodePodRuntime(base, pod);
    if ('nothing' in made) {
      notServed(uid, namespace, name, made.nothing);
      return;
    }
    const { rt } = made;
    const podLog = log.child({ namespace, pod: name });
    const stop = new AbortController();
    const wakeup = new Wakeup();
    const view = shared.view(namespace, rt.sources, () => wakeup.wake());
    const liveness = new Liveness(stuckMs, clock);
    podLog.info(
      {
        sources: rt.sources.map(refKey),
        targets: rt.targets.length,
        notes: rt.notes,
        ...(rt.selection.length ? { selection: rt.selection } : {}),
      },
      'serving the Pod',
    );
    const loop = startPodLoop(
      {
        rt,
        view,
        wakeup,
        metrics: verdicts.forPod(namespace, name),
        onPollingOnly: (error) => {
          metrics.filePolling.set(1);
          if (!pollingTold)
            podLog.warn({ err: error.message }, 'inotify refused: watching files by polling only');
          pollingTold = true;
        },
        log: podLog,
        options,
        startedAt: clock(),
        liveness,
        clock,
      },
      AbortSignal.any([signal, stop.signal]),
    );
    loops.add(loop.done);
    void loop.done.finally(() => loops.delete(loop.done));
    served.set(uid, { namespace, name, stop, view, loop, liveness });
    toldNotServed.delete(uid);
  }

  // (4)
  function stopServing(uid: string, why: string): void {
    const s = served.get(uid);
    if (!s) return;
    s.stop.abort();
    s.view.release();
    verdicts.forget(s.namespace, s.name);
    served.delete(uid);
    log.info({ namespace: s.namespace, pod: s.name, why }, 'no longer serving the Pod');
  }

  function notServed(uid: string, namespace: string, name: string, why: string, badValue?: string): void {
    if (toldNotServed.get(uid) === why) return;
    toldNotServed.set(uid, why);
    if (badValue !== undefined)
      log.warn(
        { namespace, pod: name, why },
        'not serving the Pod: its config-sync.io/node-agent annotation must be enabled or disabled',
      );
    else log.debug({ namespace, pod: name, why }, 'not serving the Pod');
  }

  // (2)
  function decide(): void {
    const wanted = new Map<string, V1Pod>();
    const reasons = new Map<string, string>();
    for (const [namespace, pods] of podsByNamespace) {
      for (const pod of pods.values()) {
        const uid = pod.metadata?.uid ?? '';
        const decision = nodeAgentServes(pod, labelsByNamespace.get(namespace));
        if (decision.serve) wanted.set(uid, pod);
        else {
          reasons.set(uid, decision.why);
          if (!served.has(uid))
            notServed(
              uid,
              namespace,
              pod.metadata?.name ?? '',
              decision.why,
              'badValue' in decision ? decision.badValue : undefined,
            );
        }
      }
    }
    for (const uid of served.keys())
      if (!wanted.has(uid)) stopServing(uid, reasons.get(uid) ?? 'the Pod is gone from the node');
    for (const [uid, pod] of wanted) if (!served.has(uid)) startServing(uid, pod);
    for (const uid of toldNotServed.keys())
      if (!reasons.has(uid) && !wanted.has(uid)) toldNotServed.delete(uid);
    metrics.podsServed.set(served.size);
    metrics.sourceWatches.set(shared.watches());
  }

  // (1)
  const watches = config.namespaces.flatMap((namespace) => [
    new CollectionWatch<V1Pod>(client, { resource: 'pods', namespace }, `spec.nodeName=${config.nodeName}`, {
      onSet: (items) => {
        podsByNamespace.set(namespace, new Map(items));
        decide();
      },
      onRestart: (reason, detail) => {
        if (reason !== 'closed')
          log.warn({ namespace, reason, detail }, "the watch of the node's Pods is restarting");
      },
    }).start(signal),
    new CollectionWatch<V1Namespace>(client, { resource: 'namespaces' }, `metadata.name=${namespace}`, {
      onSet: (items) => {
        labelsByNamespace.set(namespace, items.get(namespace)?.metadata?.labels);
        decide();
      },
      onRestart: (reason, detail) => {
        if (reason !== 'closed')
          log.warn({ namespace, reason, detail }, 'the watch of the namespace is restarting');
      },
    }).start(signal),
  ]);

  const done = (async () => {
    await Promise.all(watches);
    for (const uid of [...served.keys()]) stopServing(uid, 'the node agent is stopping');
    await Promise.all([...loops]);
  })();

  let stuckTold = false;
  return {
    ready: () => config.namespaces.every((ns) => podsByNamespace.has(ns)),
    live: () => {
      const stuck = [...served.values()].filter((s) => !s.liveness.live());
      if (stuck.length > 0 && !stuckTold)
        log.error(
          { pods: stuck.map((s) => `${s.namespace}/${s.name}`) },
          "a Pod's loop is stuck in one pass: /healthz fails, so that kubelet restarts the node agent",
        );
      stuckTold = stuck.length > 0;
      return stuck.length === 0;
    },
    served: () => [...served.values()].map((s) => `${s.namespace}/${s.name}`).sort(),
    watches: () => shared.watches(),
    done,
  };
}
