// A TCP tunnel to the API server through the proxy proxy.ts chose: the socket the transport
// then speaks TLS over, offering h2 as it does without a proxy, so that one tunnel carries the
// process's one HTTP/2 connection (every request and watch a stream of it, pings end to end)
// rather than a tunnel and a TLS handshake per request.
//
// The tunnel, step by step:
//  (1) a TCP connection to the proxy, with TLS for an https:// proxy, verified against the
//      process's default CAs and the cluster's CA: Go verifies an https proxy with the
//      transport's own TLS settings, so a proxy kubectl reaches with the cluster's CA is
//      reached here too, and so is one with a publicly signed certificate;
//  (2) http:// and https:// proxies: `CONNECT host:port`, with the URL's user and password as
//      Basic Proxy-Authorization; any answer but 2xx fails the tunnel with that status;
//  (3) socks5:// (socks5h://): RFC 1928's greeting, offering no authentication, and user and
//      password (RFC 1929) when the URL has them; then CONNECT to the host by name (the proxy
//      resolves it) or by address; a reply other than success fails with its meaning;
//  (4) the whole of (1) to (3) within the connect timeout; what the proxy sent past its answer
//      (nothing, when the server waits for the client's TLS hello) is put back for TLS to read.
// A failure is a ProxyTunnelError naming the proxy as shown (never its password) and what it
// said, so that an operator sees the proxy was the one that refused, not the API server.
import net from 'node:net';
import tls from 'node:tls';
import { hostOf, type ProxyRoute, portOf } from './proxy.ts';

export class ProxyTunnelError extends Error {
  readonly code: string;
  readonly proxy: string;
  readonly proxySource: string;
  /** What went wrong, in the proxy's words where it said something. */
  readonly reason: string;
  constructor(route: ProxyRoute, target: string, reason: string, code = 'CS_PROXY_TUNNEL') {
    super(`the proxy ${route.shown} (from ${route.source}) gave no tunnel to ${target}: ${reason}`);
    this.name = 'ProxyTunnelError';
    this.code = code;
    this.proxy = route.shown;
    this.proxySource = route.source;
    this.reason = reason;
  }
}

export function openTunnel(
  route: ProxyRoute,
  host: string,
  port: number,
  timeoutMs: number,
  clusterCa?: string | Buffer,
): Promise<net.Socket> {
  const target = `${net.isIP(host) === 6 ? `[${host}]` : host}:${port}`;
  const proxyHost = hostOf(route.url);
  const fail = (reason: string, code?: string) => new ProxyTunnelError(route, target, reason, code);
  return new Promise((resolve, reject) => {
    // (1)
    const socket =
      route.url.protocol === 'https:'
        ? tls.connect({
            host: proxyHost,
            port: portOf(route.url),
            ALPNProtocols: ['http/1.1'],
            ...(net.isIP(proxyHost) ? {} : { servername: proxyHost }),
            ...(clusterCa ? { ca: [...tls.getCACertificates('default'), clusterCa] } : {}),
          })
        : net.connect({ host: proxyHost, port: portOf(route.url) });
    let settled = false;
    const finish = (error: Error | undefined) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.off('error', onError);
      socket.off('close', onClose);
      if (error) {
        socket.destroy();
        reject(error);
      } else resolve(socket);
    };
    // (4)
    const timer = setTimeout(
      () => finish(fail(`no tunnel in ${timeoutMs / 1000} s`, 'ETIMEDOUT')),
      timeoutMs,
    );
    const onError = (error: NodeJS.ErrnoException) =>
      finish(fail(`${error.code ?? 'error'}: ${error.message}`, error.code));
    const onClose = () => finish(fail('the proxy closed the connection'));
    socket.on('error', onError);
    socket.on('close', onClose);
    const input = socketReader(socket);
    socket.once(route.url.protocol === 'https:' ? 'secureConnect' : 'connect', () => {
      const handshake = route.url.protocol.startsWith('socks5')
        ? socks5(socket, input, route.url, host, port, fail)
        : httpConnect(socket, input, route.url, target, fail);
      handshake.then(
        () => {
          const rest = input.release();
          if (rest.length > 0) socket.unshift(rest);
          finish(undefined);
        },
        (error: Error) => finish(error),
      );
    });
  });
}

/** A URL's user or password as written before percent-encoding; as is where it is not valid encoding. */
function unescaped(part: string): string {
  try {
    return decodeURIComponent(part);
  } catch {
    return part;
  }
}

/** (2) */
async function httpConnect(
  socket: net.Socket,
  input: SocketReader,
  proxy: URL,
  target: string,
  fail: (reason: string) => Error,
): Promise<void> {
  const user = unescaped(proxy.username);
  const auth = user
    ? `Proxy-Authorization: Basic ${Buffer.from(`${user}:${unescaped(proxy.password)}`).toString('base64')}\r\n`
    : '';
  socket.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n${auth}\r\n`);
  const head = await input.until((b) => {
    const end = b.indexOf('\r\n\r\n');
    return end < 0 ? -1 : end + 4;
  });
  const statusLine = head.toString('latin1').split('\r\n', 1)[0] ?? '';
  const status = Number(statusLine.match(/^HTTP\/1\.[01] (\d{3})/)?.[1]);
  if (!(status >= 200 && status < 300)) {
    const said = statusLine.replace(/[^\x20-\x7e]/g, '').slice(0, 120);
    throw fail(
      `it answered CONNECT with "${said}"${status === 407 ? ' (it wants credentials: user:password@ in the proxy URL)' : ''}`,
    );
  }
}

const SOCKS_REPLIES: Readonly<Record<number, string>> = {
  1: 'general SOCKS server failure',
  2: 'connection not allowed by ruleset',
  3: 'network unreachable',
  4: 'host unreachable',
  5: 'connection refused',
  6: 'TTL expired',
  7: 'command not supported',
  8: 'address type not supported',
};

/** (3) */
async function socks5(
  socket: net.Socket,
  input: SocketReader,
  proxy: URL,
  host: string,
  port: number,
  fail: (reason: string) => Error,
): Promise<void> {
  const user = Buffer.from(unescaped(proxy.username));
  const password = Buffer.from(unescaped(proxy.password));
  const methods = user.length > 0 ? [0x00, 0x02] : [0x00];
  socket.write(Buffer.from([0x05, methods.length, ...methods]));
  const [version, method] = await input.take(2);
  if (version !== 0x05) throw fail('it does not speak SOCKS5');
  if (method === 0x02) {
    if (user.length > 255 || password.length > 255)
      throw fail('the user or password is longer than SOCKS5 allows');
    socket.write(
      Buffer.concat([Buffer.from([0x01, user.length]), user, Buffer.from([password.length]), password]),
    );
    const [, status] = await input.take(2);
    if (status !== 0x00) throw fail('it refused the user and password');
  } else if (method !== 0x00) {
    throw fail(
      user.length > 0
        ? 'it accepts none of the offered authentications'
        : 'it wants credentials: user:password@ in the proxy URL',
    );
  }
  const family = net.isIP(host);
  const address =
    family === 4
      ? Buffer.from([0x01, ...host.split('.').map(Number)])
      : family === 6
        ? Buffer.concat([Buffer.from([0x04]), ipv6Bytes(host)])
        : Buffer.concat([Buffer.from([0x03, Buffer.byteLength(host)]), Buffer.from(host)]);
  socket.write(
    Buffer.concat([Buffer.from([0x05, 0x01, 0x00]), address, Buffer.from([port >> 8, port & 0xff])]),
  );
  const [, reply, , type] = await input.take(4);
  if (reply !== 0x00)
    throw fail(`it answered CONNECT with "${SOCKS_REPLIES[reply ?? 1] ?? `reply ${reply}`}"`);
  // The address it bound, then its port: read and dropped.
  const length = type === 0x01 ? 4 : type === 0x04 ? 16 : ((await input.take(1))[0] ?? 0);
  await input.take(length + 2);
}

function ipv6Bytes(ip: string): Buffer {
  const [head = '', tail = ''] = ip.split('::');
  const groups = (s: string) => (s ? s.split(':') : []);
  const left = groups(head);
  const right = groups(tail);
  const all = ip.includes('::')
    ? [...left, ...Array(8 - left.length - right.length).fill('0'), ...right]
    : left;
  const out = Buffer.alloc(16);
  all.forEach((g, i) => {
    out.writeUInt16BE(Number.parseInt(g, 16), i * 2);
  });
  return out;
}

interface SocketReader {
  /** The next `n` bytes. */
  take(n: number): Promise<Buffer>;
  /** Bytes up to the length `complete` returns once what has come is enough (-1: not yet). */
  until(complete: (buffered: Buffer) => number): Promise<Buffer>;
  /** Stops reading; what came past the last answer taken. */
  release(): Buffer;
}

/** Reads a proxy's answers off the socket ('readable', as https-proxy-agent does). */
function socketReader(socket: net.Socket): SocketReader {
  let buffered = Buffer.alloc(0);
  let wake: (() => void) | undefined;
  const onReadable = () => {
    for (let chunk = socket.read() as Buffer | null; chunk; chunk = socket.read() as Buffer | null)
      buffered = Buffer.concat([buffered, chunk]);
    wake?.();
  };
  socket.on('readable', onReadable);
  const until = async (complete: (b: Buffer) => number): Promise<Buffer> => {
    for (;;) {
      const n = complete(buffered);
      if (n >= 0) {
        const taken = buffered.subarray(0, n);
        buffered = buffered.subarray(n);
        return taken;
      }
      // The socket's error, close or the timeout settles the tunnel; this wait is then dropped.
      await new Promise<void>((resolve) => {
        wake = resolve;
      });
      wake = undefined;
    }
  };
  return {
    take: (n) => until((b) => (b.length >= n ? n : -1)),
    until,
    release() {
      socket.off('readable', onReadable);
      return buffered;
    },
  };
}
