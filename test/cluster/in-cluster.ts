// Lays out what kubelet gives a Pod for in-cluster API access, so in-cluster loading is tested for
// real: <root>/var/run/secrets/kubernetes.io/serviceaccount/{token,ca.crt,namespace}, written as
// the projected volume kubelet mounts there (AtomicWriter layout, so a token rotation is the same
// `..data` swap as on a node), plus KUBERNETES_SERVICE_HOST/PORT pointing at the test apiserver on
// 127.0.0.1, never at a ClusterIP.
import fs from 'node:fs';
import path from 'node:path';
import type { ControlPlaneInfo } from './control-plane.ts';
import { atomicWrite } from './kubelet-volume.ts';

export const SERVICE_ACCOUNT_DIR = 'var/run/secrets/kubernetes.io/serviceaccount';

export interface InClusterLayout {
  /** The prefix for client-node's loadFromCluster(pathPrefix) and the agent's own setting. */
  readonly root: string;
  readonly serviceAccountDir: string;
  readonly env: { readonly KUBERNETES_SERVICE_HOST: string; readonly KUBERNETES_SERVICE_PORT: string };
}

export interface InClusterSpec {
  readonly token: string;
  readonly namespace: string;
  /** The CA bundle; the control plane's by default. */
  readonly caPem?: string;
}

export function layInClusterDir(root: string, info: ControlPlaneInfo, spec: InClusterSpec): InClusterLayout {
  const serviceAccountDir = path.join(root, SERVICE_ACCOUNT_DIR);
  fs.mkdirSync(serviceAccountDir, { recursive: true });
  writeServiceAccountVolume(serviceAccountDir, info, spec);
  return {
    root,
    serviceAccountDir,
    env: { KUBERNETES_SERVICE_HOST: info.host, KUBERNETES_SERVICE_PORT: String(info.port) },
  };
}

/**
 * The environment of a process in that Pod: the in-cluster variables, the laid-out
 * service-account directory, and the downward-API POD_NAMESPACE / POD_NAME.
 */
export function podEnv(layout: InClusterLayout, namespace: string, podName: string): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: layout.root,
    ...layout.env,
    CONFIG_SYNC_SERVICE_ACCOUNT_DIR: layout.serviceAccountDir,
    POD_NAMESPACE: namespace,
    POD_NAME: podName,
  };
}

/** Replaces the token (and the rest) the way kubelet does when it rotates a projected token. */
export function rotateInClusterToken(
  layout: InClusterLayout,
  info: ControlPlaneInfo,
  spec: InClusterSpec,
): void {
  writeServiceAccountVolume(layout.serviceAccountDir, info, spec);
}

function writeServiceAccountVolume(dir: string, info: ControlPlaneInfo, spec: InClusterSpec): void {
  const mode = 0o644; // the projected volume's defaultMode for the ServiceAccount token
  atomicWrite(dir, {
    token: { data: Buffer.from(spec.token), mode },
    'ca.crt': { data: Buffer.from(spec.caPem ?? info.caPem), mode },
    namespace: { data: Buffer.from(spec.namespace), mode },
  });
}
