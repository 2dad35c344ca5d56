// What a Pod's reconciler records in metrics, whoever exports them: the sidecar's registry for
// its one Pod (podMetrics below), or the node agent's, which sums its Pods' (node-metrics.ts).
// Labels stay bounded: a source's namespace, kind and name, closed sets for action and result.
import { targetSources } from '../discover/targets.ts';
import type { AgentMetrics } from '../metrics/metrics.ts';
import { refKey } from '../verify/source.ts';
import { targetId } from '../verify/verdict.ts';
import { isDrift, type PassResult } from './pass.ts';
import type { Runtime } from './runtime.ts';

export interface PodMetrics {
  readonly duration: Pick<AgentMetrics['duration'], 'observe'>;
  readonly checks: Pick<AgentMetrics['checks'], 'inc'>;
  readonly mismatches: Pick<AgentMetrics['mismatches'], 'inc'>;
  readonly propagation: Pick<AgentMetrics['propagation'], 'observe'>;
  readonly heals: Pick<AgentMetrics['heals'], 'inc'>;
  /** After each pass: whether every target was InSync. */
  inSync(allInSync: boolean, now: number): void;
}

/** The sidecar's: its one Pod is the whole agent, so its verdict is the agent's gauges. */
export function podMetrics(metrics: AgentMetrics): PodMetrics {
  return podMetricsWith(metrics, (allInSync, now) => {
    metrics.inSync.set(allInSync ? 1 : 0);
    if (allInSync) metrics.lastSuccess.set(now / 1000);
  });
}

/** A Pod's metrics: the agent's counters and histograms as they are, its own `inSync`. */
export function podMetricsWith(metrics: AgentMetrics, inSync: PodMetrics['inSync']): PodMetrics {
  const { duration, checks, mismatches, propagation, heals } = metrics;
  return { duration, checks, mismatches, propagation, heals, inSync };
}

/**
 * A pass's metrics: per source, checked, and mismatched where a target reading it drifted;
 * then whether every target was InSync.
 */
export function countPass(
  metrics: PodMetrics,
  rt: Pick<Runtime, 'namespace' | 'targets' | 'sources'>,
  pass: PassResult,
  allInSync: boolean,
  now: number,
): void {
  const driftedTargets = new Set(pass.verdicts.filter(isDrift).map((v) => v.target));
  const driftedSources = new Set(
    rt.targets.filter((t) => driftedTargets.has(targetId(t))).flatMap((t) => targetSources(t).map(refKey)),
  );
  for (const ref of rt.sources) {
    const labels = { namespace: rt.namespace, kind: ref.kind, name: ref.name };
    metrics.checks.inc(labels);
    if (driftedSources.has(refKey(ref))) metrics.mismatches.inc(labels);
  }
  metrics.inSync(allInSync, now);
}
