// A fault-injecting HTTPS proxy between one agent and the test API server, on 127.0.0.1: the
// network between them, under the test's control. It terminates TLS with the API server's own
// serving certificate (so the agent's CA bundle trusts it and nothing about the agent changes
// but KUBERNETES_SERVICE_PORT), speaks HTTP/2 as the API server does (and HTTP/1.1 to a client
// that asks for it), and forwards every request, Authorization header included, over a TLS
// connection of its own to the real API server.
//
// Faults:
//  - stall(): a partition that drops packets. Open streams stop delivering (nothing is lost:
//    the bytes wait, as TCP retransmits them), new requests wait unanswered. resume() ends it.
//  - cut(): a partition that resets, or an API server that died: every open connection is
//    destroyed, new ones are reset at once until resume().
//  - stallWatches(): only the open watch streams stop delivering, as when a watch connection
//    hangs half-open while new connections work.
//  - stallRequests(): new requests other than watches wait unanswered while the open watches
//    keep delivering, as when one read is lost in an overloaded API server or network.
//    resume() ends it.
//  - answerGone(n): the next n watch requests are answered with a 410 Gone watch event, as an
//    API server answers a resourceVersion that left its watch cache (after a restart, say).
//  - endWatches(): the open watch streams end cleanly, as the server ends them at timeoutSeconds.
//  - resetNext(rule): the next requests the rule matches (a verb, a path) get their HTTP/2 stream
//    reset with the rule's code before any answer, as an L7 hop resets a stream when its own
//    connection upstream dies: NO_ERROR (what Node's own http2 server sends when the response
//    is destroyed without an error), CANCEL, INTERNAL_ERROR.
//  - refuseUpstream(): the API server behind the proxy refuses connections (it died, or is
//    restarting): the proxy, as a Node HTTP/2 proxy does, destroys each response whose upstream
//    request failed, which resets its stream with NO_ERROR, before any answer for a new request
//    and mid-body for an open watch. resume() ends it.
// Every request is counted by verb, with when it arrived, so a test can see a relist happen.
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net, { type AddressInfo, type Socket } from 'node:net';
import path from 'node:path';
import { verbOf } from '../../src/kube/transport.ts';
import type { ControlPlaneInfo } from './control-plane.ts';

export interface ProxiedRequest {
  readonly verb: string;
  readonly path: string;
  readonly at: number;
  /** The HTTP version the client spoke: `2.0` as to the API server, `1.1` where it fell back. */
  readonly http: string;
  /** Answered with a forced 410 Gone (answerGone). */
  gone?: boolean;
  /** Its stream reset before any answer, with this HTTP/2 code (resetNext, refuseUpstream). */
  reset?: number;
}

/** Which requests resetNext resets, and how. */
export interface ResetRule {
  /** The verb as verbOf names it: get, list, watch, patch, create. */
  readonly verb: string;
  /** Only requests whose path (with its query) matches. */
  readonly path?: RegExp;
  /** The HTTP/2 error code of the reset (http2.constants.NGHTTP2_*). */
  readonly code: number;
  /** How many requests to reset; 1 by default. */
  readonly count?: number;
}

type Mode = 'pass' | 'stall' | 'stall-requests' | 'cut';

export class ApiProxy {
  readonly requests: ProxiedRequest[] = [];
  private mode: Mode = 'pass';
  private goneLeft = 0;
  private readonly resets: { rule: ResetRule; left: number }[] = [];
  private upstreamRefused = false;
  private readonly sockets = new Set<Socket>();
  private readonly held: (() => void)[] = [];
  private readonly streams = new Set<{
    pause(): void;
    resume(): void;
    end(): void;
    watch: boolean;
  }>();

  private readonly server: http2.Http2SecureServer;
  readonly port: number;
  /** A loopback port nothing listens on (refuseUpstream). */
  private readonly refusedPort: number;

  /** The proxy's connections to the API server. */
  private readonly upstream: https.Agent;

  private constructor(
    server: http2.Http2SecureServer,
    port: number,
    refusedPort: number,
    upstream: https.Agent,
  ) {
    this.server = server;
    this.port = port;
    this.refusedPort = refusedPort;
    this.upstream = upstream;
  }

  static async start(info: ControlPlaneInfo): Promise<ApiProxy> {
    const certDir = path.join(info.dataDir, 'apiserver-certs');
    const server = http2.createSecureServer({
      cert: fs.readFileSync(path.join(certDir, 'apiserver.crt')),
      key: fs.readFileSync(path.join(certDir, 'apiserver.key')),
      allowHTTP1: true,
    });
    const upstream = new https.Agent({ keepAlive: true, ca: info.caPem });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const proxy = new ApiProxy(server, (server.address() as AddressInfo).port, await closedPort(), upstream);
    server.on('secureConnection', (socket: Socket) => {
      if (proxy.mode === 'cut') {
        socket.destroy();
        return;
      }
      proxy.sockets.add(socket);
      socket.once('close', () => proxy.sockets.delete(socket));
    });
    server.on('request', (req, res) => {
      const verb = verbOf(req.method, req.url);
      const record: ProxiedRequest = { verb, path: req.url ?? '', at: Date.now(), http: req.httpVersion };
      proxy.requests.push(record);
      const forward = () => {
        if (proxy.mode === 'cut') {
          req.socket.destroy();
          return;
        }
        const reset = proxy.resets.find(
          (r) => r.left > 0 && r.rule.verb === verb && (r.rule.path?.test(record.path) ?? true),
        );
        if (reset && req.httpVersion === '2.0') {
          reset.left -= 1;
          record.reset = reset.rule.code;
          req.resume();
          res.stream.close(reset.rule.code);
          return;
        }
        if (verb === 'watch' && proxy.goneLeft > 0) {
          proxy.goneLeft -= 1;
          record.gone = true;
          res.writeHead(200, { 'content-type': 'application/json' });
          res.end(
            `${JSON.stringify({
              type: 'ERROR',
              object: {
                kind: 'Status',
                apiVersion: 'v1',
                status: 'Failure',
                message: 'too old resource version (forced by the test proxy)',
                reason: 'Expired',
                code: 410,
              },
            })}\n`,
          );
          return;
        }
        const out = https.request({
          host: info.host,
          // A refused upstream: a port of this machine nothing listens on (the proxy's own
          // listener was closed on it, below), as when the API server behind a hop is down.
          port: proxy.upstreamRefused ? proxy.refusedPort : info.port,
          method: req.method,
          path: req.url,
          headers: { ...hopByHopless(req.headers), host: `${info.host}:${info.port}` },
          agent: upstream,
        });
        // What a Node HTTP/2 proxy does when its upstream request fails: the response destroyed
        // without an error, which resets the client's stream with NO_ERROR.
        out.on('error', () => {
          if (!res.headersSent) record.reset = http2.constants.NGHTTP2_NO_ERROR;
          res.destroy();
        });
        res.on('close', () => out.destroy());
        out.on('response', (answer) => {
          // An upstream connection that died mid-answer (a watch, when the API server goes
          // away): the response is destroyed as for a failed request, resetting the stream.
          answer.on('close', () => {
            if (!answer.complete) res.destroy();
          });
          res.writeHead(answer.statusCode ?? 502, hopByHopless(answer.headers));
          // pipe() resumes its source whenever the destination drains, so a pause that must
          // hold takes the pipe apart; the bytes wait in the upstream response until resume.
          const stream = {
            watch: verb === 'watch',
            pause: () => {
              answer.unpipe(res);
              answer.pause();
            },
            resume: () => {
              answer.pipe(res);
              answer.resume();
            },
            end: () => {
              answer.destroy();
              res.end();
            },
          };
          proxy.streams.add(stream);
          res.on('close', () => proxy.streams.delete(stream));
          if (proxy.mode === 'stall') answer.pause();
          else answer.pipe(res);
        });
        req.pipe(out);
      };
      if (proxy.mode === 'stall' || (proxy.mode === 'stall-requests' && verb !== 'watch'))
        proxy.held.push(forward);
      else forward();
    });
    return proxy;
  }

  /** Environment that points an in-cluster agent at this proxy instead of the API server. */
  get env(): { KUBERNETES_SERVICE_HOST: string; KUBERNETES_SERVICE_PORT: string } {
    return { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(this.port) };
  }

  stall(): void {
    this.mode = 'stall';
    for (const s of this.streams) s.pause();
  }

  /** New requests other than watches wait unanswered; watches keep delivering. resume() ends it. */
  stallRequests(): void {
    this.mode = 'stall-requests';
  }

  /** Only the open watch streams stop delivering; every other request passes. resume() ends it. */
  stallWatches(): void {
    for (const s of this.streams) if (s.watch) s.pause();
  }

  cut(): void {
    this.mode = 'cut';
    this.held.splice(0);
    for (const socket of this.sockets) socket.destroy();
  }

  resume(): void {
    this.mode = 'pass';
    this.upstreamRefused = false;
    for (const s of this.streams) s.resume();
    for (const forward of this.held.splice(0)) forward();
  }

  answerGone(count = 1): void {
    this.goneLeft = count;
  }

  /** The next requests `rule` matches get their stream reset before any answer. */
  resetNext(rule: ResetRule): void {
    this.resets.push({ rule, left: rule.count ?? 1 });
  }

  /** Requests reset so far (by resetNext, or by a refused upstream before their answer). */
  resetRequests(verb?: string): ProxiedRequest[] {
    return this.requests.filter((r) => r.reset !== undefined && (verb === undefined || r.verb === verb));
  }

  /**
   * The API server behind the proxy refuses connections: open streams are reset (their upstream
   * connections destroyed) and new ones are reset before any answer, until resume().
   */
  refuseUpstream(): void {
    this.upstreamRefused = true;
    this.upstream.destroy();
  }

  endWatches(): void {
    for (const s of this.streams) if (s.watch) s.end();
  }

  /**
   * Requests a stall keeps from their answer: those held before forwarding, and those whose
   * answer was under way (a request, not a watch) when the stall began.
   */
  get pending(): number {
    return this.held.length + [...this.streams].filter((s) => !s.watch).length;
  }

  /** Requests of one verb that arrived after `since` (ms since the epoch). */
  count(verb: string, since = 0): number {
    return this.requests.filter((r) => r.verb === verb && r.at >= since).length;
  }

  async stop(): Promise<void> {
    this.cut();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** A loopback port that was free a moment ago and has no listener now. */
async function closedPort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  return port;
}

/**
 * Headers without HTTP/2's pseudo-headers and HTTP/1.1's connection-level ones, which neither
 * side's framing takes from the other.
 */
function hopByHopless(
  headers: Record<string, string | string[] | undefined>,
): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers))
    if (value !== undefined && !name.startsWith(':') && !HOP_BY_HOP.has(name.toLowerCase()))
      out[name] = value;
  return out;
}

const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'host',
]);
