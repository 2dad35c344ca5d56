// A proxy between a test's client and the API server, for the proxy tests of client.test.ts and
// doctor.test.ts. Everything stays on loopback: the proxy relays each tunnel to the API server's
// loopback port whatever name the client asked for, as a proxy that resolves cluster names
// would, and the client is given a name of the API server's certificate that nothing on this
// machine resolves (CLUSTER_NAME), so a request that went straight instead of through the proxy
// fails, and the tests make sure it fails before it asks the machine's resolver.
import dns from 'node:dns';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import { controlPlane } from './support.ts';

/** A name in kube-apiserver's self-signed serving certificate (its alternate DNS names). */
export const CLUSTER_NAME = 'kubernetes.default.svc';

export interface ApiServerProxy {
  readonly port: number;
  /** Where each CONNECT asked to go (`host:port`). */
  readonly tunnels: string[];
  close(): void;
}

/** An HTTP CONNECT proxy to the API server; with `refuse`, it answers every CONNECT with that status line. */
export async function apiServerProxy(refuse?: string): Promise<ApiServerProxy> {
  const tunnels: string[] = [];
  const apiServer = new URL(controlPlane().server);
  const sockets = new Set<net.Socket>();
  const proxy = http.createServer((_q, s) => s.writeHead(405).end());
  proxy.on('connect', (request: http.IncomingMessage, client: net.Socket, head: Buffer) => {
    tunnels.push(request.url ?? '');
    if (refuse) {
      client.end(`HTTP/1.1 ${refuse}\r\n\r\n`);
      return;
    }
    const upstream = net.connect(Number(apiServer.port), apiServer.hostname, () => {
      client.write('HTTP/1.1 200 Connection Established\r\n\r\n');
      upstream.write(head);
      upstream.pipe(client).pipe(upstream);
    });
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.on('close', () => sockets.delete(s));
    }
    upstream.on('error', () => client.destroy());
    client.on('error', () => upstream.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  return {
    port: (proxy.address() as net.AddressInfo).port,
    tunnels,
    close: () => {
      for (const s of sockets) s.destroy();
      proxy.close();
    },
  };
}

function refusedLookup(host: string, callback: (error: Error) => void): void {
  process.nextTick(() =>
    callback(Object.assign(new Error(`${host}: not looked up in tests`), { code: 'ENOTFOUND' })),
  );
}

/** Registers hooks under which a lookup of CLUSTER_NAME in this process fails at once. */
export function refuseToResolveClusterName(): void {
  const lookup = dns.lookup;
  beforeAll(() => {
    dns.lookup = ((host: string, ...rest: unknown[]) => {
      if (host !== CLUSTER_NAME) return (lookup as (...a: unknown[]) => unknown)(host, ...rest);
      refusedLookup(host, rest.at(-1) as (error: Error) => void);
    }) as typeof dns.lookup;
  });
  afterAll(() => {
    dns.lookup = lookup;
  });
}

/**
 * The same for a child process: a module for NODE_OPTIONS's `--require`, written into `dir`,
 * so that a CLI run that went straight fails the same way.
 */
export function clusterNameGuardModule(dir: string): string {
  const file = path.join(dir, 'refuse-cluster-name.cjs');
  fs.writeFileSync(
    file,
    `const dns = require('node:dns');
const lookup = dns.lookup;
dns.lookup = (host, ...rest) => {
  if (host !== ${JSON.stringify(CLUSTER_NAME)}) return lookup(host, ...rest);
  (${refusedLookup.toString()})(host, rest.at(-1));
};
`,
  );
  return file;
}
