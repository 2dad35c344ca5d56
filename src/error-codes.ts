// Every error code config-sync reports to a person, once: its domain (which sets the exit code:
// usage and config 2, api and permission 3, internal 4), what triggers it, and how to fix it.
// ConfigSyncError takes its domain from here (errors.ts, DOMAIN_EXIT, maps it to the exit code),
// so a code cannot be reported under two exit codes; docs/errors.md is generated from this
// table (npm run errors:doc), and a unit test fails when the page, the table or the codes the
// source uses disagree.

export type ErrorDomain = 'usage' | 'config' | 'api' | 'permission' | 'internal';

export interface ErrorCodeInfo {
  readonly domain: ErrorDomain;
  /** What triggers it. */
  readonly when: string;
  /** How to fix it (the error's own hint says it for the case at hand). */
  readonly fix: string;
}

export const ERROR_CODES = {
  // --- usage: the command line --------------------------------------------------------------
  CS_USAGE_UNKNOWN_COMMAND: {
    domain: 'usage',
    when: 'the first argument is not a command of config-sync',
    fix: 'run `config-sync --help` for the commands',
  },
  CS_USAGE_BAD_FLAG: {
    domain: 'usage',
    when: "a flag the command does not take, a flag without its value, or a value it does not accept (`--on-drift reload` for the node agent or the webhook's sidecar defaults)",
    fix: 'run `config-sync <command> --help` for its flags and values',
  },
  CS_USAGE_BAD_OUTPUT: {
    domain: 'usage',
    when: '`-o` names a format the command cannot print',
    fix: 'use one of the formats the message lists (`text`, `json`, `wide`)',
  },
  CS_USAGE_BAD_DURATION: {
    domain: 'usage',
    when: 'a duration setting is not a duration, or is outside its range; the message says where the value came from',
    fix: 'give a duration such as `90s` or `1m30s` within the range the hint names',
  },
  CS_USAGE_BAD_NAME: {
    domain: 'usage',
    when: 'a Pod or node name (from a flag, `POD_NAME` or `NODE_NAME`) cannot be a Kubernetes name',
    fix: 'use the name `kubectl get pods` or `kubectl get nodes` shows; set it from the downward API in a Pod',
  },
  CS_USAGE_BAD_NAMESPACE: {
    domain: 'usage',
    when: 'a namespace is empty or not a DNS label',
    fix: 'name an existing namespace: lower-case letters, digits and `-`, at most 63',
  },
  CS_USAGE_BAD_WATCH: {
    domain: 'usage',
    when: 'a `--watch` target is not `[PATH=]configmap/NAME` or `[PATH=]secret/NAME`, or lacks the path the command needs',
    fix: 'write `--watch /etc/app=configmap/app-config`',
  },
  CS_USAGE_BAD_IMAGE: {
    domain: 'usage',
    when: '`--image` (of `inject` or `webhook`) is not an image reference',
    fix: 'give `registry.example/config-sync:0.1.0` or `config-sync@sha256:<digest>`',
  },
  CS_USAGE_CONTEXT_IN_CLUSTER: {
    domain: 'usage',
    when: '`--context` was given, but the cluster comes from the in-cluster service account, which has no contexts',
    fix: 'drop `--context`, or pass `--kubeconfig` with the file that holds it',
  },
  // --- inject: the manifests given to inject (usage: nothing is written) -----------------------
  CS_INJECT_YAML: {
    domain: 'usage',
    when: 'a document given to `inject` is not valid YAML',
    fix: 'fix the YAML at the line named; nothing was written',
  },
  CS_INJECT_BAD_LIST: {
    domain: 'usage',
    when: 'a `List` whose `items` is not a list, or holds an item that is not an object',
    fix: 'remove the empty item (often a stray `-` line) or complete it',
  },
  CS_INJECT_BAD_POD: {
    domain: 'usage',
    when: 'a Pod template whose fields have the wrong shape (containers not a list, a volume that is not an object, ...)',
    fix: 'fix the field named; `kubectl apply --dry-run=server` shows the same',
  },
  CS_INJECT_NO_CONTAINERS: {
    domain: 'usage',
    when: 'a Pod template with no containers',
    fix: 'give `inject` complete Pod templates',
  },
  CS_INJECT_SERVICE_ACCOUNT: {
    domain: 'usage',
    when: "the Pod runs as another ServiceAccount than the agent's; a Pod has only one",
    fix: "bind config-sync's Role to that ServiceAccount and pass `--service-account <name>`",
  },
  CS_INJECT_NO_TOKEN: {
    domain: 'usage',
    when: 'the Pod sets `automountServiceAccountToken: false`, so the agent could not reach the API',
    fix: 'remove it, or mount a projected service-account token yourself',
  },
  CS_INJECT_NAME_TAKEN: {
    domain: 'usage',
    when: 'an app container is already named `config-sync`',
    fix: 'rename that container',
  },
  // --- config: the settings, files and cluster the command was given ---------------------------
  CS_CONFIG_FILE: {
    domain: 'config',
    when: 'the `--config` file cannot be read, is not YAML, or is not a map of setting names to values',
    fix: 'write a YAML map such as `grace: 2m` (names as the long flags, without dashes)',
  },
  CS_CONFIG_NOT_A_FILE: {
    domain: 'config',
    when: 'a file config-sync must read (a token, a kubeconfig, the config file, a key) is a FIFO, device or socket, or larger than its kind can be',
    fix: 'name a regular file',
  },
  CS_CONFIG_LISTEN: {
    domain: 'config',
    when: 'the `--listen` address cannot be had (in use, not allowed)',
    fix: 'choose another port, or stop what holds it',
  },
  CS_CONFIG_MOUNT_ROOT: {
    domain: 'config',
    when: '`--mount-root` is not a directory',
    fix: "point it at where the app's mount paths are in the agent's filesystem (`/` in the sidecar)",
  },
  CS_CONFIG_NO_TARGETS: {
    domain: 'config',
    when: 'nothing to check: no `--watch` target, and no Pod (or a Pod with no ConfigMap or Secret)',
    fix: 'in a Pod, set `POD_NAME` from the downward API; elsewhere pass `--watch`',
  },
  CS_CONFIG_NO_NAMESPACE: {
    domain: 'config',
    when: '`status` has no namespace to look in',
    fix: 'pass `-n NAMESPACE`, `-A`, or set a namespace in the kubeconfig context',
  },
  CS_CONFIG_NAMESPACE_ABSENT: {
    domain: 'config',
    when: 'the namespace in effect does not exist on that server (a typo, or another cluster); told where the identity may read namespaces',
    fix: 'name an existing namespace, or the cluster it is on (`--context`, `--kubeconfig`)',
  },
  CS_CONFIG_NO_NODE: {
    domain: 'config',
    when: '`config-sync node` has no node name (`--node-name`, `NODE_NAME`)',
    fix: 'set `NODE_NAME` from the downward API (`spec.nodeName`), as deploy/node does',
  },
  CS_CONFIG_NO_NAMESPACES: {
    domain: 'config',
    when: '`config-sync node` was given no namespaces to serve',
    fix: 'set `CONFIG_SYNC_NAMESPACES` (or `--namespaces`) and bind its Role in each',
  },
  CS_CONFIG_KUBELET_ROOT: {
    domain: 'config',
    when: "the node agent's `--kubelet-root` is not a directory",
    fix: "mount kubelet's root dir read-only with `mountPropagation: HostToContainer` and point `--kubelet-root` at it",
  },
  CS_CONFIG_TLS: {
    domain: 'config',
    when: "the webhook's certificate or key cannot be read, is not PEM, or do not match",
    fix: 'pass `--tls-cert-file` and `--tls-key-file` of one key pair (e.g. from cert-manager)',
  },
  CS_CONFIG_BAD_ANNOTATION: {
    domain: 'config',
    when: '`doctor` found a `config-sync.io/` annotation on the Pod that config-sync does not read, or a value it cannot read (the agent reports drift in that Pod and never restarts it, and sends an InvalidAnnotation Event)',
    fix: 'fix the annotation on the Pod template as the message says ([configuration](configuration.md#per-workload-annotations))',
  },
  CS_CONFIG_SERVER_TOO_OLD: {
    domain: 'config',
    when: '`doctor` found the API server older than Kubernetes 1.29, where the sidecar cannot run as a native sidecar',
    fix: 'upgrade the cluster to 1.30 or newer (1.30 for the admission policies and the node agent)',
  },
  CS_AUTH_EMPTY_TOKEN: {
    domain: 'config',
    when: 'a token file or kubeconfig token is empty; config-sync never sends an anonymous request',
    fix: 'check the projected token volume or the kubeconfig user',
  },
  CS_AUTH_EXEC_FAILED: {
    domain: 'config',
    when: "the kubeconfig user's exec credential plugin failed, or ran for more than 30 s",
    fix: 'run the plugin command the message names yourself (it may need a login first)',
  },
  // --- scope: which cluster, namespace and identity (config) -----------------------------------
  CS_SCOPE_NO_CLUSTER: {
    domain: 'config',
    when: 'no Kubernetes API configured: no `--kubeconfig`, no `KUBECONFIG`, not in a Pod, no `~/.kube/config`',
    fix: 'pass `--kubeconfig`, set `KUBECONFIG`, or run in a Pod; config-sync never falls back to `localhost:8080`',
  },
  CS_SCOPE_KUBECONFIG_UNREADABLE: {
    domain: 'config',
    when: 'a kubeconfig that was named (or a file it names) cannot be read or parsed',
    fix: 'fix or remove it; config-sync does not silently try another source',
  },
  CS_SCOPE_NO_CONTEXT: {
    domain: 'config',
    when: 'the kubeconfig has no current-context and no `--context` was given',
    fix: 'pass `--context` with one of the contexts listed',
  },
  CS_SCOPE_CONTEXT_NOT_FOUND: {
    domain: 'config',
    when: 'the context asked for is not in the kubeconfig',
    fix: 'use one of the contexts listed',
  },
  CS_SCOPE_NO_SERVER: {
    domain: 'config',
    when: "the context's cluster is not defined, or has no server",
    fix: 'add `clusters[].cluster.server` for it',
  },
  CS_SCOPE_NO_CREDENTIALS: {
    domain: 'config',
    when: "the context's user is not defined, or has no token, client certificate or exec plugin",
    fix: 'add credentials to that user; config-sync sends no anonymous request',
  },
  CS_SCOPE_BAD_SERVICE_ENV: {
    domain: 'config',
    when: '`KUBERNETES_SERVICE_HOST` or `KUBERNETES_SERVICE_PORT` is not a host or a port',
    fix: 'unset what was set by hand (kubelet sets them), or pass `--kubeconfig`',
  },
  CS_SCOPE_IN_CLUSTER_NO_TOKEN: {
    domain: 'config',
    when: 'in a Pod, but no service-account token is mounted',
    fix: 'let the token be mounted (`automountServiceAccountToken` not false), or pass `--kubeconfig`',
  },
  CS_SCOPE_IN_CLUSTER_EMPTY_TOKEN: {
    domain: 'config',
    when: 'the mounted service-account token file is empty',
    fix: 'check the projected token volume',
  },
  CS_SCOPE_NO_NAMESPACE: {
    domain: 'config',
    when: 'no namespace from any source; config-sync never assumes `default`',
    fix: 'in a Pod set `POD_NAMESPACE` from the downward API; elsewhere pass `--namespace`',
  },
  CS_SCOPE_NAMESPACE_CONFLICT: {
    domain: 'config',
    when: "the agent's `POD_NAMESPACE` and its service account's namespace disagree",
    fix: 'take `POD_NAMESPACE` from the downward API; fix whichever was set by hand',
  },
  CS_SCOPE_BAD_PROXY: {
    domain: 'config',
    when: 'a proxy setting (`HTTPS_PROXY`, a kubeconfig `proxy-url`) is not an http, https or socks5 URL',
    fix: 'set a proxy URL such as `http://proxy.example:3128`, or unset it',
  },
  // --- api: the API server's answers ----------------------------------------------------------
  CS_API_UNREACHABLE: {
    domain: 'api',
    when: 'the API server did not answer: refused, unresolvable, or no answer within `--request-timeout`',
    fix: 'check the server (the message says where it came from) and the network to it; the agent tries again',
  },
  CS_API_TLS: {
    domain: 'api',
    when: 'the TLS handshake with the API server failed',
    fix: "the CA in use (the message says where it came from) must sign the server's certificate",
  },
  CS_API_PROXY: {
    domain: 'api',
    when: 'the proxy refused the tunnel to the API server (407, 403) or could not be reached',
    fix: 'give the proxy its user and password, allow the server in its rules, or add the server to `NO_PROXY`',
  },
  CS_API_STREAM_RESET: {
    domain: 'api',
    when: "a hop in front of the API server reset the request's HTTP/2 stream before any answer",
    fix: 'nothing, if it passes: the agent tries again; if it persists, check that hop and the server behind it',
  },
  CS_API_NOT_FOUND: {
    domain: 'api',
    when: 'an object config-sync needs (its Pod, a source, the workload) does not exist',
    fix: 'check the name and the namespace (`doctor` says where the namespace came from)',
  },
  CS_API_FAILED: {
    domain: 'api',
    when: 'the API server answered a request with an error not named above (a 5xx, a 422)',
    fix: 'retry; if it persists, check the API server',
  },
  // --- permission: who config-sync is, and what it may do -------------------------------------
  CS_API_UNAUTHORIZED: {
    domain: 'permission',
    when: 'the API server rejected the credentials (401): expired, revoked, or for another audience or issuer',
    fix: 'renew the token or credentials the hint names',
  },
  CS_API_FORBIDDEN: {
    domain: 'permission',
    when: 'RBAC or an admission policy refused a request (403)',
    fix: '`config-sync doctor --fix` prints the Role the agent needs',
  },
  CS_DOCTOR_MISSING_PERMISSIONS: {
    domain: 'permission',
    when: '`doctor` found permissions the agent needs and does not have',
    fix: 'apply the Role and RoleBinding `doctor --fix` prints, in the namespace named',
  },
  // --- internal ------------------------------------------------------------------------------
  CS_INTERNAL: {
    domain: 'internal',
    when: 'an error config-sync did not expect (a bug)',
    fix: 'report it with the message and the command that gave it',
  },
} as const satisfies Readonly<Record<string, ErrorCodeInfo>>;

export type ErrorCode = keyof typeof ERROR_CODES;
