// The node agent's configuration (`config-sync node`): the agent's decisions (grace, debounce,
// what to do about drift, the policy gate; agent-config.ts, unchanged), plus where it runs and
// what it may read: its node, the namespaces whose Pods it may serve, kubelet's root dir, and
// its state dir on the node. Made once at the edge, every value checked, errors naming where
// the value came from.
//
// Steps of nodeConfig:
//  (1) the agent's own configuration (agentConfig), for the command `node`; reload mode is
//      refused: its trigger (a URL, a signal to a process) belongs to one app, not a node;
//  (2) the node's name (NODE_NAME from the downward API's spec.nodeName): required, a name;
//  (3) the namespaces: required, each a namespace name; the chart binds the agent's Role in
//      each, and the agent reads nothing elsewhere;
//  (4) kubelet's root dir must be a directory.
import fs from 'node:fs';
import { ConfigSyncError } from '../errors.ts';
import { isNamespaceName, isObjectName } from '../kube/names.ts';
import { type AgentConfig, agentConfig } from './agent-config.ts';
import { agentSettings } from './agent-settings.ts';
import { defaulted, type SettingDef, type Settings } from './settings.ts';

/** Where the node agent keeps its fingerprint key on the node (a hostPath in deploy/node). */
export const NODE_STATE_DIR = '/var/lib/config-sync';
export const KUBELET_ROOT = '/var/lib/kubelet';

/** Settings of the sidecar's that name its one Pod or its mounts: the node agent has neither. */
const SIDECAR_ONLY = new Set(['pod', 'container', 'self-container', 'watch', 'mount-root', 'state-dir']);

export const nodeSettings: readonly SettingDef[] = [
  ...agentSettings.filter((d) => !SIDECAR_ONLY.has(d.name)),
  {
    name: 'node-name',
    env: 'NODE_NAME',
    type: 'string',
    valueName: 'name',
    description: 'the node whose Pods it serves (downward API: spec.nodeName)',
  },
  {
    name: 'namespaces',
    env: 'CONFIG_SYNC_NAMESPACES',
    type: 'list',
    valueName: 'ns',
    description:
      'the namespaces whose Pods it may serve, comma-separated or repeated (its Role is bound in each)',
  },
  {
    name: 'kubelet-root',
    env: 'CONFIG_SYNC_KUBELET_ROOT',
    type: 'string',
    valueName: 'dir',
    default: KUBELET_ROOT,
    description:
      "kubelet's root dir as the agent sees it (a read-only hostPath, mountPropagation HostToContainer)",
  },
  {
    name: 'state-dir',
    env: 'CONFIG_SYNC_STATE_DIR',
    type: 'string',
    valueName: 'dir',
    default: NODE_STATE_DIR,
    description: "the node's fingerprint key is kept here (a hostPath), so it outlives the agent's restarts",
  },
];

export interface NodeConfig {
  /** The decisions, as the sidecar's; `pod` and `watch` are empty. */
  readonly agent: AgentConfig;
  readonly nodeName: string;
  readonly namespaces: readonly string[];
  readonly kubeletRoot: string;
}

export function nodeConfig(settings: Settings): NodeConfig {
  // (1)
  const agent = agentConfig('node', settings);
  if (agent.reload) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_FLAG',
      "node: --on-drift reload is not available to the node agent: its trigger (a URL, a signal to a process) is one app's",
      {
        hint: 'use --on-drift restart (default) or alert-only; for reload mode, run the sidecar beside that app',
      },
    );
  }
  // (2)
  const node = settings.string('node-name');
  if (!node) {
    throw new ConfigSyncError(
      'CS_CONFIG_NO_NODE',
      'node: no node name: --node-name and NODE_NAME are unset',
      {
        hint: 'in the DaemonSet, set NODE_NAME from the downward API (fieldRef: spec.nodeName), as deploy/node does',
      },
    );
  }
  if (!isObjectName(node.value)) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_NAME',
      `node: node name "${node.value}" from ${node.source} is not a node name`,
      { hint: 'use the name kubectl get nodes shows', details: { name: node.value, source: node.source } },
    );
  }
  // (3)
  const namespaces = [...new Set(settings.list('namespaces'))];
  const from = settings.get('namespaces')?.source ?? '--namespaces';
  if (namespaces.length === 0) {
    throw new ConfigSyncError(
      'CS_CONFIG_NO_NAMESPACES',
      'node: no namespaces: --namespaces and CONFIG_SYNC_NAMESPACES are unset, and the node agent reads nothing outside the namespaces it is given',
      {
        hint: "list the namespaces whose Pods it may serve, e.g. CONFIG_SYNC_NAMESPACES=shop,payments; bind its Role in each (deploy/node, or the chart's nodeAgent.namespaces)",
      },
    );
  }
  for (const ns of namespaces) {
    if (!isNamespaceName(ns)) {
      throw new ConfigSyncError(
        'CS_USAGE_BAD_NAMESPACE',
        `node: "${ns}" (from ${from}) is not a namespace name`,
        {
          hint: 'a namespace name is a DNS label: lower case letters, digits and -, at most 63',
          details: { namespace: ns },
        },
      );
    }
  }
  // (4)
  const root = defaulted(settings, 'kubelet-root');
  if (!isDirectory(root.value)) {
    throw new ConfigSyncError(
      'CS_CONFIG_KUBELET_ROOT',
      `node: kubelet's root dir ${root.value} (from ${root.source}) is not a directory`,
      {
        hint: "mount kubelet's root dir (/var/lib/kubelet unless kubelet's --root-dir says otherwise) read-only, with mountPropagation HostToContainer, and point --kubelet-root at it",
        details: { path: root.value },
      },
    );
  }
  return { agent, nodeName: node.value, namespaces, kubeletRoot: root.value };
}

function isDirectory(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
