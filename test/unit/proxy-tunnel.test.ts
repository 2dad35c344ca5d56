// The transport through a proxy (src/kube/proxy-tunnel.ts), against local TLS servers and
// proxies of the test's own, all on loopback: an HTTP CONNECT proxy and a SOCKS5 one carry one
// tunnel with the process's HTTP/2 connection in it; a server that speaks only HTTP/1.1 gets
// its keep-alive pool through tunnels too; a proxy that refuses, wants credentials or never
// answers fails the request with what it said, naming the proxy and never its password.
import fs from 'node:fs';
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import path from 'node:path';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type ProxyRoute, resolveProxy } from '../../src/kube/proxy.ts';
import { ProxyTunnelError } from '../../src/kube/proxy-tunnel.ts';
import { type Connection, createTransport } from '../../src/kube/transport.ts';
import { selfSignedCertificate } from '../cluster/self-signed.ts';
import { tempDir } from '../cluster/temp-dir.ts';

let pem: { cert: string; key: string };
/** Another self-signed certificate: one nothing in these tests trusts. */
let untrusted: { cert: string; key: string };
beforeAll(() => {
  const dir = tempDir('proxy-tunnel-');
  const make = (name: string) => {
    const files = { cert: path.join(dir, `${name}.pem`), key: path.join(dir, `${name}-key.pem`) };
    selfSignedCertificate(files, 'localhost', 'IP:127.0.0.1');
    return { cert: fs.readFileSync(files.cert, 'utf8'), key: fs.readFileSync(files.key, 'utf8') };
  };
  pem = make('cluster');
  untrusted = make('untrusted');
});

const closers: (() => void)[] = [];
afterEach(() => {
  for (const close of closers.splice(0)) close();
});

/** Closes a server and every connection it accepted when the test ends. */
function closedAfter(server: net.Server): void {
  const sockets = new Set<net.Socket>();
  server.on('connection', (s: net.Socket) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  closers.push(() => {
    for (const s of sockets) s.destroy();
    server.close();
  });
}

async function listen(server: net.Server): Promise<number> {
  closedAfter(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as net.AddressInfo).port;
}

/** An API server stand-in: `{"ok":true}` to every request; a watch gets one event and stays open. */
async function apiServer(kind: 'h2' | 'http1'): Promise<{ connection: Connection; versions: string[] }> {
  const versions: string[] = [];
  const handle = (
    request: http.IncomingMessage | http2.Http2ServerRequest,
    response: http.ServerResponse,
  ) => {
    versions.push(request.httpVersion);
    response.writeHead(200, { 'content-type': 'application/json' });
    if (String(request.url).includes('watch=true')) response.write('{"type":"ADDED","object":{}}\n');
    else response.end('{"ok":true}');
  };
  const server =
    kind === 'h2'
      ? http2.createSecureServer({ ...pem }, handle as never)
      : https.createServer({ ...pem }, handle as never);
  const port = await listen(server);
  return {
    connection: { server: new URL(`https://127.0.0.1:${port}`), headers: {}, tls: { ca: pem.cert } },
    versions,
  };
}

/**
 * An HTTP CONNECT proxy; with `credentials`, it answers 407 to a CONNECT without them; with
 * `tlsIdentity`, it is an https:// proxy with that certificate.
 */
async function connectProxy(
  credentials?: string,
  tlsIdentity?: { cert: string; key: string },
): Promise<{ port: number; tunnels: string[]; auth: string[] }> {
  const tunnels: string[] = [];
  const auth: string[] = [];
  const refuse = (_q: http.IncomingMessage, s: http.ServerResponse) => s.writeHead(405).end();
  const proxy = tlsIdentity ? https.createServer({ ...tlsIdentity }, refuse) : http.createServer(refuse);
  proxy.on('connect', (request: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    auth.push(request.headers['proxy-authorization'] ?? '');
    if (
      credentials &&
      request.headers['proxy-authorization'] !== `Basic ${Buffer.from(credentials).toString('base64')}`
    ) {
      client.end('HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n');
      return;
    }
    tunnels.push(request.url ?? '');
    const [host, port] = (request.url ?? '').split(':');
    const upstream = net.connect(Number(port), host, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  return { port: await listen(proxy), tunnels, auth };
}

/**
 * A SOCKS5 proxy (RFC 1928, RFC 1929): no authentication, or user and password when
 * `credentials` is set; it connects every CONNECT to loopback at the asked port, unless `reply`
 * says to refuse with that code. `targets` holds what each CONNECT asked for.
 */
async function socksProxy(
  options: { credentials?: [string, string]; reply?: number } = {},
): Promise<{ port: number; targets: string[] }> {
  const targets: string[] = [];
  const server = net.createServer((client) => {
    let buffered = Buffer.alloc(0);
    let stage: 'greeting' | 'auth' | 'connect' | 'relay' = 'greeting';
    client.on('error', () => {});
    client.on('data', (chunk: Buffer) => {
      if (stage === 'relay') return;
      buffered = Buffer.concat([buffered, chunk]);
      if (stage === 'greeting' && buffered.length >= 2 && buffered.length >= 2 + (buffered[1] ?? 0)) {
        const offered = [...buffered.subarray(2, 2 + (buffered[1] ?? 0))];
        buffered = buffered.subarray(2 + (buffered[1] ?? 0));
        const want = options.credentials ? 0x02 : 0x00;
        client.write(Buffer.from([0x05, offered.includes(want) ? want : 0xff]));
        stage = options.credentials ? 'auth' : 'connect';
      }
      if (stage === 'auth' && buffered.length >= 2) {
        const ulen = buffered[1] ?? 0;
        const plen = buffered[2 + ulen];
        if (plen === undefined || buffered.length < 3 + ulen + plen) return;
        const user = buffered.subarray(2, 2 + ulen).toString();
        const password = buffered.subarray(3 + ulen, 3 + ulen + plen).toString();
        buffered = buffered.subarray(3 + ulen + plen);
        const ok = user === options.credentials?.[0] && password === options.credentials?.[1];
        client.write(Buffer.from([0x01, ok ? 0x00 : 0x01]));
        if (!ok) client.end();
        stage = 'connect';
      }
      if (stage === 'connect' && buffered.length >= 5) {
        const type = buffered[3];
        const addressLength = type === 0x01 ? 4 : type === 0x04 ? 16 : (buffered[4] ?? 0) + 1;
        if (buffered.length < 4 + addressLength + 2) return;
        const address = buffered.subarray(4, 4 + addressLength);
        const port = buffered.readUInt16BE(4 + addressLength);
        targets.push(`${type === 0x03 ? address.subarray(1).toString() : [...address].join('.')}:${port}`);
        buffered = buffered.subarray(4 + addressLength + 2);
        const answer = (code: number) => Buffer.from([0x05, code, 0x00, 0x01, 127, 0, 0, 1, 0, 0]);
        if (options.reply !== undefined) {
          client.end(answer(options.reply));
          return;
        }
        stage = 'relay';
        const upstream = net.connect(port, '127.0.0.1', () => {
          client.write(answer(0x00));
          if (buffered.length > 0) upstream.write(buffered);
          upstream.pipe(client).pipe(upstream);
        });
        upstream.on('error', () => client.destroy());
      }
    });
  });
  return { port: await listen(server), targets };
}

function routeTo(proxy: string): ProxyRoute {
  const route = resolveProxy('https://api.example:6443', undefined, { HTTPS_PROXY: proxy });
  if (!route) throw new Error('no route');
  return route;
}

async function failureOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (error) {
    return error as Error;
  }
  throw new Error('expected a failure');
}

describe('the transport through a proxy', () => {
  it('carries every request and watch in one HTTP CONNECT tunnel, over HTTP/2', async () => {
    const api = await apiServer('h2');
    const proxy = await connectProxy();
    const transport = createTransport(async () => api.connection, {
      proxy: routeTo(`http://127.0.0.1:${proxy.port}`),
    });
    const answers = await Promise.all(
      [1, 2, 3, 4].map(() => transport.request({ path: '/api/v1/namespaces/a/configmaps/b' })),
    );
    expect(answers).toEqual([{ ok: true }, { ok: true }, { ok: true }, { ok: true }]);
    const stop = new AbortController();
    const events: string[] = [];
    const watching = transport.watch(
      { path: '/api/v1/configmaps', signal: stop.signal, inactivityMs: 10_000 },
      (e) => {
        events.push(e.type);
        stop.abort();
      },
    );
    await watching;
    expect(events).toEqual(['ADDED']);
    expect(proxy.tunnels).toEqual([`127.0.0.1:${api.connection.server.port}`]);
    expect(new Set(api.versions)).toEqual(new Set(['2.0']));
    // The tunnel is end to end, so a ping is answered by the server itself: quiet watches kept.
    expect(transport.keepsQuietWatches()).toBe(true);
  });

  it('sends the URL credentials as Proxy-Authorization, and reports a 407 without printing the password', async () => {
    const api = await apiServer('h2');
    const proxy = await connectProxy('alice:s3cr%t');
    const refused = createTransport(async () => api.connection, {
      proxy: routeTo(`http://alice:wrong@127.0.0.1:${proxy.port}`),
    });
    const error = await failureOf(refused.request({ path: '/version' }));
    expect(error).toBeInstanceOf(ProxyTunnelError);
    expect(error.message).toContain(`http://alice@127.0.0.1:${proxy.port}`);
    expect(error.message).toContain('from HTTPS_PROXY');
    expect(error.message).toContain('407');
    expect(`${error.message}${JSON.stringify(error)}`).not.toContain('wrong');

    const allowed = createTransport(async () => api.connection, {
      proxy: routeTo(`http://alice:s3cr%25t@127.0.0.1:${proxy.port}`),
    });
    expect(await allowed.request({ path: '/version' })).toEqual({ ok: true });
    expect(proxy.auth.at(-1)).toBe(`Basic ${Buffer.from('alice:s3cr%t').toString('base64')}`);
  });

  it("reaches an https:// proxy whose certificate the cluster's CA signs, as Go does, and refuses one it cannot verify", async () => {
    const api = await apiServer('h2');
    const trusted = await connectProxy(undefined, pem);
    const transport = createTransport(async () => api.connection, {
      proxy: routeTo(`https://127.0.0.1:${trusted.port}`),
    });
    expect(await transport.request({ path: '/version' })).toEqual({ ok: true });
    expect(trusted.tunnels).toEqual([`127.0.0.1:${api.connection.server.port}`]);

    const unknown = await connectProxy(undefined, untrusted);
    const refused = createTransport(async () => api.connection, {
      proxy: routeTo(`https://127.0.0.1:${unknown.port}`),
    });
    const error = await failureOf(refused.request({ path: '/version' }));
    expect(error).toBeInstanceOf(ProxyTunnelError);
    expect(error.message).toContain(`https://127.0.0.1:${unknown.port}`);
    expect(error.message).toMatch(/self[- ]signed|SELF_SIGNED/i);
    expect(unknown.tunnels).toEqual([]);
  });

  it('tunnels the HTTP/1.1 keep-alive pool where the server does not offer h2', async () => {
    const api = await apiServer('http1');
    const proxy = await connectProxy();
    const transport = createTransport(async () => api.connection, {
      proxy: routeTo(`http://127.0.0.1:${proxy.port}`),
    });
    for (let i = 0; i < 3; i += 1)
      expect(await transport.request({ path: '/version' })).toEqual({ ok: true });
    expect(new Set(api.versions)).toEqual(new Set(['1.1']));
    // The first tunnel only asked which protocol the server speaks; then the pool's socket is reused.
    expect(proxy.tunnels.length).toBeLessThanOrEqual(2);
    expect(transport.keepsQuietWatches()).toBe(false);
  });

  it('goes through a SOCKS5 proxy, with and without user and password', async () => {
    const api = await apiServer('h2');
    const open = await socksProxy();
    const viaOpen = createTransport(async () => api.connection, {
      proxy: routeTo(`socks5://127.0.0.1:${open.port}`),
    });
    expect(await viaOpen.request({ path: '/version' })).toEqual({ ok: true });
    expect(open.targets).toEqual([`127.0.0.1:${api.connection.server.port}`]);

    const guarded = await socksProxy({ credentials: ['bob', 'pw'] });
    const withCredentials = createTransport(async () => api.connection, {
      proxy: routeTo(`socks5h://bob:pw@127.0.0.1:${guarded.port}`),
    });
    expect(await withCredentials.request({ path: '/version' })).toEqual({ ok: true });
    const without = createTransport(async () => api.connection, {
      proxy: routeTo(`socks5://127.0.0.1:${guarded.port}`),
    });
    expect((await failureOf(without.request({ path: '/version' }))).message).toContain('wants credentials');
  });

  it("reports a SOCKS5 proxy's refusal by its meaning", async () => {
    const api = await apiServer('h2');
    const refusing = await socksProxy({ reply: 0x05 });
    const transport = createTransport(async () => api.connection, {
      proxy: routeTo(`socks5://127.0.0.1:${refusing.port}`),
    });
    const error = await failureOf(transport.request({ path: '/version' }));
    expect(error).toBeInstanceOf(ProxyTunnelError);
    expect(error.message).toContain('connection refused');
  });

  it('fails within the request timeout when the proxy never answers', async () => {
    const api = await apiServer('h2');
    const silent = net.createServer(() => {});
    const port = await listen(silent);
    const transport = createTransport(async () => api.connection, {
      proxy: routeTo(`http://127.0.0.1:${port}`),
      requestTimeoutMs: 500,
    });
    const started = performance.now();
    const error = await failureOf(transport.request({ path: '/version' }));
    expect(error.message).toContain('no tunnel in 0.5 s');
    expect(performance.now() - started).toBeLessThan(3000);
  });
});
