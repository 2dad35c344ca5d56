// Kubernetes object names, checked before any request: a name that cannot exist would come back
// as a 404 and read as "the source is gone" (drift), or, with `../..` in it, reach another path.
// The rules are apimachinery's validation: namespaces are DNS-1123 labels, ConfigMaps, Secrets
// and Pods DNS-1123 subdomains.

const LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** A namespace name: lower-case letters, digits and '-', at most 63, starting and ending alphanumeric. */
export function isNamespaceName(name: string): boolean {
  return name.length <= 63 && LABEL.test(name);
}

/** A ConfigMap, Secret or Pod name: like a namespace, with '.' too, at most 253. */
export function isObjectName(name: string): boolean {
  return name.length <= 253 && SUBDOMAIN.test(name);
}

/**
 * Orders strings by UTF-16 code unit: the same order in every process. Not localeCompare, whose
 * order follows the process's locale (LANG): the config hash, made from sorted source names, must
 * come out the same for every replica and for `heal` run from a laptop. localeCompare also loads
 * ICU's collation data on first use (about 3 MiB resident, docs/benchmarks.md).
 */
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
