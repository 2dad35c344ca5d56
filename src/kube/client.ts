// The one Kubernetes client of a process, built from the resolved Scope.
//
// One transport (one keep-alive connection pool per TLS identity), made once and shared by every
// module for the life of the process: building a client per event or per check leaks
// connections (a classic operator bug). Nothing here picks a namespace: callers pass
// scope.namespace explicitly in every path.
//
// In a cluster the connection comes from the service-account volume (in-cluster-connection.ts).
// From a kubeconfig it comes from client-node, which is loaded on the first request only in
// that case (kubeconfig-connection.ts): the agent in a Pod never pays for it.
import { inClusterConnection } from './in-cluster-connection.ts';
import type { Scope } from './scope.ts';
import {
  type ConnectionSource,
  createTransport,
  type Query,
  type Transport,
  type TransportOptions,
  type WatchEvent,
  type WatchOptions,
} from './transport.ts';

/** Patch types config-sync sends. */
export const PATCH = {
  merge: 'application/merge-patch+json',
  strategic: 'application/strategic-merge-patch+json',
} as const;

export interface KubeClient {
  readonly scope: Scope;
  /** Requests sent, by verb (`get`, `list`, `watch`, `patch`, `create`, ...): for metrics and benchmarks. */
  readonly requests: Readonly<Record<string, number>>;
  /** GET an object or a collection (a list). */
  get<T>(path: string, query?: Query): Promise<T>;
  create<T>(path: string, body: unknown): Promise<T>;
  patch<T>(path: string, body: unknown, type: keyof typeof PATCH): Promise<T>;
  watch(options: WatchOptions, onEvent: (event: WatchEvent) => void): Promise<void>;
}

export function createKubeClient(scope: Scope, options: TransportOptions = {}): KubeClient {
  const transport: Transport = createTransport(connectionFor(scope), options);
  return {
    scope,
    requests: transport.requests,
    get: (path, query) => transport.request({ path, ...(query ? { query } : {}) }),
    create: (path, body) => transport.request({ method: 'POST', path, body }),
    patch: (path, body, type) => transport.request({ method: 'PATCH', path, body, contentType: PATCH[type] }),
    watch: (options, onEvent) => transport.watch(options, onEvent),
  };
}

function connectionFor(scope: Scope): ConnectionSource {
  const cluster = scope.cluster.value;
  if (cluster.kind === 'in-cluster') return inClusterConnection(cluster.server, cluster.serviceAccountDir);
  let loaded: Promise<ConnectionSource> | undefined;
  return async () => {
    loaded ??= import('./kubeconfig-connection.ts').then((m) =>
      m.kubeconfigConnection(cluster.files, cluster.context),
    );
    return (await loaded)();
  };
}
