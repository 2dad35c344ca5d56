// What a Pod's config-sync annotations say, as doctor reports it: the targets they leave out
// (whose sources then need no access), what they change, and each value the agent cannot read
// as a CS_CONFIG_BAD_ANNOTATION problem. Read as the agent that serves the Pod reads them (its
// sidecar, else the node agent: config/pod-annotations.ts). Pure.
import type { V1Pod } from '@kubernetes/client-node';
import { parsePodAnnotations } from '../config/pod-annotations.ts';
import { hasConfigSyncSidecar } from '../discover/node-pods.ts';
import { selectTargets } from '../discover/selection.ts';
import type { Target } from '../discover/targets.ts';
import { ConfigSyncError } from '../errors.ts';
import { type Problem, problemOf } from './problem.ts';

export interface PodSelectionReport {
  /** The targets its agent checks. */
  readonly targets: readonly Target[];
  /** What the annotations change and leave out, one line each. */
  readonly lines: readonly string[];
  readonly problems: readonly Problem[];
}

export function podSelectionReport(pod: V1Pod, targets: readonly Target[]): PodSelectionReport {
  const name = pod.metadata?.name ?? '';
  const said = parsePodAnnotations(pod.metadata?.annotations, hasConfigSyncSidecar(pod) ? 'sidecar' : 'node');
  const selected = selectTargets(targets, said.selection);
  return {
    targets: selected.targets,
    lines: [...said.lines, ...selected.excluded, ...selected.unmatched],
    problems: said.problems.map((problem) =>
      problemOf(
        new ConfigSyncError('CS_CONFIG_BAD_ANNOTATION', `Pod ${name}: ${problem}`, {
          hint: 'fix the annotation on the Pod template; until then the agent reports drift in this Pod and never restarts it',
        }),
      ),
    ),
  };
}
