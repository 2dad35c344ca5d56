// The HTTP transport to the Kubernetes API, on node:https: JSON requests and watch streams over
// one keep-alive connection pool per TLS identity.
//
// Why not client-node's transport: it is undici plus every generated model, which ObjectSerializer
// keeps alive, and together they cost more resident memory than the whole rest of the agent
// (docs/benchmarks.md). A sidecar in every Pod needs a handful of verbs on six resources, so the
// transport is this file and the wire format is the API's own JSON. client-node still supplies
// the object types, and reads kubeconfigs and runs their authentication (exec plugins, OIDC,
// client certificates) when the agent runs outside a cluster (kubeconfig-connection.ts).
//
// A request, step by step:
//  (1) ask the ConnectionSource for the server, headers and TLS identity (the in-cluster source
//      re-reads a rotated token or CA here; a kubeconfig source may run an exec plugin);
//  (2) pick the pool for that TLS identity, making it on first use; when the identity changes
//      (a rotated CA or client certificate) the old pool's idle sockets are closed. The identity
//      is hashed only when its material is not the very same as the last request's (the
//      in-cluster source hands back the same cached CA string until kubelet rotates it), so a
//      request does not hash the CA each time;
//  (3) send, count the request by verb, and read the JSON answer; a non-2xx answer becomes an
//      ApiStatusError holding the API's Status, never the raw request or response.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { definedOnly } from './defined-only.ts';
import { ndjsonLines } from './ndjson-lines.ts';

/** TLS material of one identity; Buffers or PEM strings as node:tls takes them. */
export interface TlsIdentity {
  readonly ca?: string | Buffer | undefined;
  readonly cert?: string | Buffer | undefined;
  readonly key?: string | Buffer | undefined;
  readonly pfx?: string | Buffer | undefined;
  readonly passphrase?: string | undefined;
  readonly rejectUnauthorized?: boolean | undefined;
  readonly servername?: string | undefined;
}

/** Where and as whom one request goes. */
export interface Connection {
  readonly server: URL;
  /** Authorization and impersonation headers. */
  readonly headers: Readonly<Record<string, string>>;
  readonly tls: TlsIdentity;
  /** A kubeconfig cluster's proxy (`proxy-url`): the agent client-node made for it, used as is. */
  readonly proxyAgent?: http.Agent | undefined;
}

export type ConnectionSource = () => Promise<Connection>;

/** A non-2xx answer. `body` is the API's Status object (reason, message, code), when it sent one. */
export class ApiStatusError extends Error {
  readonly code: number;
  readonly body: unknown;
  constructor(code: number, body: unknown, method: string, path: string) {
    // Path without the query: a field selector names an object, never a value, but keep it short.
    super(`${method} ${path.split('?')[0]} answered HTTP ${code}`);
    this.name = 'ApiStatusError';
    this.code = code;
    this.body = body;
  }
}

export type Query = Readonly<Record<string, string | number | boolean | undefined>>;

export interface RequestOptions {
  readonly method?: 'GET' | 'POST' | 'PATCH' | 'PUT' | 'DELETE';
  readonly path: string;
  readonly query?: Query;
  readonly body?: unknown;
  /** Content-Type of the body; PATCH needs a patch type. */
  readonly contentType?: string;
}

export interface WatchOptions {
  readonly path: string;
  readonly query?: Query;
  readonly signal: AbortSignal;
  /** Abort a stream silent for this long; bookmarks arrive about once a minute. */
  readonly inactivityMs: number;
}

export interface WatchEvent {
  readonly type: string;
  readonly object: unknown;
}

/** Non-watch requests that take longer than this fail (the API answers in milliseconds). */
export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

export interface TransportOptions {
  /** How long a non-watch request may wait for its whole answer (`--request-timeout`). */
  readonly requestTimeoutMs?: number;
  /**
   * The process is stopping: requests in flight are aborted (watches end cleanly) and new ones
   * fail at once, so a SIGTERM never waits on a stalled API server.
   */
  readonly signal?: AbortSignal;
}

/** A request refused or cut short because the process is stopping. */
export class TransportStoppedError extends Error {
  readonly code = 'ECANCELED';
  constructor(method: string, path: string) {
    super(`${method} ${path.split('?')[0]}: cancelled, the process is stopping`);
    this.name = 'TransportStoppedError';
  }
}

export interface Transport {
  /** Requests sent, by verb (`get`, `list`, `watch`, `patch`, `create`, ...). */
  readonly requests: Readonly<Record<string, number>>;
  request<T>(options: RequestOptions): Promise<T>;
  /**
   * One watch stream: `onEvent` for every event; resolves when the server ends the stream or
   * `signal` aborts it, rejects on a non-200 answer, a broken stream or silence.
   */
  watch(options: WatchOptions, onEvent: (event: WatchEvent) => void): Promise<void>;
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

export function withQuery(path: string, query: Query | undefined): string {
  const params = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) params.set(k, String(v));
  const s = params.toString();
  return s ? `${path}?${s}` : path;
}

const TLS_FIELDS = [
  'ca',
  'cert',
  'key',
  'pfx',
  'passphrase',
  'rejectUnauthorized',
  'servername',
] as const satisfies readonly (keyof TlsIdentity)[];

function identityKey(server: URL, tls: TlsIdentity): string {
  const hash = createHash('sha256');
  hash.update(server.origin);
  for (const field of TLS_FIELDS) {
    hash.update(`\0${field}=`);
    const value = tls[field];
    if (value !== undefined) hash.update(Buffer.isBuffer(value) ? value : String(value));
  }
  return hash.digest('hex');
}

export function createTransport(source: ConnectionSource, settings: TransportOptions = {}): Transport {
  const timeoutMs = settings.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const stopping = settings.signal;
  const requests: Record<string, number> = {};
  /** The pool, with the identity it was last picked for (server and TLS material as given). */
  let pool: { key: string; agent: http.Agent; server: URL; tls: TlsIdentity } | undefined;

  // (2) The same server object and the same material as the pool was last picked for (by
  // reference for Buffers; strings the source cached compare at once) is the same identity,
  // without hashing it again.
  function agentFor(connection: Connection): http.Agent {
    if (connection.proxyAgent) return connection.proxyAgent;
    const { server, tls } = connection;
    const last = pool;
    if (last?.server === server && TLS_FIELDS.every((field) => last.tls[field] === tls[field]))
      return last.agent;
    const key = identityKey(server, tls);
    if (last?.key === key) {
      pool = { ...last, server, tls };
      return last.agent;
    }
    const agent =
      server.protocol === 'http:'
        ? new http.Agent({ keepAlive: true, keepAliveMsecs: 30_000 })
        : new https.Agent({ keepAlive: true, keepAliveMsecs: 30_000, ...definedOnly(tls) });
    pool = { key, agent, server, tls };
    if (last) retire(last.agent);
    return agent;
  }

  async function open(
    method: string,
    path: string,
    headers: Record<string, string>,
  ): Promise<http.ClientRequest> {
    // (1)
    const connection = await source();
    const agent = agentFor(connection);
    const base = connection.server.pathname.replace(/\/$/, '');
    const send = connection.server.protocol === 'http:' ? http.request : https.request;
    const verb = verbOf(method, path);
    requests[verb] = (requests[verb] ?? 0) + 1;
    return send({
      protocol: connection.server.protocol,
      hostname: connection.server.hostname.replace(/^\[|\]$/g, ''),
      port: connection.server.port || (connection.server.protocol === 'http:' ? 80 : 443),
      path: `${base}${path}`,
      method,
      agent,
      headers: { accept: 'application/json', 'user-agent': 'config-sync', ...connection.headers, ...headers },
      ...(connection.proxyAgent ? definedOnly(connection.tls) : {}),
    });
  }

  return {
    requests,

    async request<T>(options: RequestOptions): Promise<T> {
      const method = options.method ?? 'GET';
      const path = withQuery(options.path, options.query);
      const payload = options.body === undefined ? undefined : Buffer.from(JSON.stringify(options.body));
      const headers: Record<string, string> = payload
        ? {
            'content-type': options.contentType ?? 'application/json',
            'content-length': String(payload.length),
          }
        : {};
      if (stopping?.aborted) throw new TransportStoppedError(method, options.path);
      const request = await open(method, path, headers);
      // (3)
      return new Promise<T>((resolve, reject) => {
        // One deadline for the whole answer, not an idle timer: a server that trickles bytes,
        // or accepts the connection and never answers, fails as surely as a silent one.
        const deadline = setTimeout(
          () =>
            request.destroy(
              Object.assign(new Error(`${method} ${options.path}: no answer in ${timeoutMs / 1000} s`), {
                code: 'ETIMEDOUT',
              }),
            ),
          timeoutMs,
        );
        const onStop = () => request.destroy(new TransportStoppedError(method, options.path));
        stopping?.addEventListener('abort', onStop, { once: true });
        const settle = () => {
          clearTimeout(deadline);
          stopping?.removeEventListener('abort', onStop);
        };
        request.on('error', (error) => {
          settle();
          reject(error);
        });
        request.on('response', (response) => {
          readBody(response).then(
            (text) => {
              settle();
              const body = parseJson(text);
              const status = response.statusCode ?? 0;
              if (status >= 200 && status < 300) resolve(body as T);
              else reject(new ApiStatusError(status, body, method, options.path));
            },
            (error) => {
              settle();
              reject(error);
            },
          );
        });
        request.end(payload);
      });
    },

    async watch(options: WatchOptions, onEvent: (event: WatchEvent) => void): Promise<void> {
      if (options.signal.aborted || stopping?.aborted) return;
      const path = withQuery(options.path, { ...options.query, watch: true });
      const request = await open('GET', path, {});
      return new Promise<void>((resolve, reject) => {
        let settled = false;
        const finish = (error?: unknown) => {
          if (settled) return;
          settled = true;
          options.signal.removeEventListener('abort', onAbort);
          stopping?.removeEventListener('abort', onAbort);
          if (error) reject(error);
          else resolve();
        };
        const onAbort = () => {
          request.destroy();
          finish();
        };
        options.signal.addEventListener('abort', onAbort, { once: true });
        stopping?.addEventListener('abort', onAbort, { once: true });
        // The socket's idle timer restarts with every byte, so this fires only on real silence.
        request.setTimeout(options.inactivityMs, () =>
          request.destroy(new Error(`watch ${options.path}: silent for ${options.inactivityMs / 1000} s`)),
        );
        request.on('error', (error) => finish(error));
        request.on('response', (response) => {
          const status = response.statusCode ?? 0;
          if (status !== 200) {
            readBody(response).then(
              (text) => finish(new ApiStatusError(status, parseJson(text), 'GET', options.path)),
              finish,
            );
            return;
          }
          // Newline-delimited JSON: one event per line, split across chunks as it comes.
          response.setEncoding('utf8');
          const feed = ndjsonLines((line) => {
            if (settled) return;
            let event: WatchEvent;
            try {
              event = JSON.parse(line) as WatchEvent;
            } catch {
              request.destroy();
              finish(new Error(`watch ${options.path}: an event that is not JSON`));
              return;
            }
            onEvent(event);
          });
          response.on('data', feed);
          response.on('end', () => finish());
          response.on('error', (error) => finish(error));
          response.on('aborted', () => finish(new Error(`watch ${options.path}: stream aborted`)));
        });
        request.end();
      });
    },
  };
}

/**
 * A replaced pool: its idle sockets close now, and its busy ones (a watch still streaming) close
 * when they finish instead of going back to the pool.
 */
function retire(agent: http.Agent): void {
  (agent as { keepAlive?: boolean }).keepAlive = false;
  for (const sockets of Object.values(agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
}

function readBody(response: http.IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    response.on('data', (c: Buffer) => chunks.push(c));
    response.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    response.on('error', reject);
  });
}

function parseJson(text: string): unknown {
  if (!text) return undefined;
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}
