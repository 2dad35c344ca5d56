// What the API server's version means for config-sync (pure): the sidecar runs as a native
// sidecar, an init container with `restartPolicy: Always` (on by default since Kubernetes 1.29),
// and the admission policies that hold the agent's token are ValidatingAdmissionPolicy v1 (GA in
// 1.30), as is what the node agent's policy reads of its token. Older than 1.29: the shipped
// manifests are refused, a problem. 1.29: the agent works, but nothing past RBAC holds its
// token, a note. A version that cannot be read as vMAJOR.MINOR (a custom build): a note.
import { ConfigSyncError } from '../errors.ts';

/** The oldest Kubernetes the sidecar runs on, and the oldest where all of config-sync does. */
export const MIN_SIDECAR = { major: 1, minor: 29 } as const;
export const MIN_FULL = { major: 1, minor: 30 } as const;

export interface VersionFindings {
  readonly problem?: ConfigSyncError;
  readonly note?: string;
}

/** `v1.36.3`, `v1.29.4-gke.1043000`, `v1.30.0+k3s1` -> major and minor. */
export function parseServerVersion(gitVersion: string): { major: number; minor: number } | undefined {
  const m = /^v?(\d+)\.(\d+)(?:\.|$|[-+])/.exec(gitVersion);
  return m ? { major: Number(m[1]), minor: Number(m[2]) } : undefined;
}

const atLeast = (v: { major: number; minor: number }, min: { major: number; minor: number }) =>
  v.major > min.major || (v.major === min.major && v.minor >= min.minor);

export function serverVersionFindings(gitVersion: string): VersionFindings {
  const v = parseServerVersion(gitVersion);
  if (!v)
    return {
      note: `the API server's version "${gitVersion}" is not vMAJOR.MINOR: config-sync needs Kubernetes 1.29 for the sidecar and 1.30 for its admission policies and the node agent; check yours`,
    };
  if (!atLeast(v, MIN_SIDECAR))
    return {
      problem: new ConfigSyncError(
        'CS_CONFIG_SERVER_TOO_OLD',
        `the API server is Kubernetes ${gitVersion}: the sidecar is a native sidecar (an init container with restartPolicy: Always), which needs 1.29, and the admission policies and the node agent need 1.30`,
        {
          hint: 'upgrade the cluster to Kubernetes 1.30 or newer; config-sync is tested on 1.36',
          details: { serverVersion: gitVersion },
        },
      ),
    };
  if (!atLeast(v, MIN_FULL))
    return {
      note: `the API server is Kubernetes ${gitVersion}: the admission policies (ValidatingAdmissionPolicy v1) and the node agent need 1.30, so here only RBAC holds what the agent's token may write`,
    };
  return {};
}
