// What the sidecar and the node agent say about their source watches: the same metric and the
// same line for each event, so one alert and one log query serve both. The node agent's lines
// add the source's namespace (`where`); the sidecar's namespace is its own.
import type { Logger } from 'pino';
import type { SourceRef } from '../kube/resources.ts';
import type { AgentMetrics } from '../metrics/metrics.ts';
import { refKey } from '../verify/source.ts';

export interface SourceWatchReports {
  /** A watch restarts: counted by reason; logged unless the server ended it as usual. */
  restart(
    ref: SourceRef,
    reason: 'closed' | 'error' | 'gone' | 'resync',
    detail?: string,
    where?: { readonly namespace: string },
  ): void;
  /** A quorum read corrected a stale cached copy (watch/confirm-sources.ts). */
  stale(ref: SourceRef, cached: string, api: string, where?: { readonly namespace: string }): void;
}

export function sourceWatchReports(
  metrics: Pick<AgentMetrics, 'apiWatchRestarts' | 'staleViews'>,
  log: Logger,
): SourceWatchReports {
  return {
    restart: (ref, reason, detail, where) => {
      metrics.apiWatchRestarts.inc({ kind: ref.kind, reason });
      if (reason !== 'closed')
        log.warn({ ...where, source: refKey(ref), reason, detail }, 'API watch restarting');
    },
    stale: (ref, cached, api, where) => {
      log.info(
        { ...where, source: refKey(ref), cached, api },
        'the cached copy was stale: a fresh read corrected it, relisting',
      );
      metrics.staleViews.inc({ kind: ref.kind });
    },
  };
}
