// The HTTP/2 connection the transport keeps to the API server for one TLS identity: every
// request and watch of the process is a stream of it, as client-go's are.
//
// Why: over HTTP/1.1 each watch holds a connection of its own, and the requests go over a pool
// whose sockets the API server closes after 90 s idle, so the reads and the patch of a restart
// after a quiet spell paid new TLS connections first (15.4 ms against 7.3 on average after 100 s
// of quiet, docs/benchmarks.md). One HTTP/2 connection is never idle while the agent watches,
// and it is one connection per Pod on the API server rather than three.
//
// The session, step by step:
//  (1) on first use, a TLS connection offering h2 and http/1.1 (ALPN) with the identity's
//      material, within the connect timeout; through a proxy (proxy.ts), over the tunnel
//      proxy-tunnel.ts opens to the server, so the proxy carries one connection, not one per
//      request, and pings go end to end;
//  (2) the server chose h2: an HTTP/2 session over that socket; it chose HTTP/1.1 (a proxy or
//      load balancer in front of the API server that does not speak h2): the slot answers
//      'http1' from then on and the transport uses its keep-alive pool;
//  (3) each exchange is a stream; the session keeps the process alive only while a stream is
//      open (a CLI command exits when its last request is answered);
//  (4) a session that fails, closes or is told to go away (GOAWAY: the server restarts, or
//      balances its connections) is let go: streams already accepted finish on it, the next
//      exchange opens a new one;
//  (5) a stream given up on (a request with no answer in time) may be the connection's fault,
//      and over HTTP/1.1 that request's socket went with it: here the session is pinged, and
//      one that does not answer within the ping timeout is destroyed, with its streams, so
//      that the next exchange opens a new connection rather than wait on a dead one (client-go
//      pings an idle connection for the same reason). A watch that falls silent asks the same
//      ping first: an answer means the stream is quiet, not cut off (transport.ts keeps it);
//  (6) close(): the identity was replaced (a rotated CA or client certificate); open streams
//      finish, no new ones start;
//  (7) a session has as many streams open as the server allows at once (its SETTINGS'
//      maxConcurrentStreams: 100 for kube-apiserver; 100 assumed until they arrive): the next
//      exchange goes over another session, opened for it, as Go's HTTP/2 transport does. Node
//      queues a stream past the limit until one closes, and a watch never closes: a node agent
//      with 110 watches on one connection had a Secret's list wait 6 minutes. Every exchange
//      takes the oldest session with room, so the others empty and close as their streams end.
import http2 from 'node:http2';
import { isIP } from 'node:net';
import tls from 'node:tls';
import { definedOnly } from './defined-only.ts';
import { type Exchange, http2Exchange, pendingExchange } from './exchange.ts';
import { hostOf, type ProxyRoute, portOf } from './proxy.ts';
import { openTunnel } from './proxy-tunnel.ts';
import type { TlsIdentity } from './transport.ts';

/** How long a session suspected of being dead (5) has to answer a ping; at most the request timeout. */
const PING_TIMEOUT_MS = 5_000;

/** The streams a session takes at once before its server's SETTINGS say (7); kube-apiserver's own. */
const DEFAULT_MAX_STREAMS = 100;

export interface Http2Slot {
  /** An exchange on the session, or over HTTP/1.1 (`http1`) where the server chose that. */
  exchange(method: string, path: string, headers: Record<string, string>, http1: () => Exchange): Exchange;
  /** An HTTP/2 session is open now. */
  speaksHttp2(): boolean;
  close(): void;
}

/** A session new streams can start on: not sent away or closing (closed), not destroyed. */
function isOpen(s: http2.ClientHttp2Session | undefined): s is http2.ClientHttp2Session {
  return s !== undefined && !(s.closed || s.destroyed);
}

export function http2Slot(
  server: URL,
  identity: TlsIdentity,
  connectTimeoutMs: number,
  proxy?: ProxyRoute,
): Http2Slot {
  const host = hostOf(server);
  const port = portOf(server);
  /** A connection being made, if any (one at a time). */
  let connecting: Promise<http2.ClientHttp2Session | 'http1'> | undefined;
  /** The open sessions, oldest first (7). */
  let sessions: http2.ClientHttp2Session[] = [];
  /** Sessions whose server's SETTINGS arrived: their limit is known. */
  const settled = new WeakSet<http2.ClientHttp2Session>();
  /** The server chose HTTP/1.1 (2): every exchange goes over the transport's pool. */
  let overHttp1 = false;
  /** Open streams of each session: a session keeps the process alive only while it has some. */
  const openStreams = new WeakMap<http2.ClientHttp2Session, number>();
  /** The ping out on a session (5), and what it will answer. */
  const pinging = new WeakMap<http2.ClientHttp2Session, Promise<boolean>>();
  const pingTimeoutMs = Math.min(PING_TIMEOUT_MS, connectTimeoutMs);

  // (1), (2)
  async function connect(): Promise<http2.ClientHttp2Session | 'http1'> {
    const tunnel = proxy ? await openTunnel(proxy, host, port, connectTimeoutMs, identity.ca) : undefined;
    return new Promise((resolve, reject) => {
      const socket = tls.connect({
        host,
        port,
        ...(tunnel ? { socket: tunnel } : {}),
        ALPNProtocols: ['h2', 'http/1.1'],
        ...(isIP(host) ? {} : { servername: host }),
        ...definedOnly(identity),
      });
      const timer = setTimeout(
        () =>
          socket.destroy(
            Object.assign(
              new Error(`no TLS connection to ${server.origin} in ${connectTimeoutMs / 1000} s`),
              {
                code: 'ETIMEDOUT',
              },
            ),
          ),
        connectTimeoutMs,
      );
      const onError = (error: Error) => {
        clearTimeout(timer);
        reject(error);
      };
      socket.once('error', onError);
      socket.once('secureConnect', () => {
        clearTimeout(timer);
        socket.off('error', onError);
        if (socket.alpnProtocol !== 'h2') {
          socket.destroy();
          overHttp1 = true;
          resolve('http1');
          return;
        }
        const s = http2.connect(server.origin, { createConnection: () => socket });
        s.unref();
        // (4) Streams hear of a failure themselves; the session only has to be let go.
        const letGo = () => forget(s);
        // Sent away (GOAWAY): Node lets the streams already accepted finish, then closes it.
        s.on('goaway', letGo);
        s.on('error', letGo);
        s.on('close', letGo);
        s.once('remoteSettings', () => settled.add(s));
        sessions.push(s);
        resolve(s);
      });
    });
  }

  function forget(s: http2.ClientHttp2Session): void {
    sessions = sessions.filter((other) => other !== s);
  }

  /** How many streams the session takes at once (7). */
  function maxStreams(s: http2.ClientHttp2Session): number {
    const max = settled.has(s) ? s.remoteSettings.maxConcurrentStreams : undefined;
    return typeof max === 'number' && max > 0 ? max : DEFAULT_MAX_STREAMS;
  }

  /** The oldest open session with room for one more stream (7). */
  function withRoom(): http2.ClientHttp2Session | undefined {
    return sessions.find((s) => isOpen(s) && (openStreams.get(s) ?? 0) < maxStreams(s));
  }

  /** One connection made at a time; a failed one is not kept: the next exchange tries again. */
  function newConnection(): Promise<http2.ClientHttp2Session | 'http1'> {
    if (!connecting) {
      const made = connect();
      connecting = made;
      made.then(
        () => {
          if (connecting === made) connecting = undefined;
        },
        () => {
          if (connecting === made) connecting = undefined;
        },
      );
    }
    return connecting;
  }

  // (3)
  function stream(
    s: http2.ClientHttp2Session,
    method: string,
    path: string,
    headers: Record<string, string>,
  ): Exchange {
    const lower: Record<string, string> = {};
    for (const [name, value] of Object.entries(headers)) lower[name.toLowerCase()] = value;
    const st = s.request({ ':method': method, ':path': path, ...lower }, { endStream: false });
    const open = (openStreams.get(s) ?? 0) + 1;
    openStreams.set(s, open);
    if (open === 1) s.ref();
    return http2Exchange(
      st,
      // Called once, at the stream's close.
      () => {
        const left = (openStreams.get(s) ?? 1) - 1;
        openStreams.set(s, left);
        if (left === 0 && !s.destroyed) s.unref();
      },
      () => probe(s),
      // Sent away (4) or closing: Node answers no ping on it any more.
      () => s.closed,
    );
  }

  // (5) One ping out per session at a time: every stream that asks while it is out shares its
  // answer. `true`: the server answered; `false`: it did not in time, or failed, and the
  // session is destroyed with its streams.
  function probe(s: http2.ClientHttp2Session): Promise<boolean> {
    if (!isOpen(s)) return Promise.resolve(false);
    const out = pinging.get(s);
    if (out) return out;
    const answer = new Promise<boolean>((resolve) => {
      const timer = setTimeout(() => {
        s.destroy(
          Object.assign(
            new Error(
              `the HTTP/2 connection to ${server.origin} answered no ping in ${pingTimeoutMs / 1000} s`,
            ),
            { code: 'ETIMEDOUT' },
          ),
        );
        resolve(false);
      }, pingTimeoutMs);
      timer.unref();
      const sent = s.ping((error) => {
        clearTimeout(timer);
        if (error && !s.destroyed) s.destroy(error);
        resolve(!error);
      });
      if (!sent) {
        clearTimeout(timer);
        resolve(false);
      }
    });
    pinging.set(s, answer);
    void answer.then(() => pinging.delete(s));
    return answer;
  }

  /**
   * The session to use now: one with room, else a new connection (7). Exchanges that wait for
   * the same new connection each take a stream of it as it comes, up to its limit; those past
   * the limit wait for the next.
   */
  async function usable(): Promise<http2.ClientHttp2Session | 'http1'> {
    // A few connections at most: a server that closes each at once must fail the exchange, not
    // keep this loop making connections after the request gave up.
    for (let made = 0; made < 4; made += 1) {
      const s = withRoom();
      if (s) return s;
      if (overHttp1) return 'http1';
      if ((await newConnection()) === 'http1') return 'http1';
    }
    const s = withRoom();
    if (s) return s;
    throw Object.assign(new Error(`no HTTP/2 connection to ${server.origin} with room for a stream`), {
      code: 'ECONNRESET',
    });
  }

  return {
    exchange(method, path, headers, http1) {
      // The usual case, a session with room: its stream at once, not after a promise's turn.
      const s = withRoom();
      if (s) return stream(s, method, path, headers);
      if (overHttp1) return http1();
      return pendingExchange(
        usable().then((u) => (u === 'http1' ? http1() : stream(u, method, path, headers))),
      );
    },
    speaksHttp2: () => sessions.some(isOpen),
    // (6)
    close() {
      const open = sessions;
      sessions = [];
      for (const s of open) s.close();
      connecting?.then(
        (s) => {
          if (s !== 'http1') s.close();
        },
        () => {},
      );
    },
  };
}
