// The HTTP transport to the Kubernetes API: JSON requests and watch streams, over one HTTP/2
// connection per TLS identity (http2-session.ts), as client-go does, or over HTTP/1.1 with a
// keep-alive pool where HTTP/2 is not spoken (an `http:` server, a server or proxy in front of
// it that does not offer h2). Through a proxy (HTTPS_PROXY, a kubeconfig's proxy-url: proxy.ts)
// both go over tunnels to the server (proxy-tunnel.ts).
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
//  (2) pick the connections for that TLS identity, making them on first use; when the identity
//      changes (a rotated CA or client certificate) the old HTTP/2 session closes once its open
//      streams end, and the old pool's idle sockets close. The identity is hashed only when its
//      material is not the very same as the last request's (the in-cluster source hands back
//      the same cached CA string until kubelet rotates it), so a request does not hash the CA
//      each time;
//  (3) send (an exchange, exchange.ts: a stream of the session or an HTTP/1.1 request), count
//      the request by verb, and read the JSON answer; a non-2xx answer becomes an
//      ApiStatusError holding the API's Status, never the raw request or response. A request
//      or watch the server refused unprocessed (NotProcessedError: it went away, GOAWAY, while
//      the request was on its way) is sent again over a new connection, up to four times, the
//      later ones after 0.1, 0.2 and 0.4 s (RESEND_BACKOFF_MS). A 401 answer is
//      told to the connection source (credentialsRefused), so that an exec plugin whose token
//      the API refused runs again for the next request.
//
// A watch is a request whose answer is a stream of events, ended by the server after the
// `timeoutSeconds` asked of it. It may carry nothing for minutes (below), so its silence is
// judged, step by step:
//  (4) silent for `inactivityMs`: on a connection the server sent away (GOAWAY; a read on it
//      may have been the cause, as with --goaway-chance), end the watch cleanly: its caller
//      resumes it from the last version over the next connection, which loses nothing, where
//      a ping would find no answer. Otherwise ask whether the connection under it still
//      answers (an HTTP/2 ping; over HTTP/1.1 nothing but the stream could tell);
//  (5) it answers, and the server's end is still ahead: the stream is quiet, not cut off; keep
//      it, and ask again at the next silence;
//  (6) otherwise the watch failed: no answer (the session is then destroyed with its streams),
//      HTTP/1.1, no end asked for, or silent past the end the server was asked for.
// Why a quiet watch must be kept: the API server's watch cache sends bookmarks only once a
// newer resourceVersion exists (k8s.io/apiserver's cacheWatcher), so in a cluster where no
// ConfigMap changed a healthy watch carries nothing until its end.
import { createHash } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import type { Duplex, Readable } from 'node:stream';
import tls from 'node:tls';
import { definedOnly } from './defined-only.ts';
import { type Exchange, http1Exchange, NotProcessedError } from './exchange.ts';
import { type Http2Slot, http2Slot } from './http2-session.ts';
import { ndjsonLines } from './ndjson-lines.ts';
import { hostOf, type ProxyRoute, portOf } from './proxy.ts';
import { openTunnel } from './proxy-tunnel.ts';

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
  /**
   * The API answered 401 to a request sent with this connection's credentials: a source that
   * can get new ones (an exec plugin) gets them for the next request.
   */
  readonly credentialsRefused?: (() => void) | undefined;
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
  /** Silence this long is judged (4-6): a quiet stream is kept, a cut one fails. */
  readonly inactivityMs: number;
}

export interface WatchEvent {
  readonly type: string;
  readonly object: unknown;
}

/** The pause before each resend of a request the server refused unprocessed (resendingUnprocessed). */
const RESEND_BACKOFF_MS = [0, 100, 200, 400] as const;

/**
 * How much longer than the request timeout getting a connection may take before the request
 * fails: the TLS handshake and a proxy's tunnel fail at the request timeout with their own
 * errors, which say more than "no connection".
 */
const OPEN_GRACE_MS = 1_000;

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
  /** The proxy every connection goes through (the scope's: proxy.ts), if any. */
  readonly proxy?: ProxyRoute | undefined;
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
  /**
   * Whether a watch that carries nothing is kept open (4-6): true while the connection to the
   * API server is HTTP/2, where a ping tells a quiet stream from a dead connection. Where it is
   * false a watch should ask the server to end it before its `inactivityMs`.
   */
  keepsQuietWatches(): boolean;
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
  /**
   * The connections of the identity last picked (server and TLS material as given): its HTTP/2
   * session (http2-session.ts), and the keep-alive pool for HTTP/1.1, used where the server did
   * not choose h2 and for `http:` servers.
   */
  let pool: { key: string; agent: http.Agent; slot?: Http2Slot; server: URL; tls: TlsIdentity } | undefined;

  // (2) The same server object and the same material as the pool was last picked for (by
  // reference for Buffers; strings the source cached compare at once) is the same identity,
  // without hashing it again.
  function poolFor(connection: Connection): NonNullable<typeof pool> {
    const { server, tls } = connection;
    const last = pool;
    if (last?.server === server && TLS_FIELDS.every((field) => last.tls[field] === tls[field])) return last;
    const key = identityKey(server, tls);
    if (last?.key === key) {
      pool = { ...last, server, tls };
      return pool;
    }
    const agent = keepAliveAgent(server, tls, settings.proxy, timeoutMs);
    const slot = server.protocol === 'https:' ? http2Slot(server, tls, timeoutMs, settings.proxy) : undefined;
    pool = { key, agent, server, tls, ...(slot ? { slot } : {}) };
    if (last) {
      retire(last.agent);
      last.slot?.close();
    }
    return pool;
  }

  async function open(method: string, path: string, headers: Record<string, string>): Promise<Exchange> {
    // (1)
    const connection = await source();
    const verb = verbOf(method, path);
    requests[verb] = (requests[verb] ?? 0) + 1;
    const fullPath = `${connection.server.pathname.replace(/\/$/, '')}${path}`;
    const allHeaders = {
      accept: 'application/json',
      'user-agent': 'config-sync',
      ...connection.headers,
      ...headers,
    };
    const overHttp1 = (agent: http.Agent) => {
      const send = connection.server.protocol === 'http:' ? http.request : https.request;
      return http1Exchange(
        send({
          protocol: connection.server.protocol,
          hostname: hostOf(connection.server),
          port: portOf(connection.server),
          path: fullPath,
          method,
          agent,
          headers: allHeaders,
        }),
      );
    };
    const carry = (): Exchange => {
      const { agent, slot } = poolFor(connection);
      if (!slot) return overHttp1(agent);
      return slot.exchange(method, fullPath, allHeaders, () => overHttp1(agent));
    };
    const exchange = carry();
    const refused = connection.credentialsRefused;
    if (refused) exchange.onResponse((status) => status === 401 && refused());
    return exchange;
  }

  /** The error of a request or a watch's head that did not come in time. */
  const timedOut = (what: string) =>
    Object.assign(new Error(`${what}: no answer in ${timeoutMs / 1000} s`), { code: 'ETIMEDOUT' });

  async function requestOnce<T>(options: RequestOptions): Promise<T> {
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
    // (3) Every request ends: answered, failed, or at its deadline. The deadline settles the
    // request itself rather than wait for the exchange to report its own destruction (a stream
    // that already closed says nothing more). Getting the connection has a deadline of its own
    // (an exec credential plugin that hangs), a little past the TLS and tunnel timeouts so that
    // their more telling errors come first.
    return new Promise<T>((resolve, reject) => {
      let exchange: Exchange | undefined;
      let settled = false;
      const settle = (outcome: () => void) => {
        if (settled) return;
        settled = true;
        clearTimeout(deadline);
        stopping?.removeEventListener('abort', onStop);
        outcome();
      };
      const giveUp = (error: Error) => {
        settle(() => reject(error));
        exchange?.destroy(error);
      };
      let deadline = setTimeout(
        () => giveUp(timedOut(`${method} ${options.path}: no connection to the API server`)),
        timeoutMs + OPEN_GRACE_MS,
      );
      const onStop = () => giveUp(new TransportStoppedError(method, options.path));
      stopping?.addEventListener('abort', onStop, { once: true });
      open(method, path, headers).then(
        (opened) => {
          // Given up on while the connection was being had: nothing to say to it but goodbye.
          if (settled) return opened.destroy();
          exchange = opened;
          // One deadline for the whole answer, not an idle timer: a server that trickles bytes,
          // or accepts the connection and never answers, fails as surely as a silent one.
          clearTimeout(deadline);
          deadline = setTimeout(() => giveUp(timedOut(`${method} ${options.path}`)), timeoutMs);
          opened.onError((error) => settle(() => reject(error)));
          opened.onResponse((status, response) => {
            readBody(response).then(
              (text) =>
                settle(() => {
                  const body = parseJson(text);
                  if (status < 200 || status >= 300)
                    reject(new ApiStatusError(status, body, method, options.path));
                  // An answer cut short can still end cleanly (an HTTP/2 stream reset with NO_ERROR
                  // reads as its end in Node): a body that is not whole JSON is a failed request.
                  else if (text && body === undefined)
                    reject(new Error(`${method} ${options.path}: the answer is not whole JSON (cut short?)`));
                  else resolve(body as T);
                }),
              (error) => settle(() => reject(error)),
            );
          });
          opened.end(payload);
        },
        (error: Error) => settle(() => reject(error)),
      );
    });
  }

  async function watchOnce(options: WatchOptions, onEvent: (event: WatchEvent) => void): Promise<void> {
    if (options.signal.aborted || stopping?.aborted) return;
    const path = withQuery(options.path, { ...options.query, watch: true });
    const asked = Number(options.query?.timeoutSeconds);
    const serverEndsAt = performance.now() + (asked > 0 ? asked * 1000 : 0);
    return new Promise<void>((resolve, reject) => {
      let exchange: Exchange | undefined;
      let settled = false;
      const finish = (error?: unknown) => {
        if (settled) return;
        settled = true;
        clearTimeout(headDeadline);
        options.signal.removeEventListener('abort', onAbort);
        stopping?.removeEventListener('abort', onAbort);
        if (error) reject(error);
        else resolve();
      };
      const onAbort = () => {
        exchange?.destroy();
        finish();
      };
      options.signal.addEventListener('abort', onAbort, { once: true });
      stopping?.addEventListener('abort', onAbort, { once: true });
      // The API server sends a watch's head at once (before any event), so one that has not
      // come within the request timeout is not coming: the watch fails, to be resumed. Without
      // this, a watch whose stream hung before its head (or whose connection could not be had)
      // waited for ever, since its silence timer starts only on the stream.
      const headDeadline = setTimeout(() => {
        const error = timedOut(`watch ${options.path}`);
        exchange?.destroy(error);
        finish(error);
      }, timeoutMs + OPEN_GRACE_MS);
      // (4) The idle timer restarts with every byte, so this fires only on real silence.
      const onSilent = () => {
        const silent = exchange as Exchange;
        if (silent.connectionLeaving()) {
          silent.destroy();
          finish();
          return;
        }
        void silent.connectionAnswers().then((answered) => {
          if (settled) return;
          const endAhead = performance.now() < serverEndsAt;
          // (5)
          if (answered && endAhead) {
            silent.onSilence(options.inactivityMs, onSilent);
            return;
          }
          // (6)
          silent.destroy(
            new Error(
              `watch ${options.path}: silent for ${options.inactivityMs / 1000} s${answered ? ', past the end the server was asked for' : ''}`,
            ),
          );
        });
      };
      open('GET', path, {}).then(
        (opened) => {
          if (settled) return opened.destroy();
          exchange = opened;
          opened.onSilence(options.inactivityMs, onSilent);
          // A connection that broke, or a stream that ended short of its end.
          opened.onError((error) => finish(error));
          opened.onResponse((status, response) => {
            clearTimeout(headDeadline);
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
                opened.destroy();
                finish(new Error(`watch ${options.path}: an event that is not JSON`));
                return;
              }
              onEvent(event);
            });
            response.on('data', feed);
            response.on('end', () => finish());
            response.on('error', (error) => finish(error));
          });
          opened.end();
        },
        (error: Error) => finish(error),
      );
    });
  }

  /**
   * Sends again a request the server never processed (NotProcessedError: its HTTP/2 stream was
   * refused as the server went away), over the connection that replaces the one sent away, as
   * client-go does. The new connection can be sent away in turn before it gets to the request
   * (kube-apiserver's --goaway-chance picks any response to do it: 2 of 1500 reads failed so in
   * a CI run of test/integration/goaway.test.ts), so up to RESEND_BACKOFF_MS.length times: the
   * first at once, the later ones after a growing pause, as Go's HTTP/2 transport backs off (it
   * waits 1, 2, 4 s ...; these stay well inside a request timeout). A server that refuses every
   * stream is not merely going away, and its refusal is the error.
   */
  async function resendingUnprocessed<T>(send: () => Promise<T>): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return await send();
      } catch (error) {
        const pause = RESEND_BACKOFF_MS[attempt];
        if (!(error instanceof NotProcessedError) || pause === undefined || stopping?.aborted) throw error;
        if (pause > 0) await new Promise((resolve) => setTimeout(resolve, pause));
      }
    }
  }

  return {
    requests,
    request: <T>(options: RequestOptions) => resendingUnprocessed(() => requestOnce<T>(options)),
    watch: (options, onEvent) => resendingUnprocessed(() => watchOnce(options, onEvent)),
    keepsQuietWatches: () => pool?.slot?.speaksHttp2() ?? false,
  };
}

/**
 * The HTTP/1.1 keep-alive pool for a server and identity; through a proxy, each of its sockets
 * is a tunnel to the server (with TLS over it for an https server), opened within the request
 * timeout. Node's Agent takes a socket made later through createConnection's callback.
 */
function keepAliveAgent(
  server: URL,
  identity: TlsIdentity,
  proxy: ProxyRoute | undefined,
  timeoutMs: number,
) {
  const options = { keepAlive: true, keepAliveMsecs: 30_000 };
  const secure = server.protocol !== 'http:';
  const agent = secure ? new https.Agent({ ...options, ...definedOnly(identity) }) : new http.Agent(options);
  if (!proxy) return agent;
  type Created = (error: Error | null, socket?: Duplex) => void;
  Object.assign(agent, {
    createConnection(connectOptions: tls.ConnectionOptions, created: Created): undefined {
      openTunnel(proxy, hostOf(server), portOf(server), timeoutMs, identity.ca).then(
        (tunnel) => created(null, secure ? tls.connect({ ...connectOptions, socket: tunnel }) : tunnel),
        (error: Error) => created(error),
      );
      return undefined;
    },
  });
  return agent;
}

/**
 * A replaced pool: its idle sockets close now, and its busy ones (a watch still streaming) close
 * when they finish instead of going back to the pool.
 */
function retire(agent: http.Agent): void {
  (agent as { keepAlive?: boolean }).keepAlive = false;
  for (const sockets of Object.values(agent.freeSockets)) for (const s of sockets ?? []) s.destroy();
}

function readBody(response: Readable): Promise<string> {
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
