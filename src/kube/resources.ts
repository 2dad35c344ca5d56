// The API resource (plural) behind each kind config-sync reads or restarts: one table, used for
// RBAC rules, SelfSubjectAccessReviews, request paths and error messages alike.
import type { SourceKind } from '../discover/targets.ts';

export type WorkloadKind = 'Deployment' | 'StatefulSet' | 'DaemonSet';

export const WORKLOAD_RESOURCE: Readonly<Record<WorkloadKind, string>> = {
  Deployment: 'deployments',
  StatefulSet: 'statefulsets',
  DaemonSet: 'daemonsets',
};

export const SOURCE_RESOURCE: Readonly<Record<SourceKind, string>> = {
  ConfigMap: 'configmaps',
  Secret: 'secrets',
};
