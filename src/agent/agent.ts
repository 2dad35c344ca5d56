// The sidecar agent: one Pod, its own. It wires the Pod's reconciler loop (pod-loop.ts,
// reconciler.ts) to a source cache of its own (watch/source-cache.ts: one API watch per source,
// the wait for the first lists, the quorum re-read before acting), and says whether it is
// ready (a pass completed) and live (no pass stuck: liveness.ts) for /readyz and /healthz.
import type { Logger } from 'pino';
import type { LoopConfig } from '../config/agent-config.ts';
import type { AgentMetrics } from '../metrics/metrics.ts';
import { refKey } from '../verify/source.ts';
import { SourceCache } from '../watch/source-cache.ts';
import { Liveness, stuckAfterMs } from './liveness.ts';
import { Wakeup } from './loop.ts';
import { startPodLoop } from './pod-loop.ts';
import { podMetrics } from './pod-metrics.ts';
import type { Runtime } from './runtime.ts';
import { sourceWatchReports } from './source-watch-reports.ts';

export interface AgentDeps {
  readonly rt: Runtime;
  readonly log: Logger;
  readonly metrics: AgentMetrics;
  readonly options: Pick<LoopConfig, 'resyncMs' | 'pollMs' | 'heartbeatMs'>;
  readonly clock?: () => number;
}

export interface AgentHandle {
  ready(): boolean;
  live(): boolean;
  done: Promise<void>;
}

export function startAgent(deps: AgentDeps, signal: AbortSignal): AgentHandle {
  const { rt, log, metrics } = deps;
  const clock = deps.clock ?? Date.now;
  const wakeup = new Wakeup();
  const reports = sourceWatchReports(metrics, log);
  const cache = new SourceCache(
    rt.client,
    rt.namespace,
    rt.sources,
    {
      onChange: () => wakeup.wake(),
      onRestart: (ref, reason, detail) => reports.restart(ref, reason, detail),
      onStale: (ref, cached, api) => reports.stale(ref, cached, api),
    },
    clock,
  );
  const liveness = new Liveness(stuckAfterMs(rt.config.requestTimeoutMs), clock);
  const loop = startPodLoop(
    {
      rt,
      view: cache,
      wakeup,
      metrics: podMetrics(metrics),
      onPollingOnly: (error) => {
        metrics.filePolling.set(1);
        log.warn({ err: error.message }, 'inotify refused: watching files by polling only');
      },
      log,
      options: deps.options,
      // The agent's own start: its process's (its container's status may not show it running
      // yet when it first reads its Pod).
      startedAt: Date.now() - process.uptime() * 1000,
      liveness,
      clock,
    },
    signal,
  );
  const done = Promise.all([
    cache.start(signal, (ref, error) => log.error({ source: refKey(ref) }, error.message)),
    loop.done,
  ]).then(() => undefined);

  let stuckTold = false;
  return {
    ready: loop.ready,
    live: () => {
      const live = liveness.live();
      if (!live && !stuckTold) {
        log.error(
          { busyForSeconds: liveness.busyForSeconds() },
          'the loop is stuck in one pass: /healthz fails, so that kubelet restarts this container',
        );
      }
      stuckTold = !live;
      return live;
    },
    done,
  };
}
