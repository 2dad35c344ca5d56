// /metrics, /healthz and /readyz on --listen (the agents; the webhook's --metrics-listen). Liveness is "the loop is turning" (a pass finished
// recently enough); readiness is "the first full compare is done".
import http from 'node:http';
import type https from 'node:https';
import type { AddressInfo } from 'node:net';
import type Registry from 'prom-client/lib/registry.js';
import { ConfigSyncError } from '../errors.ts';

export interface Health {
  ready(): boolean;
  live(): boolean;
}

export function parseListen(raw: string): { host: string; port: number } {
  const m = raw.match(/^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/);
  const port = Number(m?.[3]);
  if (!m || port > 65535) {
    throw new ConfigSyncError('CS_USAGE_BAD_FLAG', `--listen ${raw} is not host:port`, {
      hint: 'e.g. --listen :9464 (all interfaces) or --listen 127.0.0.1:9464',
    });
  }
  return { host: m[1] ?? m[2] ?? '', port };
}

/** Starts `server` on a --listen address, or fails with an error that says what to do. */
export async function listenOn(server: http.Server | https.Server, listen: string): Promise<void> {
  const { host, port } = parseListen(listen);
  await new Promise<void>((resolve, reject) => {
    server.once('error', (error) =>
      reject(
        new ConfigSyncError(
          'CS_CONFIG_LISTEN',
          `cannot listen on ${listen}: ${(error as NodeJS.ErrnoException).code}`,
          {
            hint: 'choose another --listen port, or stop what holds it',
            cause: error,
          },
        ),
      ),
    );
    server.listen(port, host || undefined, resolve);
  });
}

export async function startHttpServer(
  listen: string,
  metrics: { readonly registry: Registry },
  health: Health,
  signal: AbortSignal,
): Promise<{ address: string; closed: Promise<void> }> {
  const server = http.createServer((req, res) => {
    const url = req.url ?? '/';
    if (url === '/metrics') {
      metrics.registry
        .metrics()
        .then((body) => {
          res.writeHead(200, { 'content-type': metrics.registry.contentType });
          res.end(body);
        })
        .catch(() => {
          res.writeHead(500).end();
        });
      return;
    }
    if (url === '/healthz' || url === '/readyz') {
      const ok = url === '/healthz' ? health.live() : health.ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' }).end(ok ? 'ok\n' : 'not yet\n');
      return;
    }
    res.writeHead(404).end();
  });
  await listenOn(server, listen);
  const closed = new Promise<void>((resolve) => {
    signal.addEventListener(
      'abort',
      () => {
        server.close(() => resolve());
        // A scrape in flight or a keep-alive connection must not hold the stop.
        server.closeAllConnections();
      },
      { once: true },
    );
  });
  const a = server.address() as AddressInfo;
  return { address: `${a.address.includes(':') ? `[${a.address}]` : a.address}:${a.port}`, closed };
}
