// Turns a failed Kubernetes API request into a ConfigSyncError a person can act on: which verb
// on which resource in which namespace was refused, for whom, and the likely fix.
//
// Only the API's Status `reason`/`message` are used, never a raw response body: no object
// content, and so no ConfigMap or Secret value, can reach a log or a terminal through an error.
import { ConfigSyncError } from '../errors.ts';
import { hostOf } from './proxy.ts';
import { ProxyTunnelError } from './proxy-tunnel.ts';
import type { Scope } from './scope.ts';

export interface ApiRequest {
  readonly verb: string;
  /** Plural resource, with its subresource if any: `pods/status`. */
  readonly resource: string;
  /** API group; '' for core. */
  readonly group?: string;
  readonly namespace?: string;
  readonly name?: string;
}

interface StatusBody {
  readonly reason?: string;
  readonly message?: string;
}

function statusOf(error: unknown): { code?: number; status: StatusBody } {
  const e = error as { code?: unknown; body?: unknown };
  const code = typeof e?.code === 'number' ? e.code : undefined;
  let body: unknown = e?.body;
  if (typeof body === 'string') {
    try {
      body = JSON.parse(body);
    } catch {
      body = undefined;
    }
  }
  const status = body && typeof body === 'object' ? (body as StatusBody) : {};
  return code === undefined ? { status } : { code, status };
}

const NETWORK_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EHOSTUNREACH',
  'ETIMEDOUT',
  'EAI_AGAIN',
]);

/** OpenSSL verification failures whose names do not say CERT. */
const TLS_CODES = new Set(['UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'CERT_HAS_EXPIRED', 'HOSTNAME_MISMATCH']);

function networkCode(error: unknown): string | undefined {
  for (let e: unknown = error; e && typeof e === 'object'; e = (e as { cause?: unknown }).cause) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string') return code;
  }
  return undefined;
}

/**
 * The HTTP status a failed request was answered with, whether the error is the transport's own
 * or already explained (the client explains every failure; the status stays in its details).
 */
export function apiStatus(error: unknown): number | undefined {
  if (error instanceof ConfigSyncError) {
    const status = error.details?.status;
    return typeof status === 'number' ? status : undefined;
  }
  return statusOf(error).code;
}

export function describeRequest(request: ApiRequest): string {
  const group = request.group ? `.${request.group}` : '';
  const name = request.name ? ` "${request.name}"` : '';
  const ns = request.namespace ? ` in namespace "${request.namespace}"` : '';
  return `${request.verb} ${request.resource}${group}${name}${ns}`;
}

function whoFrom(scope: Scope, status: StatusBody): string {
  const fromMessage = status.message?.match(/User "([^"]+)"/)?.[1];
  if (fromMessage) return fromMessage;
  const c = scope.credentials.value;
  return c.tokenFile ? `the token in ${c.tokenFile}` : `kubeconfig user "${c.user ?? '?'}"`;
}

export function explainApiError(error: unknown, request: ApiRequest, scope: Scope): ConfigSyncError {
  if (error instanceof ConfigSyncError) return error;
  const what = describeRequest(request);
  const server = scope.cluster.value.server;
  const { code, status } = statusOf(error);
  const details = {
    verb: request.verb,
    resource: request.resource,
    group: request.group ?? '',
    namespace: request.namespace,
    name: request.name,
    status: code,
  };

  if (code === 403) {
    const who = whoFrom(scope, status);
    const ns = request.namespace;
    // A request of no namespace (a list across all of them, as `status -A` makes; a cluster-scoped
    // resource) is granted by a ClusterRole only: a Role's hint named namespace "".
    const grant =
      ns === undefined
        ? `grant it with a ClusterRole and ClusterRoleBinding bound to ${who} (the request spans every namespace), or ask within one namespace (-n)`
        : `grant it with a Role and RoleBinding in namespace "${ns}" bound to ${who}; a Role in any other ` +
          'namespace does not apply. "config-sync doctor --fix" prints the exact YAML';
    return new ConfigSyncError('CS_API_FORBIDDEN', `${who} may not ${what}`, {
      hint: grant,
      details: { ...details, identity: who },
      cause: status.message,
    });
  }
  if (code === 401) {
    const c = scope.credentials.value;
    const hint = c.tokenFile
      ? `the token in ${c.tokenFile} was rejected: it expired, was revoked (its ServiceAccount or bound Pod was ` +
        "deleted), or was issued for another audience or issuer than this API server's; check the projected " +
        'token volume (audience, expirationSeconds) and that the pod still exists'
      : `the credentials of kubeconfig user "${c.user ?? '?'}" (${scope.credentials.source}) were rejected: ` +
        'refresh them; "kubectl auth whoami" with the same kubeconfig shows the same';
    return new ConfigSyncError(
      'CS_API_UNAUTHORIZED',
      `the API server at ${server} rejected the credentials (401) for ${what}`,
      {
        hint,
        details,
      },
    );
  }
  if (code === 404) {
    return new ConfigSyncError('CS_API_NOT_FOUND', `not found: ${what}`, {
      hint: 'check the name and the namespace (see "config-sync doctor" for where the namespace came from)',
      details,
    });
  }
  if (code !== undefined) {
    const message = status.message ? `: ${status.message}` : '';
    return new ConfigSyncError(
      'CS_API_FAILED',
      `${what} failed with HTTP ${code}${status.reason ? ` ${status.reason}` : ''}${message}`,
      {
        hint: 'retry; if it persists, check the API server',
        details,
      },
    );
  }
  if (error instanceof ProxyTunnelError) {
    const fix = error.proxySource.startsWith('kubeconfig')
      ? `check the proxy, or the ${error.proxySource}`
      : `check the proxy, or add ${hostOf(new URL(server))} to NO_PROXY to go straight to the server, as kubectl would`;
    const through = `the proxy ${error.proxy} (from ${error.proxySource})`;
    const message = `cannot reach the API server at ${server} through ${through} to ${what}: ${error.reason}`;
    return new ConfigSyncError('CS_API_PROXY', message, {
      hint: `the proxy came from ${error.proxySource}; ${fix}`,
      details: { ...details, proxy: error.proxy, proxySource: error.proxySource, network: error.code },
      cause: error,
    });
  }
  const net = networkCode(error);
  if (net === 'ERR_HTTP2_STREAM_RESET') {
    return new ConfigSyncError('CS_API_STREAM_RESET', `${what} failed: ${(error as Error).message}`, {
      hint:
        `a proxy, load balancer or mesh sidecar between config-sync and the API server at ${server} ` +
        'resets a stream this way when it loses its own connection to the server; the agent tries again ' +
        'after a backoff. If it persists, check that hop and the API server behind it',
      details: { ...details, network: net },
      cause: error,
    });
  }
  if (net && NETWORK_CODES.has(net)) {
    return new ConfigSyncError(
      'CS_API_UNREACHABLE',
      `cannot reach the API server at ${server} (${net}) to ${what}`,
      {
        hint: `the server came from ${scope.cluster.source}${scope.proxy ? `, reached through the proxy ${scope.proxy.shown} from ${scope.proxy.source}` : ''}; check that it is right and reachable`,
        details: { ...details, network: net },
        cause: error,
      },
    );
  }
  if (
    net &&
    (net.startsWith('ERR_TLS') || net.startsWith('ERR_SSL') || net.includes('CERT') || TLS_CODES.has(net))
  ) {
    return new ConfigSyncError('CS_API_TLS', `TLS to ${server} failed (${net}) for ${what}`, {
      hint: `the CA comes from ${scope.cluster.source}; it must sign the server's certificate`,
      details: { ...details, network: net },
      cause: error,
    });
  }
  return new ConfigSyncError(
    'CS_API_FAILED',
    `${what} failed: ${(error as Error)?.message ?? String(error)}`,
    {
      details,
      cause: error,
    },
  );
}
