// A served Pod as the node agent's reconciler sees it: the same Runtime the sidecar builds for
// its own Pod (runtime.ts), made from the Pod as the node's Pod watch has it, with the node's
// one client, its targets read from kubelet's directories, and a key of its own derived from
// the node's (digest-key.ts, podKey).
import type { V1Pod } from '@kubernetes/client-node';
import type { NodeConfig } from '../config/node-config.ts';
import { servedPod } from '../config/served-pod.ts';
import { kubeletVolumePath, SIDECAR_CONTAINER } from '../discover/node-pods.ts';
import { referencedSources } from '../discover/targets.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import type { KubeClient } from '../kube/client.ts';
import type { Scope } from '../kube/scope.ts';
import { keyedFingerprint, keyId } from '../verify/fingerprint.ts';
import { podKey } from './digest-key.ts';
import type { Runtime } from './runtime.ts';
import { readStartBaselines } from './start-baselines.ts';

export interface NodeBase {
  readonly scope: Scope;
  readonly client: KubeClient;
  readonly config: NodeConfig;
  /** The node's fingerprint key (its state dir). */
  readonly nodeKey: Buffer;
}

/** The Pod's Runtime, or why there is nothing in it to check. */
export function nodePodRuntime(base: NodeBase, pod: V1Pod): { rt: Runtime } | { nothing: string } {
  const namespace = pod.metadata?.namespace ?? '';
  const served = servedPod(pod, base.config.agent, { self: SIDECAR_CONTAINER }, 'node');
  if (served.targets.length === 0)
    return {
      nothing: served.selection.length
        ? `its annotations leave nothing to check (${served.selection.join('; ')})`
        : 'no ConfigMap or Secret in it',
    };
  const key = podKey(base.nodeKey, pod.metadata?.uid ?? '');
  const digestKeyId = keyId(key);
  const baseline = readStartBaselines(pod.metadata?.annotations?.[ANNOTATION.startBaselines], digestKeyId);
  const root = base.config.kubeletRoot;
  return {
    rt: {
      scope: base.scope,
      client: base.client,
      namespace,
      pod,
      targets: served.targets,
      sources: referencedSources(served.targets),
      notes: [...served.notes, ...(baseline.note ? [baseline.note] : [])],
      config: served.config,
      selection: served.selection,
      annotationProblems: served.problems,
      fingerprint: keyedFingerprint(key),
      volumePath: (target) => kubeletVolumePath(root, pod, target),
      baselines: baseline.baselines,
      digestKeyId,
      seesAppMounts: true,
    },
  };
}
