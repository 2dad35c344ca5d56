// Which Pods on its node the node agent serves, and where kubelet keeps their files. Pure: the
// Pods and their namespaces' labels are read at the edge (node-agent.ts).
//
// Where the files are (kubelet v1.36.3, read in its source):
//  - a volume: `<root>/pods/<uid>/volumes/<plugin>/<volume>/`, the plugin's name with its `/`
//    escaped as `~` (pkg/kubelet/kubelet_getters.go, getPodVolumeDir; the plugins'
//    `kubernetes.io/configmap`, `kubernetes.io/secret`, `kubernetes.io/projected`), written by
//    kubelet's AtomicWriter as the sidecar sees it in its own mount;
//  - a subPath mount: `<root>/pods/<uid>/volume-subpaths/<volume>/<container>/<index>`, where
//    index is the mount's position in its container's volumeMounts
//    (pkg/volume/util/subpath/subpath_linux.go, getSubpathBindTarget; kubelet_pods.go,
//    makeMounts): the bind mount of the one file the app container sees, made when kubelet
//    created that container. Secret and projected volumes are tmpfs mounts, and subPath files
//    bind mounts, made after the node agent started: it sees them through a hostPath of
//    kubelet's root with mountPropagation HostToContainer.
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { ANNOTATION, NODE_AGENT_LABEL } from '../kube/annotations.ts';
import type { VolumeTarget } from './targets.ts';

/** The container name of config-sync's sidecar (inject, the webhook, deploy/sidecar). */
export const SIDECAR_CONTAINER = 'config-sync';

/** kubelet's directory name of each volume plugin whose files config-sync checks. */
const PLUGIN_DIRS = {
  configMap: 'kubernetes.io~configmap',
  secret: 'kubernetes.io~secret',
  projected: 'kubernetes.io~projected',
} as const;

export type ServeDecision =
  | { readonly serve: true; readonly why: string }
  | { readonly serve: false; readonly why: string; readonly badValue?: string };

/** Whether a config-sync sidecar (a container or native sidecar of that name) already serves the Pod. */
export function hasConfigSyncSidecar(pod: V1Pod): boolean {
  return [...(pod.spec?.containers ?? []), ...(pod.spec?.initContainers ?? [])].some(
    (c) => c.name === SIDECAR_CONTAINER,
  );
}

/**
 * Whether the node agent serves `pod`, whose namespace carries `namespaceLabels`. Steps:
 *  (1) a config-sync sidecar serves it already -> no, whatever the opt-in says (two agents
 *      would each restart the workload for the same drift, and write the same condition);
 *  (2) not Running -> no, not yet (Pending: kubelet makes a subPath file when it creates the
 *      container, so a Pod whose containers were never created has nothing to read; a missing
 *      file there is no drift) or no more (Succeeded, Failed); being deleted -> no more: kubelet
 *      tears its volumes down as its containers stop, and the files that vanish are no drift
 *      (the sidecar, inside the Pod, keeps its own mounts to the end; its planner's
 *      PodTerminating step is what keeps such a Pod from restarting its workload);
 *  (3) the Pod's annotation `config-sync.io/node-agent`: `disabled` -> no, `enabled` -> yes; the
 *      Pod's own say wins over its namespace's; any other value -> no, and the value is
 *      returned to be reported (never a silent default);
 *  (4) its namespace labelled `config-sync.io/node-agent=enabled` -> yes;
 *  (5) otherwise no: a Pod not opted in is never read.
 */
export function nodeAgentServes(
  pod: V1Pod,
  namespaceLabels: Readonly<Record<string, string>> | undefined,
): ServeDecision {
  // (1)
  if (hasConfigSyncSidecar(pod)) return { serve: false, why: 'its own config-sync sidecar serves it' };
  // (2)
  const phase = pod.status?.phase;
  if (phase !== 'Running') return { serve: false, why: `it is ${phase ?? 'not yet started'}, not Running` };
  if (pod.metadata?.deletionTimestamp) return { serve: false, why: 'it is being deleted' };
  // (3)
  const own = pod.metadata?.annotations?.[ANNOTATION.nodeAgent];
  if (own === 'disabled') return { serve: false, why: `its annotation ${ANNOTATION.nodeAgent} is disabled` };
  if (own === 'enabled') return { serve: true, why: `its annotation ${ANNOTATION.nodeAgent} is enabled` };
  if (own !== undefined)
    return {
      serve: false,
      why: `its annotation ${ANNOTATION.nodeAgent} is "${own}", neither enabled nor disabled`,
      badValue: own,
    };
  // (4)
  if (namespaceLabels?.[NODE_AGENT_LABEL] === 'enabled')
    return { serve: true, why: `its namespace is labelled ${NODE_AGENT_LABEL}=enabled` };
  // (5)
  return { serve: false, why: 'not opted in' };
}

/**
 * Who checks a Pod's configuration, in a sentence for `doctor`: its own sidecar, the node agent
 * (and why), or nobody (and how to opt in). `namespaceLabels` undefined: not known (the
 * namespace could not be read), and said so.
 */
export function whoServes(pod: V1Pod, namespaceLabels: Readonly<Record<string, string>> | undefined): string {
  if (hasConfigSyncSidecar(pod)) return 'its config-sync sidecar checks it';
  const decision = nodeAgentServes({ ...pod, status: { ...pod.status, phase: 'Running' } }, namespaceLabels);
  if (decision.serve)
    return `no config-sync sidecar: the node agent (config-sync node) on its node checks it, since ${decision.why}, if that node runs one and its namespace is in the node agent's --namespaces; it acts with the node agent's identity (deploy/node), not the permissions below`;
  if ('badValue' in decision)
    return `no config-sync sidecar, and the node agent does not check it: ${decision.why}; set it to enabled or disabled`;
  return `no config-sync sidecar, and not opted in to the node agent${namespaceLabels === undefined ? ' (its namespace could not be read for the label)' : ''}: nothing checks its configuration; add the sidecar (config-sync inject), or annotate it ${ANNOTATION.nodeAgent}: enabled, or label its namespace ${NODE_AGENT_LABEL}=enabled`;
}

/**
 * Where a volume target's files are under kubelet's root dir, as the node agent sees it (its
 * hostPath of that dir mounted at `root`).
 */
export function kubeletVolumePath(root: string, pod: V1Pod, target: VolumeTarget): string {
  const uid = pod.metadata?.uid ?? '';
  if (target.subPath !== undefined)
    return path.join(
      root,
      'pods',
      uid,
      'volume-subpaths',
      target.volume,
      target.container,
      String(target.mountIndex ?? 0),
    );
  const volume = pod.spec?.volumes?.find((v) => v.name === target.volume);
  const plugin = volume?.secret
    ? PLUGIN_DIRS.secret
    : volume?.projected
      ? PLUGIN_DIRS.projected
      : PLUGIN_DIRS.configMap;
  return path.join(root, 'pods', uid, 'volumes', plugin, target.volume);
}
