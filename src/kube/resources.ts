// The API resource (plural) behind each kind config-sync reads or restarts: one table, used for
// RBAC rules, SelfSubjectAccessReviews, request paths and error messages alike.
/** The sources config-sync compares files against. */
export type SourceKind = 'ConfigMap' | 'Secret';

export interface SourceRef {
  readonly kind: SourceKind;
  readonly name: string;
}

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

export interface ResourceRef {
  /** API group; '' (or absent) for core. */
  readonly group?: string;
  /** API version; v1 unless given. */
  readonly version?: string;
  /** Plural resource. */
  readonly resource: string;
  readonly namespace?: string;
  readonly name?: string;
  readonly subresource?: string;
}

/** The REST path of a resource, a collection or an object: `/apis/apps/v1/namespaces/x/deployments/y`. */
export function resourcePath(ref: ResourceRef): string {
  const version = ref.version ?? 'v1';
  const parts = [ref.group ? `/apis/${ref.group}/${version}` : `/api/${version}`];
  if (ref.namespace !== undefined) parts.push('namespaces', encodeURIComponent(ref.namespace));
  parts.push(ref.resource);
  if (ref.name !== undefined) parts.push(encodeURIComponent(ref.name));
  if (ref.subresource !== undefined) parts.push(ref.subresource);
  return parts.join('/');
}
