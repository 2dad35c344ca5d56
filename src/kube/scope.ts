// Resolves, once per process, which cluster config-sync talks to, in which namespace and as whom,
// and records where each answer came from. Pure: the facts (flags, environment, files) are
// gathered at the edge by scope-facts.ts; this module only decides.
//
// Why this exists: a Kubernetes client has three places that each claim to know "the namespace"
// and "who I am": flags, the kubeconfig context and the in-cluster service account. When they
// disagree, things fail silently. Here every field carries its provenance, every disagreement
// is reported, and nothing falls back to `default` or to http://localhost:8080.
//
// Precedence (docs/security.md, "Permissions and scope"):
//   cluster:   --kubeconfig > KUBECONFIG > in-cluster > ~/.kube/config   (--context picks a context)
//   namespace: --namespace > POD_NAMESPACE > service-account namespace file > context namespace
//   proxy:     the kubeconfig cluster's proxy-url > HTTPS_PROXY (HTTP_PROXY for an http server)
//              unless NO_PROXY names the server, as client-go (proxy.ts)
import { ConfigSyncError, type ErrorCode } from '../errors.ts';
import { isNamespaceName } from './names.ts';
import { decideProxy, type ProxyEnv, type ProxyRoute } from './proxy.ts';

/** A value and where it came from, in words a person can act on. */
export interface Sourced<T> {
  readonly value: T;
  readonly source: string;
}

export type CredentialKind =
  | 'service-account-token-file'
  | 'token'
  | 'token-file'
  | 'client-certificate'
  | 'exec'
  | 'auth-provider'
  | 'basic-auth'
  | 'none';

export interface KubeconfigContext {
  readonly cluster: string;
  readonly user: string;
  readonly namespace: string | undefined;
}

export interface KubeconfigCluster {
  readonly server: string;
  readonly proxyUrl?: string;
}

export interface KubeconfigUser {
  /** A kubeconfig `token-file` shows as `token`: client-node reads the file when it loads. */
  readonly credentials: CredentialKind;
}

/** What config-sync needs to know of a kubeconfig (one file, or several merged as kubectl does). */
export interface KubeconfigView {
  readonly files: readonly string[];
  readonly currentContext: string | undefined;
  readonly contexts: Readonly<Record<string, KubeconfigContext>>;
  readonly clusters: Readonly<Record<string, KubeconfigCluster>>;
  readonly users: Readonly<Record<string, KubeconfigUser>>;
}

export type LoadedKubeconfig =
  | { readonly ok: true; readonly view: KubeconfigView }
  | { readonly ok: false; readonly path: string; readonly reason: string };

export interface ScopeFacts {
  /** Settings given to config-sync itself (flag, or its CONFIG_SYNC_* variable), with their origin. */
  readonly flags: {
    readonly kubeconfig?: Sourced<string>;
    readonly context?: Sourced<string>;
    readonly namespace?: Sourced<string>;
  };
  readonly env: ProxyEnv & {
    readonly KUBECONFIG?: string;
    readonly POD_NAMESPACE?: string;
    readonly KUBERNETES_SERVICE_HOST?: string;
    readonly KUBERNETES_SERVICE_PORT?: string;
  };
  readonly serviceAccount: {
    readonly dir: string;
    /** The token file: missing, empty (only white space), or present. */
    readonly token: 'missing' | 'empty' | 'present';
    /** Contents of <dir>/namespace, if the file exists. */
    readonly namespace: string | undefined;
  };
  /** Each kubeconfig source that is set or present, already read. */
  readonly kubeconfigs: {
    readonly flag?: LoadedKubeconfig;
    readonly env?: LoadedKubeconfig;
    readonly home?: LoadedKubeconfig;
  };
  /** The path ~/.kube/config would have, for messages. */
  readonly homeKubeconfigPath: string;
}

export type ClusterSource =
  | {
      readonly kind: 'kubeconfig';
      readonly server: string;
      readonly files: readonly string[];
      readonly context: string;
    }
  | {
      readonly kind: 'in-cluster';
      readonly server: string;
      readonly serviceAccountDir: string;
    };

export interface Credentials {
  readonly kind: CredentialKind;
  /** The kubeconfig user name, or the service-account token file; never a secret. */
  readonly user?: string;
  readonly tokenFile?: string;
}

export interface Disagreement {
  readonly field: 'namespace';
  readonly chosen: Sourced<string>;
  readonly other: Sourced<string>;
  /** `error` stops the agent; `warning` is reported by doctor and logged at start. */
  readonly severity: 'error' | 'warning';
  readonly message: string;
}

export interface Scope {
  readonly cluster: Sourced<ClusterSource>;
  readonly namespace: Sourced<string> | undefined;
  readonly credentials: Sourced<Credentials>;
  readonly disagreements: readonly Disagreement[];
  /** The proxy every connection to the API server goes through, if any, and where it came from. */
  readonly proxy?: ProxyRoute;
  /** A proxy variable is set but not used for this server, and why (doctor shows it). */
  readonly proxyBypassed?: string;
}

/** Who is resolving: the agent in a pod is strict about its own namespace; a person is not. */
export type ScopePurpose = 'agent' | 'operator';

const LOCALHOST_NOTE = 'config-sync never falls back to http://localhost:8080';

// --- errors -------------------------------------------------------------------------------------

function scopeError(code: ErrorCode, message: string, hint: string, details: Record<string, string> = {}) {
  return new ConfigSyncError(code, message, { hint, details });
}

// --- cluster ------------------------------------------------------------------------------------

/**
 * Picks the cluster source, in order:
 *  (1) --kubeconfig: used as given; unreadable is an error, never a reason to try the next;
 *  (2) KUBECONFIG: likewise (kubectl skips missing files in the list; all missing is an error);
 *  (3) in-cluster: KUBERNETES_SERVICE_HOST/PORT set and a service-account token present;
 *      the variables without the token is an error (automountServiceAccountToken: false?);
 *  (4) ~/.kube/config, if present;
 *  (5) nothing: an error that says so, and no request is ever made.
 * Then --context selects a context of the chosen kubeconfig (meaningless in-cluster: an error).
 */
function resolveCluster(facts: ScopeFacts): { cluster: Sourced<ClusterSource>; view?: KubeconfigView } {
  const { flags, env, kubeconfigs, serviceAccount } = facts;

  const fromKubeconfig = (loaded: LoadedKubeconfig, origin: string) => {
    if (!loaded.ok) {
      throw scopeError(
        'CS_SCOPE_KUBECONFIG_UNREADABLE',
        `cannot use the kubeconfig from ${origin}: ${loaded.reason}`,
        `fix or remove ${origin}; config-sync does not silently try another source`,
        { path: loaded.path },
      );
    }
    return { cluster: kubeconfigCluster(loaded.view, flags.context, origin), view: loaded.view };
  };

  // (1)
  if (flags.kubeconfig !== undefined && kubeconfigs.flag)
    return fromKubeconfig(kubeconfigs.flag, flags.kubeconfig.source);
  // (2)
  if (env.KUBECONFIG && kubeconfigs.env) return fromKubeconfig(kubeconfigs.env, 'KUBECONFIG');
  // (3)
  const host = env.KUBERNETES_SERVICE_HOST;
  const port = env.KUBERNETES_SERVICE_PORT;
  if (host && port) {
    if (!/^[0-9]{1,5}$/.test(port) || Number(port) > 65535) {
      throw scopeError(
        'CS_SCOPE_BAD_SERVICE_ENV',
        `KUBERNETES_SERVICE_PORT=${port} is not a port (1-65535)`,
        'kubelet sets KUBERNETES_SERVICE_HOST/PORT from the kubernetes Service; unset what was set by hand, or pass --kubeconfig',
      );
    }
    if (!/^(?:[0-9A-Za-z.-]+|[0-9a-fA-F:]+)$/.test(host)) {
      throw scopeError(
        'CS_SCOPE_BAD_SERVICE_ENV',
        `KUBERNETES_SERVICE_HOST=${host} is not a host name or IP address`,
        'kubelet sets KUBERNETES_SERVICE_HOST/PORT from the kubernetes Service; unset what was set by hand, or pass --kubeconfig',
      );
    }
    if (serviceAccount.token === 'empty') {
      throw scopeError(
        'CS_SCOPE_IN_CLUSTER_EMPTY_TOKEN',
        `the service-account token file ${serviceAccount.dir}/token is empty`,
        'config-sync never sends an anonymous request; check the projected token volume (kubelet writes the token there), or pass --kubeconfig',
        { path: `${serviceAccount.dir}/token` },
      );
    }
    if (serviceAccount.token === 'missing') {
      throw scopeError(
        'CS_SCOPE_IN_CLUSTER_NO_TOKEN',
        `running in a pod (KUBERNETES_SERVICE_HOST=${host}) but there is no service-account token at ${serviceAccount.dir}/token`,
        'mount the service-account token (automountServiceAccountToken must not be false for this pod or its ServiceAccount), or pass --kubeconfig',
        { path: `${serviceAccount.dir}/token` },
      );
    }
    if (flags.context !== undefined) {
      throw new ConfigSyncError(
        'CS_USAGE_CONTEXT_IN_CLUSTER',
        `${flags.context.source} ${flags.context.value} was given, but the cluster comes from the in-cluster service account, which has no contexts`,
        { hint: 'drop --context, or pass --kubeconfig with the file that holds that context' },
      );
    }
    const hostPart = host.includes(':') ? `[${host}]` : host;
    return {
      cluster: {
        value: {
          kind: 'in-cluster',
          server: `https://${hostPart}:${port}`,
          serviceAccountDir: serviceAccount.dir,
        },
        source: `in-cluster (KUBERNETES_SERVICE_HOST/PORT, ${serviceAccount.dir})`,
      },
    };
  }
  // (4)
  if (kubeconfigs.home) return fromKubeconfig(kubeconfigs.home, facts.homeKubeconfigPath);
  // (5)
  throw scopeError(
    'CS_SCOPE_NO_CLUSTER',
    'no Kubernetes API configured: no --kubeconfig, no KUBECONFIG, not in a pod, and no ' +
      `${facts.homeKubeconfigPath}`,
    `pass --kubeconfig, set KUBECONFIG, or run in a pod with a service-account token; ${LOCALHOST_NOTE}`,
  );
}

function kubeconfigCluster(
  view: KubeconfigView,
  contextFlag: Sourced<string> | undefined,
  origin: string,
): Sourced<ClusterSource> {
  const files = view.files.join(', ');
  const contextName = contextFlag?.value ?? view.currentContext;
  if (!contextName) {
    throw scopeError(
      'CS_SCOPE_NO_CONTEXT',
      `the kubeconfig from ${origin} (${files}) has no current-context and no --context was given`,
      `pass --context (one of: ${Object.keys(view.contexts).join(', ') || 'none defined'})`,
    );
  }
  const context = view.contexts[contextName];
  if (!context) {
    throw scopeError(
      'CS_SCOPE_CONTEXT_NOT_FOUND',
      `context "${contextName}" (from ${contextFlag ? contextFlag.source : 'current-context'}) is not in ${files}`,
      `use one of: ${Object.keys(view.contexts).join(', ') || 'none defined'}`,
      { context: contextName },
    );
  }
  const cluster = view.clusters[context.cluster];
  if (!cluster?.server) {
    throw scopeError(
      'CS_SCOPE_NO_SERVER',
      `context "${contextName}" names cluster "${context.cluster}", which ${cluster ? 'has no server' : 'is not defined'} in ${files}`,
      `add clusters[].cluster.server for "${context.cluster}"; ${LOCALHOST_NOTE}`,
    );
  }
  const how = contextFlag ? `${contextFlag.source} ${contextName}` : `current-context ${contextName}`;
  return {
    value: { kind: 'kubeconfig', server: cluster.server, files: view.files, context: contextName },
    source: `${origin} (${files}), ${how}`,
  };
}

// --- credentials --------------------------------------------------------------------------------

function resolveCredentials(cluster: ClusterSource, view: KubeconfigView | undefined): Sourced<Credentials> {
  if (cluster.kind === 'in-cluster') {
    const tokenFile = `${cluster.serviceAccountDir}/token`;
    return { value: { kind: 'service-account-token-file', tokenFile }, source: tokenFile };
  }
  const context = view?.contexts[cluster.context];
  const user = context ? view?.users[context.user] : undefined;
  if (!context || !user || user.credentials === 'none') {
    throw scopeError(
      'CS_SCOPE_NO_CREDENTIALS',
      `context "${cluster.context}" has ${user ? `user "${context?.user}" with no credentials` : `no user "${context?.user ?? ''}" defined`} in ${cluster.files.join(', ')}`,
      'add a token, client certificate or exec plugin to that user; config-sync does not send anonymous requests',
    );
  }
  return {
    value: { kind: user.credentials, user: context.user },
    source: `kubeconfig user "${context.user}"`,
  };
}

// --- namespace ----------------------------------------------------------------------------------

/**
 * Collects every namespace source that is set, in precedence order, picks the first, and reports
 * each other source that says something different. For the agent, POD_NAMESPACE (downward API)
 * and the service-account namespace file both describe the pod's own namespace: if they differ,
 * one of them is wrong and nothing the agent does can be trusted, so that is an error.
 */
function resolveNamespace(
  facts: ScopeFacts,
  cluster: ClusterSource,
  view: KubeconfigView | undefined,
  purpose: ScopePurpose,
): { namespace: Sourced<string> | undefined; disagreements: Disagreement[] } {
  const candidates: Sourced<string>[] = [];
  const add = (value: string | undefined, source: string) => {
    const v = value?.trim();
    if (v) candidates.push({ value: v, source });
  };
  // An empty --namespace (`-n ""`) is a mistake, not "none given": it was told as "no
  // --namespace", and another source was used in its place.
  if (facts.flags.namespace && facts.flags.namespace.value.trim() === '') {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_NAMESPACE',
      `the namespace from ${facts.flags.namespace.source} is empty`,
      {
        hint: 'name a namespace, e.g. -n shop, or leave the flag out to take it from POD_NAMESPACE, the service account or the kubeconfig context',
        details: { source: facts.flags.namespace.source },
      },
    );
  }
  if (facts.flags.namespace) add(facts.flags.namespace.value, facts.flags.namespace.source);
  add(facts.env.POD_NAMESPACE, 'POD_NAMESPACE');
  add(facts.serviceAccount.namespace, `${facts.serviceAccount.dir}/namespace`);
  if (cluster.kind === 'kubeconfig') {
    add(view?.contexts[cluster.context]?.namespace, `kubeconfig context "${cluster.context}"`);
  }

  const [chosen, ...others] = candidates;
  if (!chosen) return { namespace: undefined, disagreements: [] };
  if (!isNamespaceName(chosen.value)) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_NAMESPACE',
      `namespace "${chosen.value}" from ${chosen.source} is not a namespace name`,
      {
        hint: 'a namespace is lower-case letters, digits and "-", at most 63, starting and ending with a letter or digit',
        details: { namespace: chosen.value, source: chosen.source },
      },
    );
  }

  const saFile = `${facts.serviceAccount.dir}/namespace`;
  const podOwn = (s: Sourced<string>) => s.source === 'POD_NAMESPACE' || s.source === saFile;
  const disagreements: Disagreement[] = [];
  for (const other of others) {
    if (other.value === chosen.value) continue;
    const fatal = purpose === 'agent' && podOwn(chosen) && podOwn(other);
    disagreements.push({
      field: 'namespace',
      chosen,
      other,
      severity: fatal ? 'error' : 'warning',
      message: `namespace "${chosen.value}" from ${chosen.source} differs from "${other.value}" from ${other.source}`,
    });
  }
  return { namespace: chosen, disagreements };
}

// --- proxy --------------------------------------------------------------------------------------

/** The kubeconfig cluster's proxy-url, and where it was read. */
function kubeconfigProxy(
  cluster: ClusterSource,
  view: KubeconfigView | undefined,
): { value: string; source: string } | undefined {
  if (cluster.kind !== 'kubeconfig') return undefined;
  const name = view?.contexts[cluster.context]?.cluster;
  const proxyUrl = name === undefined ? undefined : view?.clusters[name]?.proxyUrl;
  return proxyUrl ? { value: proxyUrl, source: `kubeconfig cluster "${name}" proxy-url` } : undefined;
}

// --- the whole scope ----------------------------------------------------------------------------

/**
 * Resolves the Scope or throws a ConfigSyncError saying what is missing or contradictory and how
 * to fix it. The agent additionally requires a namespace and no fatal disagreement.
 */
export function resolveScope(facts: ScopeFacts, purpose: ScopePurpose): Scope {
  const { cluster, view } = resolveCluster(facts);
  const credentials = resolveCredentials(cluster.value, view);
  const { namespace, disagreements } = resolveNamespace(facts, cluster.value, view, purpose);
  const { route: proxy, bypassed } = decideProxy(
    cluster.value.server,
    kubeconfigProxy(cluster.value, view),
    facts.env,
  );
  const scope: Scope = {
    cluster,
    namespace,
    credentials,
    disagreements,
    ...(proxy ? { proxy } : {}),
    ...(bypassed ? { proxyBypassed: bypassed } : {}),
  };
  if (purpose === 'agent') {
    requireNamespace(scope);
    const fatal = disagreements.find((d) => d.severity === 'error');
    if (fatal) {
      throw scopeError(
        'CS_SCOPE_NAMESPACE_CONFLICT',
        `the pod's own namespace is ambiguous: ${fatal.message}`,
        'POD_NAMESPACE must come from the downward API (fieldRef: metadata.namespace) and agree with the mounted service account; fix whichever was set by hand',
      );
    }
  }
  return scope;
}

/** The namespace, or an error telling where one could come from. Never `default`. */
export function requireNamespace(scope: Scope): Sourced<string> {
  if (scope.namespace) return scope.namespace;
  throw scopeError(
    'CS_SCOPE_NO_NAMESPACE',
    'no namespace from any source: no --namespace, no POD_NAMESPACE, no service-account namespace file, and the kubeconfig context sets none',
    'in a pod, set POD_NAMESPACE from the downward API (fieldRef: metadata.namespace); elsewhere pass --namespace. config-sync never assumes "default"',
  );
}
