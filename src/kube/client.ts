// The one Kubernetes client of a process, built from the resolved Scope.
//
// One KubeConfig, and one API object per API group, made on first use and shared by every module
// for the life of the process: building a client per event or per check leaks connections (a
// classic operator bug). Nothing here picks a namespace: callers pass scope.namespace explicitly
// on every request.
import { createHash } from 'node:crypto';
import path from 'node:path';
import { type ApiType, KubeConfig } from '@kubernetes/client-node';
import type { Scope } from './scope.ts';
import { RotatingTokenFileAuth, TOKEN_FILE_PROVIDER } from './token-file-auth.ts';

export type ApiConstructor<T extends ApiType> = new (config: never) => T;

export interface KubeClient {
  readonly scope: Scope;
  readonly config: KubeConfig;
  /** Requests sent, by verb (`get`, `list`, `watch`, `patch`, `create`, ...): for metrics and benchmarks. */
  readonly requests: Readonly<Record<string, number>>;
  /** The shared API object for a group (CoreV1Api, AppsV1Api, ...). */
  api<T extends ApiType>(ctor: ApiConstructor<T>): T;
}

export function createKubeClient(scope: Scope): KubeClient {
  const config = kubeConfigFor(scope);
  const requests: Record<string, number> = {};
  reuseConnections(config, (verb) => {
    requests[verb] = (requests[verb] ?? 0) + 1;
  });
  const apis = new Map<unknown, ApiType>();
  return {
    scope,
    config,
    requests,
    api<T extends ApiType>(ctor: ApiConstructor<T>): T {
      let api = apis.get(ctor) as T | undefined;
      if (!api) {
        api = config.makeApiClient(ctor as never) as T;
        apis.set(ctor, api);
      }
      return api;
    },
  };
}

function kubeConfigFor(scope: Scope): KubeConfig {
  const cluster = scope.cluster.value;
  const kc = new KubeConfig();
  if (cluster.kind === 'in-cluster') {
    const dir = cluster.serviceAccountDir;
    kc.loadFromOptions({
      clusters: [
        {
          name: 'in-cluster',
          server: cluster.server,
          caFile: path.join(dir, 'ca.crt'),
          skipTLSVerify: false,
        },
      ],
      users: [
        {
          name: 'service-account',
          authProvider: { name: TOKEN_FILE_PROVIDER, config: { path: path.join(dir, 'token') } },
        },
      ],
      contexts: [{ name: 'in-cluster', cluster: 'in-cluster', user: 'service-account' }],
      currentContext: 'in-cluster',
    });
    kc.addAuthenticator(new RotatingTokenFileAuth());
    return kc;
  }
  // A KUBECONFIG list: the first file that defines a name wins, as in kubectl.
  const [first, ...rest] = cluster.files;
  if (first === undefined) throw new Error('kubeconfig scope without a file');
  kc.loadFromFile(first);
  for (const file of rest) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    for (const c of more.getClusters()) if (!kc.getCluster(c.name)) kc.addCluster(c);
    for (const u of more.getUsers()) if (!kc.getUser(u.name)) kc.addUser(u);
    for (const c of more.getContexts()) if (!kc.getContextObject(c.name)) kc.addContext(c);
  }
  kc.setCurrentContext(cluster.context);
  return kc;
}

interface Dispatcher {
  close(): Promise<void>;
  dispatch(options: { method?: string; path?: string }, handler: unknown): boolean;
}

interface DispatcherFactory {
  createDispatcher(cluster: unknown, options: Record<string, unknown>): Dispatcher | undefined;
}

/**
 * The Kubernetes verb of a request, as the API server's audit log names it:
 * `/api/v1/namespaces/x/configmaps` is a collection (list, or watch with watch=true),
 * `/api/v1/namespaces/x/configmaps/y` (and its subresources) an object (get).
 */
export function verbOf(method: string | undefined, path: string | undefined): string {
  const m = (method ?? 'GET').toUpperCase();
  if (m !== 'GET')
    return { POST: 'create', PUT: 'update', PATCH: 'patch', DELETE: 'delete' }[m] ?? m.toLowerCase();
  const [p = '', query = ''] = (path ?? '').split('?');
  if (/(^|&)watch=(true|1)(&|$)/.test(query)) return 'watch';
  const parts = p.split('/').filter(Boolean);
  const rest = parts.slice(parts[0] === 'api' ? 2 : 3);
  const collection = rest[0] === 'namespaces' && rest.length >= 2 ? rest.length === 3 : rest.length === 1;
  return collection ? 'list' : 'get';
}

/**
 * client-node 2.0.1 builds a new undici Agent for every request and every watch
 * (KubeConfig.applySecurityAuthentication -> createDispatcher), so each one opens a new TCP and
 * TLS connection: measured on the test control plane, 100 requests from one client opened 100
 * sockets. This keeps one dispatcher, and so one keep-alive connection pool, per TLS identity
 * (server, CA, client certificate and key, server name). When the identity changes (a rotated
 * client certificate) the old pool is closed and a new one made. `createDispatcher` is not part
 * of client-node's typed API, which is why the S6 integration test counts connections: a change
 * in the library shows there, not in production. Every request through it is counted by verb.
 */
function reuseConnections(config: KubeConfig, onRequest: (verb: string) => void): void {
  const factory = config as unknown as DispatcherFactory;
  const create = factory.createDispatcher.bind(config);
  let current: { key: string; dispatcher: Dispatcher | undefined } | undefined;
  factory.createDispatcher = (cluster, options) => {
    const hash = createHash('sha256');
    hash.update(String((cluster as { server?: string } | null)?.server));
    for (const field of ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername']) {
      hash.update(`\0${field}=`);
      const value = options[field];
      if (value !== undefined) hash.update(Buffer.isBuffer(value) ? value : String(value));
    }
    const key = hash.digest('hex');
    if (current?.key === key) return current.dispatcher;
    const previous = current?.dispatcher;
    const dispatcher = create(cluster, options);
    if (dispatcher) {
      const dispatch = dispatcher.dispatch.bind(dispatcher);
      dispatcher.dispatch = (opts, handler) => {
        onRequest(verbOf(opts.method, opts.path));
        return dispatch(opts, handler);
      };
    }
    current = { key, dispatcher };
    void previous?.close();
    return dispatcher;
  };
}
