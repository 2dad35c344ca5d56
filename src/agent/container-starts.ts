// When the app containers of a Pod (last) started, as its status says, and when the agent that
// serves it started: for env and subPath targets, the app's start decides what it holds when it
// and the agent did not start together (verify/container-view.ts).
//
// In the native sidecar order (and for a node agent that found the Pod before kubelet started
// it) the agent's first passes come before the app runs, so until every app container with an
// env or subPath target shows a start, the Pod is read again now and then: 1 s after the start,
// then 2, 4, 8 ... s apart, at most 30 s, and after 10 reads at each --heartbeat
// (start-baselines.ts, startsReadDelay). A Pod with only whole-volume targets makes none of
// these reads.
import type { V1Pod } from '@kubernetes/client-node';
import type { Target } from '../discover/targets.ts';
import { type ContainerStarts, containerStarts, readsContainerStarts } from './pass.ts';
import { startsReadDelay } from './start-baselines.ts';

export interface ContainerStartsDeps {
  /** The Pod as first read; undefined where the agent serves no Pod (`--watch` targets only). */
  readonly pod: V1Pod | undefined;
  readonly targets: readonly Target[];
  /** When the agent serving the Pod started (ms since the epoch). */
  readonly agentStartedAt: number;
  readonly heartbeatMs: number;
  readonly clock: () => number;
  /** The agent reads the app containers' own subPath files (pass.ts, readsContainerStarts). */
  readonly seesAppMounts?: boolean;
}

export class ContainerStartsTracker {
  private current: ContainerStarts;
  private reads = 0;
  private readAt: number;
  private readonly deps: ContainerStartsDeps;

  constructor(deps: ContainerStartsDeps) {
    this.deps = deps;
    this.current = containerStarts(deps.pod, deps.agentStartedAt);
    this.readAt = deps.clock() + 1000;
  }

  get starts(): ContainerStarts {
    return this.current;
  }

  /** The Pod as read again: takes its starts; returns whether one changed. */
  refresh(pod: V1Pod | undefined): boolean {
    if (!pod) return false;
    const fresh = containerStarts(pod, this.deps.agentStartedAt);
    const changed = JSON.stringify(fresh.byContainer) !== JSON.stringify(this.current.byContainer);
    this.current = fresh;
    return changed;
  }

  /** Whether an app container with an env or subPath target has shown no start yet. */
  pending(): boolean {
    return (
      this.deps.pod !== undefined &&
      this.deps.targets.some(
        (t) =>
          readsContainerStarts(t, this.deps.seesAppMounts) &&
          this.current.byContainer[t.container] === undefined,
      )
    );
  }

  /**
   * Reads the Pod again if a start is still pending and the read is due; returns whether a start
   * appeared (it decides env and subPath targets again: one more pass, at once).
   */
  async readWhenDue(now: number, readPod: () => Promise<V1Pod | undefined>): Promise<boolean> {
    if (!this.pending() || now < this.readAt) return false;
    this.reads += 1;
    this.readAt = now + startsReadDelay(this.reads, this.deps.heartbeatMs);
    return this.refresh(await readPod());
  }

  /** When the next read is due, while a start is pending. */
  deadline(): number | undefined {
    return this.pending() ? this.readAt : undefined;
  }
}
