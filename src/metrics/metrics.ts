// The agent's Prometheus metrics, in a registry of its own (no global prom-client state).
//
// Two names are fixed because users' alerts depend on them: config_hash_mismatch_total and
// config_sync_duration_seconds. Labels stay bounded: namespace, kind and name of the referenced
// sources (a pod references a handful), and closed sets for action/result. Never a pod name, a
// hash or a path as a label value.
import fs from 'node:fs';
// prom-client's index loads its Pushgateway, default metrics and cluster aggregator too, and with
// them Node's zlib, perf_hooks, v8 and cluster modules, none of which the agent uses: about 1.3
// MiB resident in every Pod (measured on a bare Node HTTP server). The four classes it uses are
// loaded from their own modules instead (typed in prom-client-lib.d.ts); a unit test reads the
// build's metafile and fails if the index comes back.
import Counter from 'prom-client/lib/counter.js';
import Gauge from 'prom-client/lib/gauge.js';
import Histogram from 'prom-client/lib/histogram.js';
import Registry from 'prom-client/lib/registry.js';

export interface AgentMetrics {
  readonly registry: Registry;
  /** Per verify pass and source: the files of a target using it were Drifted or Missing. */
  readonly mismatches: Counter<'namespace' | 'kind' | 'name'>;
  /** Per verify pass and source: it was checked. mismatches/checks is the true mismatch ratio. */
  readonly checks: Counter<'namespace' | 'kind' | 'name'>;
  readonly duration: Histogram;
  readonly inSync: Gauge;
  readonly lastSuccess: Gauge;
  readonly propagation: Histogram;
  readonly heals: Counter<'action' | 'result'>;
  readonly apiWatchRestarts: Counter<'kind' | 'reason'>;
  /** A quorum read before acting found the watch's cached copy behind the API. */
  readonly staleViews: Counter<'kind'>;
  readonly filePolling: Gauge;
  readonly apiRequests: Counter<'verb'>;
}

/** `apiRequests` reads the client's running request counts, by verb, at every scrape. */
export function createMetrics(
  apiRequests: () => Readonly<Record<string, number>> = () => ({}),
): AgentMetrics {
  const exported: Record<string, number> = {};
  const registry = new Registry();
  const registers = [registry];
  registerProcessMetrics(registry);
  return {
    registry,
    mismatches: new Counter({
      name: 'config_hash_mismatch_total',
      help: 'Verify passes in which a target using this source was Drifted or Missing (past grace).',
      labelNames: ['namespace', 'kind', 'name'],
      registers,
    }),
    checks: new Counter({
      name: 'config_sync_checks_total',
      help: 'Verify passes that checked this source; the denominator of the mismatch ratio.',
      labelNames: ['namespace', 'kind', 'name'],
      registers,
    }),
    duration: new Histogram({
      name: 'config_sync_duration_seconds',
      help: 'Duration of one verify pass: reading and hashing every target and deciding.',
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
    inSync: new Gauge({
      name: 'config_sync_in_sync',
      help: '1 when every target matches the API, else 0.',
      registers,
    }),
    lastSuccess: new Gauge({
      name: 'config_sync_last_success_timestamp_seconds',
      help: 'Unix time of the last verify pass that found every target in sync.',
      registers,
    }),
    propagation: new Histogram({
      name: 'config_sync_propagation_seconds',
      help: 'Time from an API change of a source to the matching files on disk (kubelet propagation).',
      buckets: [0.5, 1, 2, 5, 10, 20, 30, 60, 90, 120, 300],
      registers,
    }),
    heals: new Counter({
      name: 'config_sync_heal_total',
      help: 'Heal decisions by action (restart, deduped, alert) and result (ok, conflict, failed, or the alert reason).',
      labelNames: ['action', 'result'],
      registers,
    }),
    apiWatchRestarts: new Counter({
      name: 'config_sync_api_watch_restarts_total',
      help: 'API watch reconnects by source kind and reason (closed, error, gone, resync).',
      labelNames: ['kind', 'reason'],
      registers,
    }),
    staleViews: new Counter({
      name: 'config_sync_stale_view_total',
      help: 'Drift accusations withdrawn because a fresh read showed the cached API copy was stale, by source kind.',
      labelNames: ['kind'],
      registers,
    }),
    filePolling: new Gauge({
      name: 'config_sync_file_watch_polling',
      help: '1 when inotify was refused and the agent watches files by polling only.',
      registers,
    }),
    apiRequests: new Counter({
      name: 'config_sync_api_requests_total',
      help: 'Requests the agent sent to the API server, by verb (get, list, watch, patch, create).',
      labelNames: ['verb'],
      registers,
      collect() {
        for (const [verb, total] of Object.entries(apiRequests())) {
          const delta = total - (exported[verb] ?? 0);
          if (delta > 0) {
            this.inc({ verb }, delta);
            exported[verb] = total;
          }
        }
      },
    }),
  };
}

/**
 * The process's own metrics, computed only when scraped. prom-client's collectDefaultMetrics
 * was here: its event-loop delay histogram samples the loop every 10 ms, a timer that alone
 * cost about 1 % of a core at idle (measured: 0.999 % against 0.003 % for bare node), more than
 * everything else the agent does. The lag is measured at scrape instead, as prom-client's own
 * nodejs_eventloop_lag_seconds is: how long a setImmediate takes to run.
 */
export function registerProcessMetrics(registry: Registry): void {
  const registers = [registry];
  const prefix = 'config_sync_process_';
  // Each counter reads the CPU time itself at its own collect: the registry serializes each
  // metric right after collecting it, so one collect feeding three counters would leave the
  // ones emitted before it a scrape behind.
  const cpuCounter = (name: string, help: string, pick: (usage: NodeJS.CpuUsage) => number) => {
    let last = 0;
    new Counter({
      name: `${prefix}${name}`,
      help,
      registers,
      collect() {
        const now = pick(process.cpuUsage()) / 1e6;
        this.inc(Math.max(0, now - last));
        last = now;
      },
    });
  };
  cpuCounter('cpu_user_seconds_total', 'User CPU time spent, in seconds.', (u) => u.user);
  cpuCounter('cpu_system_seconds_total', 'System CPU time spent, in seconds.', (u) => u.system);
  cpuCounter('cpu_seconds_total', 'User and system CPU time spent, in seconds.', (u) => u.user + u.system);
  new Gauge({
    name: `${prefix}resident_memory_bytes`,
    help: 'Resident memory size, in bytes.',
    registers,
    collect() {
      this.set(process.memoryUsage.rss());
    },
  });
  new Gauge({
    name: `${prefix}nodejs_heap_size_used_bytes`,
    help: 'V8 heap in use, in bytes.',
    registers,
    collect() {
      this.set(process.memoryUsage().heapUsed);
    },
  });
  new Gauge({
    name: `${prefix}open_fds`,
    help: 'Open file descriptors.',
    registers,
    collect() {
      try {
        this.set(fs.readdirSync('/proc/self/fd').length);
      } catch {
        // Not Linux: no /proc; the metric stays unset.
      }
    },
  });
  const startedAt = Math.round(Date.now() / 1000 - process.uptime());
  new Gauge({
    name: `${prefix}start_time_seconds`,
    help: 'Start time of the process since the Unix epoch, in seconds.',
    registers,
  }).set(startedAt);
  new Gauge({
    name: `${prefix}nodejs_eventloop_lag_seconds`,
    help: 'Event loop lag at scrape: how long a setImmediate waited, in seconds.',
    registers,
    async collect() {
      const t0 = process.hrtime.bigint();
      await new Promise<void>((resolve) => setImmediate(resolve));
      this.set(Number(process.hrtime.bigint() - t0) / 1e9);
    },
  });
}
