// The transport over HTTP/2 (src/kube/http2-session.ts, src/kube/exchange.ts), against local TLS
// servers of the test's own: one connection carries every request and watch; a server that
// does not offer h2 is spoken to over HTTP/1.1; a stream reset is a failed watch, never a clean
// end; a session the server sends away is replaced; and nothing waits forever. The real API
// server's side (its h2 settings, its 90 s idle close) is in the integration tests, which all
// run over this transport.
import { spawn } from 'node:child_process';
import dc from 'node:diagnostics_channel';
import fs from 'node:fs';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ApiStatusError, type Connection, createTransport } from '../../src/kube/transport.ts';
import { selfSignedCertificate } from '../cluster/self-signed.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';

let pem: { cert: string; key: string };
beforeAll(() => {
  const dir = tempDir('transport-h2-');
  const files = { cert: path.join(dir, 'cert.pem'), key: path.join(dir, 'key.pem') };
  selfSignedCertificate(files, 'localhost', 'IP:127.0.0.1');
  pem = { cert: fs.readFileSync(files.cert, 'utf8'), key: fs.readFileSync(files.key, 'utf8') };
});

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

type Handler = (request: http2.Http2ServerRequest, response: http2.Http2ServerResponse) => void;

interface Served {
  readonly connection: Connection;
  /** TLS connections accepted so far. */
  readonly connections: () => number;
  /** The HTTP versions requests came in. */
  readonly versions: string[];
  readonly sessions: http2.ServerHttp2Session[];
}

/** A TLS server on loopback: HTTP/2 only (`h2`), or HTTP/1.1 only (`http1`), answering with `handle`. */
async function serve(kind: 'h2' | 'http1', handle: Handler, settings?: http2.Settings): Promise<Served> {
  const versions: string[] = [];
  const sessions: http2.ServerHttp2Session[] = [];
  const sockets = new Set<net.Socket>();
  let connections = 0;
  const onRequest: Handler = (request, response) => {
    versions.push(request.httpVersion);
    handle(request, response);
  };
  const server =
    kind === 'h2'
      ? http2.createSecureServer({ ...pem, ...(settings ? { settings } : {}) }, onRequest)
      : https.createServer({ ...pem }, onRequest as unknown as Parameters<typeof https.createServer>[1]);
  server.on('secureConnection', (socket: net.Socket) => {
    connections += 1;
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  });
  if (kind === 'h2') (server as http2.Http2SecureServer).on('session', (s) => sessions.push(s));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    connection: { server: new URL(`https://127.0.0.1:${port}`), headers: {}, tls: { ca: pem.cert } },
    connections: () => connections,
    versions,
    sessions,
  };
}

/**
 * A TCP relay to `served` whose connections so far can be frozen: nothing passes either way,
 * and nothing is closed, as in a partition that drops packets.
 */
async function freezableRelay(
  served: Served,
): Promise<{ connection: Connection; pairs: net.Socket[][]; freeze(): void }> {
  const pairs: net.Socket[][] = [];
  const relay = net.createServer((inbound) => {
    const outbound = net.connect(Number(served.connection.server.port), '127.0.0.1');
    inbound.pipe(outbound).pipe(inbound);
    inbound.on('error', () => outbound.destroy());
    outbound.on('error', () => inbound.destroy());
    pairs.push([inbound, outbound]);
  });
  await new Promise<void>((resolve) => relay.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const s of pairs.flat()) s.destroy();
    relay.close();
  });
  const server = new URL(`https://127.0.0.1:${(relay.address() as net.AddressInfo).port}`);
  return {
    connection: { ...served.connection, server },
    pairs,
    freeze() {
      for (const s of pairs.flat()) {
        s.unpipe();
        s.pause();
      }
    },
  };
}

/** A watch's outcome: `clean end`, or its error's code or message. */
const outcome = (watching: Promise<void>) =>
  watching.then(
    () => 'clean end',
    (error: NodeJS.ErrnoException) => error.code ?? error.message,
  );

/** Answers a watch with one event, then says nothing, ending it after `endMs` if given. */
const quietWatch =
  (endMs?: number): Handler =>
  (_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.write(`${JSON.stringify({ type: 'ADDED', object: {} })}\n`);
    if (endMs !== undefined) setTimeout(() => response.end(), endMs);
  };

const json = (response: http2.Http2ServerResponse, status: number, body: unknown) => {
  response.writeHead(status, { 'content-type': 'application/json' });
  response.end(JSON.stringify(body));
};

describe('the transport over HTTP/2', () => {
  it('carries requests and watches as streams of one connection', async () => {
    const served = await serve('h2', (request, response) => {
      if (request.url?.includes('watch=true')) {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.write(`${JSON.stringify({ type: 'ADDED', object: { n: 1 } })}\n`);
        setTimeout(() => response.end(`${JSON.stringify({ type: 'MODIFIED', object: { n: 2 } })}\n`), 20);
        return;
      }
      if (request.url === '/missing') return json(response, 404, { kind: 'Status', reason: 'NotFound' });
      json(response, 200, { path: request.url, method: request.method });
    });
    const transport = createTransport(async () => served.connection);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => transport.request<{ path: string }>({ path: `/a/${i}` })),
    );
    expect(answers.map((a) => a.path)).toEqual(Array.from({ length: 20 }, (_, i) => `/a/${i}`));
    const events: unknown[] = [];
    await transport.watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 5000 }, (event) =>
      events.push(event),
    );
    expect(events).toEqual([
      { type: 'ADDED', object: { n: 1 } },
      { type: 'MODIFIED', object: { n: 2 } },
    ]);
    const patched = await transport.request<{ method: string }>({
      method: 'PATCH',
      path: '/p',
      body: { a: 1 },
      contentType: 'application/merge-patch+json',
    });
    expect(patched.method).toBe('PATCH');
    const missing = await transport.request({ path: '/missing' }).catch((e: unknown) => e);
    expect(missing).toBeInstanceOf(ApiStatusError);
    expect((missing as ApiStatusError).code).toBe(404);
    expect(served.connections()).toBe(1);
    expect(new Set(served.versions)).toEqual(new Set(['2.0']));
    expect(transport.requests).toEqual({ get: 21, watch: 1, patch: 1 });
  });

  it('speaks HTTP/1.1 to a server that does not offer h2', async () => {
    const served = await serve('http1', (request, response) => json(response, 200, { path: request.url }));
    const transport = createTransport(async () => served.connection);
    expect(await transport.request({ path: '/b/first' })).toEqual({ path: '/b/first' });
    const learnt = served.connections();
    // The server's protocol is learnt once: later requests go straight to the keep-alive pool.
    for (let i = 0; i < 5; i += 1)
      expect(await transport.request({ path: `/b/${i}` })).toEqual({ path: `/b/${i}` });
    expect(served.connections()).toBe(learnt);
    expect(new Set(served.versions)).toEqual(new Set(['1.1']));
  });

  it('fails a watch whose stream the server resets, rather than taking it for a clean end', async () => {
    const served = await serve('h2', (_request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write(`${JSON.stringify({ type: 'ADDED', object: {} })}\n`);
      setTimeout(() => response.stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR), 20);
    });
    const transport = createTransport(async () => served.connection);
    const events: unknown[] = [];
    const ended = await transport
      .watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 5000 }, (e) => events.push(e))
      .then(
        () => 'clean end',
        (error: Error) => error.message,
      );
    expect(events).toHaveLength(1);
    expect(ended).not.toBe('clean end');
  });

  // Node reads a reset with NO_ERROR as the stream's end, so these look like a clean end: a
  // watch then resumes from its last version, which loses nothing, as long as no half event
  // is handed on; a request must not take half a body for its answer.
  it('hands on no half event, and takes no half answer, from a stream reset with no error', async () => {
    const served = await serve('h2', (request, response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      const whole = JSON.stringify({ type: 'ADDED', object: { n: 1 } });
      response.write(request.url?.includes('watch=true') ? `${whole}\n{"type":"MODIF` : '{"kind":"Con');
      setTimeout(() => response.stream.close(http2.constants.NGHTTP2_NO_ERROR), 20);
    });
    const transport = createTransport(async () => served.connection);
    const events: unknown[] = [];
    await transport
      .watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 5000 }, (e) => events.push(e))
      .catch(() => {});
    expect(events).toEqual([{ type: 'ADDED', object: { n: 1 } }]);
    await expect(transport.request({ path: '/r' })).rejects.toThrow(/not whole JSON/);
  });

  // What an L7 hop (a proxy, a mesh's sidecar) sends when its upstream dies before answering:
  // a stream reset with no answer's head. Node reads NO_ERROR as the stream's clean end, and
  // CANCEL as a close with no error; either way no answer came, and the request or watch must
  // fail at once, not wait for ever (a reset status PATCH froze the agent's loop for good).
  describe.each([
    ['NO_ERROR', http2.constants.NGHTTP2_NO_ERROR],
    ['CANCEL', http2.constants.NGHTTP2_CANCEL],
    ['INTERNAL_ERROR', http2.constants.NGHTTP2_INTERNAL_ERROR],
  ])("a stream reset with %s before the answer's head", (name, code) => {
    const resetting = () => serve('h2', (_request, response) => response.stream.close(code));

    it.each(['GET', 'PATCH'] as const)('fails a %s at once, naming the reset', async (method) => {
      const served = await resetting();
      const transport = createTransport(async () => served.connection, { requestTimeoutMs: 30_000 });
      const started = performance.now();
      const failed = await transport
        .request({
          method,
          path: '/r',
          ...(method === 'PATCH' ? { body: {}, contentType: 'application/merge-patch+json' } : {}),
        })
        .catch((e: NodeJS.ErrnoException) => e);
      expect(failed).toBeInstanceOf(Error);
      expect((failed as NodeJS.ErrnoException).code).toBe('ERR_HTTP2_STREAM_RESET');
      expect((failed as Error).message).toContain(name);
      expect(performance.now() - started).toBeLessThan(5_000);
      // A reset is a failed request for the caller's retry, not one the transport sends again
      // by itself: only REFUSED_STREAM says the server never acted on it.
      expect(Object.values(transport.requests).reduce((a, b) => a + b, 0)).toBe(1);
    });

    it('fails a watch at once, rather than leave it open or take it for a clean end', async () => {
      const served = await resetting();
      const transport = createTransport(async () => served.connection, { requestTimeoutMs: 30_000 });
      const started = performance.now();
      const ended = await outcome(
        transport.watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 60_000 }, () => {}),
      );
      expect(ended).toBe('ERR_HTTP2_STREAM_RESET');
      expect(performance.now() - started).toBeLessThan(5_000);
    });
  });

  it("ends a watch whose answer's head never comes, at the request timeout", async () => {
    const served = await serve('h2', () => {}); // takes the stream, never answers
    const transport = createTransport(async () => served.connection, { requestTimeoutMs: 300 });
    const ended = await outcome(
      transport.watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 60_000 }, () => {}),
    );
    expect(ended).toBe('ETIMEDOUT');
  });

  it('ends a request at its deadline while its credentials are still being fetched', async () => {
    const served = await serve('h2', (_q, response) => json(response, 200, {}));
    // A connection source that never answers: an exec credential plugin that hangs.
    const transport = createTransport(() => new Promise<Connection>(() => {}), { requestTimeoutMs: 300 });
    void served;
    const failed = await transport.request({ path: '/x' }).catch((e: NodeJS.ErrnoException) => e);
    expect(failed).toMatchObject({ code: 'ETIMEDOUT' });
  });

  // The API server allows 100 streams at once on a connection: a node agent with more than 100
  // watches must not have the watches past the 100th wait for a stream that never frees.
  it('opens another connection once one has as many streams open as the server allows', async () => {
    const watching = quietWatch();
    const served = await serve(
      'h2',
      (request, response) =>
        request.url?.includes('watch=true') ? watching(request, response) : json(response, 200, { ok: true }),
      { maxConcurrentStreams: 3 },
    );
    const transport = createTransport(async () => served.connection, { requestTimeoutMs: 2_000 });
    // The server's limit: 3 streams a connection (kube-apiserver's is 100); 9 watches fill 3.
    const stop = new AbortController();
    const heads: number[] = [];
    const watches = Array.from({ length: 9 }, (_, i) =>
      outcome(
        transport.watch({ path: `/w/${i}`, signal: stop.signal, inactivityMs: 60_000 }, () => heads.push(i)),
      ),
    );
    await waitFor(() => (heads.length === 9 ? true : undefined), {
      what: 'every watch answered',
      timeoutMs: 5_000,
    });
    expect(served.connections()).toBe(3);
    // A request while every connection is full goes over a new one, not behind a watch.
    await transport.request({ path: '/r' });
    expect(served.connections()).toBe(4);
    stop.abort();
    expect(await Promise.all(watches)).toEqual(Array(9).fill('clean end'));
  });

  it('keeps a quiet watch while its connection answers pings, until the server ends it', async () => {
    const served = await serve('h2', quietWatch(1500));
    let pings = 0;
    const transport = createTransport(async () => served.connection);
    await transport.request({ path: '/first' }).catch(() => {});
    for (const session of served.sessions) session.on('ping', () => (pings += 1));
    const events: unknown[] = [];
    const ended = await outcome(
      transport.watch(
        { path: '/w', query: { timeoutSeconds: 2 }, signal: new AbortController().signal, inactivityMs: 200 },
        (e) => events.push(e),
      ),
    );
    expect(ended).toBe('clean end');
    expect(events).toHaveLength(1);
    // Silent for 1.5 s with a 0.2 s limit: asked about several times, each answered.
    expect(pings).toBeGreaterThanOrEqual(3);
    expect(served.connections()).toBe(1);
  });

  it('ends a quiet watch on a connection the server sent away cleanly, to be resumed, not failed', async () => {
    // A read makes the server send the connection away (GOAWAY), as --goaway-chance does. The
    // watch already on it may run on, but Node answers no ping there: at its first silence it
    // ends cleanly (its caller resumes it from the last version over the next connection),
    // before the server's own end at 1.5 s.
    const served = await serve('h2', (request, response) => {
      if (request.url?.includes('watch=true')) return quietWatch(1500)(request, response);
      response.stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, response.stream.id);
      json(response, 200, {});
    });
    const transport = createTransport(async () => served.connection);
    const events: unknown[] = [];
    const watching = outcome(
      transport.watch(
        { path: '/w', query: { timeoutSeconds: 2 }, signal: new AbortController().signal, inactivityMs: 200 },
        (e) => events.push(e),
      ),
    );
    await waitFor(() => (events.length > 0 ? true : undefined), { what: 'the watch under way' });
    const sentAway = performance.now();
    await transport.request({ path: '/sent-away' });
    expect(await watching).toBe('clean end');
    expect(performance.now() - sentAway).toBeLessThan(1200);
    expect(events).toHaveLength(1);
  });

  it('fails a quiet watch the server does not end by the end it was asked for', async () => {
    const served = await serve('h2', quietWatch());
    const transport = createTransport(async () => served.connection);
    const ended = await outcome(
      transport.watch(
        { path: '/w', query: { timeoutSeconds: 1 }, signal: new AbortController().signal, inactivityMs: 200 },
        () => {},
      ),
    );
    expect(ended).toMatch(/silent for 0.2 s, past the end the server was asked for/);
  });

  it('fails a silent watch whose connection answers no ping, within the ping timeout', async () => {
    const served = await serve('h2', quietWatch());
    const relay = await freezableRelay(served);
    const transport = createTransport(async () => relay.connection, { requestTimeoutMs: 500 });
    const events: unknown[] = [];
    const started = performance.now();
    const watching = outcome(
      transport.watch(
        {
          path: '/w',
          query: { timeoutSeconds: 600 },
          signal: new AbortController().signal,
          inactivityMs: 300,
        },
        (e) => events.push(e),
      ),
    );
    await waitFor(() => (events.length > 0 ? true : undefined), { what: 'the watch under way' });
    relay.freeze();
    expect(await watching).toBe('ETIMEDOUT');
    // 0.3 s of silence, then 0.5 s for the ping's answer (the request timeout caps it), not the
    // 600 s the server was asked to keep it.
    expect(performance.now() - started).toBeLessThan(5000);
  });

  it('says whether quiet watches are kept: over HTTP/2, not over HTTP/1.1', async () => {
    const h2 = await serve('h2', (_q, response) => json(response, 200, {}));
    const overH2 = createTransport(async () => h2.connection);
    expect(overH2.keepsQuietWatches()).toBe(false);
    await overH2.request({ path: '/x' });
    expect(overH2.keepsQuietWatches()).toBe(true);
    const http1 = await serve('http1', (request, response) =>
      request.url?.includes('watch=true') ? quietWatch()(request, response) : json(response, 200, {}),
    );
    const overHttp1 = createTransport(async () => http1.connection);
    await overHttp1.request({ path: '/x' });
    expect(overHttp1.keepsQuietWatches()).toBe(false);
    const silent = await outcome(
      overHttp1.watch(
        {
          path: '/w',
          query: { timeoutSeconds: 600 },
          signal: new AbortController().signal,
          inactivityMs: 200,
        },
        () => {},
      ),
    );
    expect(silent).toMatch(/silent for 0.2 s$/);
  });

  it('fails a watch that falls silent with no end asked of the server, and ends one quietly when asked to', async () => {
    const served = await serve('h2', quietWatch());
    const transport = createTransport(async () => served.connection);
    const silent = await transport
      .watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 200 }, () => {})
      .catch((error: Error) => error.message);
    expect(silent).toMatch(/silent for 0.2 s/);
    const stop = new AbortController();
    const watching = transport.watch({ path: '/w', signal: stop.signal, inactivityMs: 5000 }, () =>
      stop.abort(),
    );
    await expect(watching).resolves.toBeUndefined();
  });

  it('closes a session the server sends away, and opens a new one', async () => {
    const served = await serve('h2', (request, response) => json(response, 200, { path: request.url }));
    const transport = createTransport(async () => served.connection);
    const clientSockets: net.Socket[] = [];
    const onSocket = ({ socket }: { socket: net.Socket }) => clientSockets.push(socket);
    dc.subscribe('net.client.socket', onSocket as (message: unknown) => void);
    closers.push(() => dc.unsubscribe('net.client.socket', onSocket as (message: unknown) => void));
    await transport.request({ path: '/before' });
    served.sessions[0]?.goaway();
    // Closed from the client's side (its end sent; Node's test server, unlike Go's, does not
    // answer that end by closing its own).
    await waitFor(() => (clientSockets[0]?.writableEnded ? true : undefined), {
      what: 'the client to close the connection it was sent away from',
    });
    expect(await transport.request({ path: '/after' })).toEqual({ path: '/after' });
    expect(clientSockets).toHaveLength(2);
    expect(served.connections()).toBe(2);
  });

  it('sends again, over a new connection, requests and watches refused unprocessed as the server went away', async () => {
    // The first request makes the server go away (GOAWAY, NO_ERROR) naming it the last stream
    // it processes, as kube-apiserver's --goaway-chance or a restart does: the requests sent
    // with it are refused (REFUSED_STREAM) and must be sent again.
    let sentAway = false;
    const served = await serve('h2', (request, response) => {
      const stream = response.stream;
      if (!sentAway) stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, stream.id);
      sentAway = true;
      if (request.url?.includes('watch=true')) {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(`${JSON.stringify({ type: 'ADDED', object: { n: 1 } })}\n`);
        return;
      }
      json(response, 200, { path: request.url });
    });
    const transport = createTransport(async () => served.connection);
    const events: unknown[] = [];
    const [first, second, watched] = await Promise.all([
      transport.request({ path: '/first' }),
      transport.request({
        method: 'PATCH',
        path: '/second',
        body: {},
        contentType: 'application/merge-patch+json',
      }),
      transport.watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 5000 }, (e) =>
        events.push(e),
      ),
    ]);
    expect(first).toEqual({ path: '/first' });
    expect(second).toEqual({ path: '/second' });
    expect(watched).toBeUndefined();
    expect(events).toEqual([{ type: 'ADDED', object: { n: 1 } }]);
    expect(served.connections()).toBe(2);
    // The two refused ones, counted each time they were sent.
    expect(transport.requests).toEqual({ get: 1, patch: 2, watch: 2 });
  });

  it('sends a refused request again four times at most, backing off, then gives the refusal', async () => {
    const served = await serve('h2', (_request, response) =>
      response.stream.close(http2.constants.NGHTTP2_REFUSED_STREAM),
    );
    const transport = createTransport(async () => served.connection);
    const started = performance.now();
    const refused = await transport.request({ path: '/r' }).catch((e: Error) => e);
    expect(refused).toMatchObject({ name: 'NotProcessedError', message: /REFUSED_STREAM/ });
    expect(transport.requests).toEqual({ get: 5 });
    // 0.1 + 0.2 + 0.4 s of pauses between the sends.
    expect(performance.now() - started).toBeGreaterThanOrEqual(690);
  });

  it('gives up on a server that never finishes the TLS handshake, and on an answer that never comes', async () => {
    const mute = net.createServer(() => {}); // accepts, says nothing
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    closers.push(() => mute.close());
    const port = (mute.address() as net.AddressInfo).port;
    const silent = createTransport(
      async () => ({ server: new URL(`https://127.0.0.1:${port}`), headers: {}, tls: { ca: pem.cert } }),
      { requestTimeoutMs: 300 },
    );
    const handshake = await silent.request({ path: '/x' }).catch((e: NodeJS.ErrnoException) => e);
    expect(handshake).toMatchObject({ code: 'ETIMEDOUT' });

    const served = await serve('h2', () => {}); // never answers
    const waiting = createTransport(async () => served.connection, { requestTimeoutMs: 300 });
    const answer = await waiting.request({ path: '/y' }).catch((e: NodeJS.ErrnoException) => e);
    expect(answer).toMatchObject({ code: 'ETIMEDOUT' });
  });

  it('drops a connection that went dead under it, once a request finds no answer, and opens a new one', async () => {
    const served = await serve('h2', (request, response) => {
      if (!request.url?.includes('watch=true')) return json(response, 200, { path: request.url });
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write(`${JSON.stringify({ type: 'ADDED', object: {} })}\n`);
    });
    const relay = await freezableRelay(served);
    const transport = createTransport(async () => relay.connection, { requestTimeoutMs: 500 });
    const events: unknown[] = [];
    const watching = outcome(
      transport.watch({ path: '/w', signal: new AbortController().signal, inactivityMs: 60_000 }, (e) =>
        events.push(e),
      ),
    );
    await waitFor(() => (events.length > 0 ? true : undefined), { what: 'the watch under way' });
    relay.freeze();
    const lost = await transport.request({ path: '/lost' }).catch((e: NodeJS.ErrnoException) => e.code);
    expect(lost).toBe('ETIMEDOUT');
    // The ping found the connection dead: the watch on it fails now, not after its 60 s of
    // silence, and the next request goes over a new connection.
    expect(await watching).toBe('ETIMEDOUT');
    expect(await transport.request({ path: '/found' })).toEqual({ path: '/found' });
    expect(relay.pairs).toHaveLength(2);
  });

  it('refuses a server its CA did not sign, with the TLS error', async () => {
    const served = await serve('h2', (_q, response) => json(response, 200, {}));
    const transport = createTransport(async () => ({ ...served.connection, tls: {} }));
    const refused = await transport.request({ path: '/x' }).catch((e: NodeJS.ErrnoException) => e);
    expect((refused as NodeJS.ErrnoException).code).toMatch(/CERT|SELF_SIGNED|UNABLE_TO_VERIFY/);
  });

  it('does not keep a process alive once its requests are answered', async () => {
    const served = await serve('h2', (request, response) => json(response, 200, { path: request.url }));
    const script = `
      const { createTransport } = await import(${JSON.stringify(path.resolve('src/kube/transport.ts'))});
      const t = createTransport(async () => ({ server: new URL(${JSON.stringify(served.connection.server.href)}), headers: {}, tls: { ca: ${JSON.stringify(pem.cert)} } }));
      console.log(JSON.stringify(await t.request({ path: '/done' })));
    `;
    const child = spawn(process.execPath, ['--input-type=module', '-e', script], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
    });
    const code = await new Promise<number | null>((resolve) => {
      const timer = setTimeout(() => {
        child.kill();
        resolve(-1);
      }, 10_000);
      child.on('exit', (c) => {
        clearTimeout(timer);
        resolve(c);
      });
    });
    expect(out.trim()).toBe('{"path":"/done"}');
    expect(code).toBe(0);
  });
});
