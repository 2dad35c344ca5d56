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
//
// A request names what it is about (a ResourceRef: group, resource, namespace, name), and a
// failure comes back already explained (api-errors.ts): who was refused which verb on what, and
// the fix. Callers never wrap errors themselves; the HTTP status stays readable with apiStatus().
import { type ApiRequest, explainApiError } from './api-errors.ts';
import { inClusterConnection } from './in-cluster-connection.ts';
import { type ResourceRef, resourcePath } from './resources.ts';
import type { Scope } from './scope.ts';
import {
  type ConnectionSource,
  createTransport,
  type Query,
  type Transport,
  type TransportOptions,
  type WatchEvent,
} from './transport.ts';

/** Patch types config-sync sends. */
export const PATCH = {
  merge: 'application/merge-patch+json',
  json: 'application/json-patch+json',
  strategic: 'application/strategic-merge-patch+json',
} as const;

export interface KubeClient {
  readonly scope: Scope;
  /** Requests sent, by verb (`get`, `list`, `watch`, `patch`, `create`, ...): for metrics and benchmarks. */
  readonly requests: Readonly<Record<string, number>>;
  /** GET an object (`name` set) or a collection (a list), or a non-resource path such as `/version`. */
  get<T>(target: ResourceRef | NonResourcePath, query?: Query): Promise<T>;
  create<T>(target: ResourceRef, body: unknown): Promise<T>;
  /** `query`: e.g. `{ dryRun: 'All' }` for a server-side dry run. */
  patch<T>(target: ResourceRef, body: unknown, type: keyof typeof PATCH, query?: Query): Promise<T>;
  watch(options: WatchRequest, onEvent: (event: WatchEvent) => void): Promise<void>;
  /** A watch silent for its `inactivityMs` is kept if the connection still answers (HTTP/2). */
  keepsQuietWatches(): boolean;
}

/** A URL the API server serves outside its resources (`/version`, `/readyz`). */
export interface NonResourcePath {
  readonly path: string;
}

export interface WatchRequest {
  /** The collection to watch. */
  readonly target: ResourceRef;
  readonly query?: Query;
  readonly signal: AbortSignal;
  /**
   * Silence this long fails the stream, unless its connection still answers a ping (HTTP/2) and
   * the server's end (`timeoutSeconds`) is still ahead: then it is quiet, and kept.
   */
  readonly inactivityMs: number;
}

/**
 * The request as an error names it: the verb RBAC checks, and the resource it is about. A list
 * or watch with a `metadata.name` field selector is about that one object (RBAC authorizes it
 * against resourceNames), so it is named too.
 */
function requestOf(verb: string, target: ResourceRef | NonResourcePath, query?: Query): ApiRequest {
  if ('path' in target) return { verb, resource: target.path };
  const selected = String(query?.fieldSelector ?? '').match(/^metadata\.name=(.+)$/)?.[1];
  const name = target.name ?? selected;
  return {
    verb,
    resource: target.subresource ? `${target.resource}/${target.subresource}` : target.resource,
    ...(target.group ? { group: target.group } : {}),
    ...(target.namespace !== undefined ? { namespace: target.namespace } : {}),
    ...(name !== undefined ? { name } : {}),
  };
}

export function createKubeClient(scope: Scope, options: TransportOptions = {}): KubeClient {
  const transport: Transport = createTransport(connectionFor(scope), {
    ...options,
    ...(scope.proxy ? { proxy: scope.proxy } : {}),
  });
  const explained = async <T>(request: ApiRequest, call: () => Promise<T>): Promise<T> => {
    try {
      return await call();
    } catch (error) {
      throw explainApiError(error, request, scope);
    }
  };
  const pathOf = (target: ResourceRef | NonResourcePath) =>
    'path' in target ? target.path : resourcePath(target);
  return {
    scope,
    requests: transport.requests,
    get: (target, query) =>
      explained(
        requestOf('path' in target || target.name !== undefined ? 'get' : 'list', target, query),
        () => transport.request({ path: pathOf(target), ...(query ? { query } : {}) }),
      ),
    create: (target, body) =>
      explained(requestOf('create', target), () =>
        transport.request({ method: 'POST', path: resourcePath(target), body }),
      ),
    patch: (target, body, type, query) =>
      explained(requestOf('patch', target), () =>
        transport.request({
          method: 'PATCH',
          path: resourcePath(target),
          body,
          contentType: PATCH[type],
          ...(query ? { query } : {}),
        }),
      ),
    watch: ({ target, ...rest }, onEvent) =>
      explained(requestOf('watch', target, rest.query), () =>
        transport.watch({ path: resourcePath(target), ...rest }, onEvent),
      ),
    keepsQuietWatches: transport.keepsQuietWatches,
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
