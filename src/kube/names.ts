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
