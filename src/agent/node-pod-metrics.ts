// A served Pod's metrics in the node agent: the counters and histograms are the node's (summed
// over its Pods, labelled by source as in the sidecar), and the verdict is the Pod's own series
// while it is out of sync. config_sync_in_sync is 1 while no served Pod is out of sync, so the
// alert rules written for the sidecar (config_sync_in_sync == 0) hold for the node agent too.
import type { NodeMetrics } from '../metrics/node-metrics.ts';
import { type PodMetrics, podMetricsWith } from './pod-metrics.ts';

/** The node's Pods out of sync, and the gauges that follow them. */
export class NodeVerdicts {
  private readonly outOfSync = new Set<string>();
  private readonly metrics: NodeMetrics;

  constructor(metrics: NodeMetrics) {
    this.metrics = metrics;
    metrics.inSync.set(1);
  }

  /** The metrics of one Pod, `namespace/name`. */
  forPod(namespace: string, pod: string): PodMetrics {
    return podMetricsWith(this.metrics, (allInSync, now) => this.set(namespace, pod, allInSync, now));
  }

  /** The Pod is no longer served: its series goes. */
  forget(namespace: string, pod: string): void {
    this.set(namespace, pod, true, undefined);
  }

  private set(namespace: string, pod: string, inSync: boolean, now: number | undefined): void {
    const key = `${namespace}/${pod}`;
    if (inSync) {
      if (this.outOfSync.delete(key)) this.metrics.podOutOfSync.remove({ namespace, pod });
    } else if (!this.outOfSync.has(key)) {
      this.outOfSync.add(key);
      this.metrics.podOutOfSync.set({ namespace, pod }, 1);
    }
    this.metrics.inSync.set(this.outOfSync.size === 0 ? 1 : 0);
    if (this.outOfSync.size === 0 && now !== undefined) this.metrics.lastSuccess.set(now / 1000);
  }
}
