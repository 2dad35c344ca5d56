// The node agent's own metrics, beside the families every agent exports (metrics.ts), in the
// same registry. Labels stay bounded: a Pod's name is a label value only on the one series of a
// Pod that is out of sync, removed when it is in sync again or no longer served, so the series
// count follows the drift, not the node's Pods.
import Gauge from 'prom-client/lib/gauge.js';
import type { AgentMetrics } from './metrics.ts';

export interface NodeMetrics extends AgentMetrics {
  /** Pods the node agent serves now. */
  readonly podsServed: Gauge;
  /** API watches of ConfigMaps and Secrets held now: one per distinct object its Pods read. */
  readonly sourceWatches: Gauge;
  /** 1 for each served Pod whose last pass was not all InSync; no series for the others. */
  readonly podOutOfSync: Gauge<'namespace' | 'pod'>;
}

export function createNodeMetrics(base: AgentMetrics): NodeMetrics {
  const registers = [base.registry];
  return {
    ...base,
    podsServed: new Gauge({
      name: 'config_sync_node_pods_served',
      help: 'Pods on this node the node agent serves (opted in, Running, without a config-sync sidecar).',
      registers,
    }),
    sourceWatches: new Gauge({
      name: 'config_sync_node_source_watches',
      help: 'API watches of ConfigMaps and Secrets held: one per distinct object the served Pods read.',
      registers,
    }),
    podOutOfSync: new Gauge({
      name: 'config_sync_pod_out_of_sync',
      help: '1 for each served Pod whose last pass found a target not InSync; removed once it is, or once the Pod is no longer served.',
      labelNames: ['namespace', 'pod'],
      registers,
    }),
  };
}
