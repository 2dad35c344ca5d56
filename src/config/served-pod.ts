// What an agent checks in one Pod, and how: the targets its containers read (discover/targets.ts),
// narrowed by the workload's annotations (discover/selection.ts), and the agent's configuration
// with the annotations applied (pod-annotations.ts). The sidecar makes it for its own Pod, the
// node agent for each Pod it serves, doctor to show it. Pure.
import type { V1Pod } from '@kubernetes/client-node';
import { selectTargets } from '../discover/selection.ts';
import { type DiscoverOptions, discoverTargets, type Target } from '../discover/targets.ts';
import type { AgentConfig } from './agent-config.ts';
import { type AgentKind, readPodAnnotations } from './pod-annotations.ts';

export interface ServedPod {
  readonly targets: readonly Target[];
  /** Things seen but not followed (discover/targets.ts). */
  readonly notes: readonly string[];
  /** The agent's configuration for this Pod. */
  readonly config: AgentConfig;
  /** What the annotations changed and left out, one line each. */
  readonly selection: readonly string[];
  /** Annotation values that could not be read: the Pod is never restarted while there are any. */
  readonly problems: readonly string[];
}

export function servedPod(
  pod: V1Pod,
  base: AgentConfig,
  options: DiscoverOptions,
  agent: AgentKind,
): ServedPod {
  const discovery = discoverTargets(pod, options);
  const annotations = readPodAnnotations(base, pod.metadata?.annotations, agent);
  const selected = selectTargets(discovery.targets, annotations.selection);
  return {
    targets: selected.targets,
    notes: discovery.notes,
    config: annotations.config,
    selection: [...annotations.lines, ...selected.excluded, ...selected.unmatched],
    problems: annotations.problems,
  };
}
