// The webhook's HTTPS server: POST /mutate (AdmissionReview v1), GET /healthz. The certificate
// and key are read from files and reloaded when either changes (a renewed cert-manager Secret
// is swapped by kubelet like any other volume), without a restart and without dropping
// connections.
import fs from 'node:fs';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import { ConfigSyncError } from '../errors.ts';
import type { SidecarOptions } from '../inject/sidecar.ts';
import { listenOn } from '../metrics/server.ts';
import { statSignature } from '../watch/file-watch.ts';
import { type AdmissionReview, mutatePod } from './mutate.ts';

export interface WebhookOptions {
  readonly listen: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly sidecar: SidecarOptions;
  /** How often to look for a renewed certificate. */
  readonly certPollMs: number;
}

function readPair(options: WebhookOptions): { cert: Buffer; key: Buffer } {
  try {
    return { cert: fs.readFileSync(options.certFile), key: fs.readFileSync(options.keyFile) };
  } catch (error) {
    throw new ConfigSyncError(
      'CS_CONFIG_TLS',
      'config',
      `webhook: cannot read the TLS certificate or key: ${(error as Error).message}`,
      {
        hint: 'pass --tls-cert-file and --tls-key-file (PEM), e.g. from a cert-manager Certificate Secret',
        cause: error,
      },
    );
  }
}

const MAX_BODY = 4 * 1024 * 1024;

export async function startWebhook(
  options: WebhookOptions,
  log: Logger,
  signal: AbortSignal,
): Promise<{ address: string; closed: Promise<void> }> {
  const server = https.createServer(readPair(options), (req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200).end('ok\n');
      return;
    }
    if (req.method !== 'POST' || !req.url?.startsWith('/mutate')) {
      res.writeHead(404).end();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_BODY) req.destroy();
      else chunks.push(c);
    });
    req.on('end', () => {
      let review: AdmissionReview;
      try {
        review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as AdmissionReview;
      } catch {
        res.writeHead(400).end('not an AdmissionReview\n');
        return;
      }
      const { review: answer, decision } = mutatePod(review, options.sidecar);
      const pod = review.request?.object?.metadata;
      log.info(
        { namespace: review.request?.namespace, pod: pod?.name ?? pod?.generateName, decision },
        'admission',
      );
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(answer));
    });
  });

  // Certificate reload: a cheap stat of both files; a changed pair is loaded into the server's
  // secure context, so new connections use it. A half-written pair (key and cert not matching
  // yet) is refused by TLS and simply tried again on the next poll.
  let signature = `${statSignature(options.certFile)}|${statSignature(options.keyFile)}`;
  const poll = setInterval(() => {
    const now = `${statSignature(options.certFile)}|${statSignature(options.keyFile)}`;
    if (now === signature) return;
    try {
      server.setSecureContext(readPair(options));
      signature = now;
      log.info({ certFile: options.certFile }, 'TLS certificate reloaded');
    } catch (error) {
      log.warn({ err: (error as Error).message }, 'TLS certificate changed but could not be loaded yet');
    }
  }, options.certPollMs);

  await listenOn(server, options.listen);
  const closed = new Promise<void>((resolve) => {
    signal.addEventListener(
      'abort',
      () => {
        clearInterval(poll);
        server.close(() => resolve());
        server.closeAllConnections();
      },
      { once: true },
    );
  });
  const a = server.address() as AddressInfo;
  return { address: `${a.address}:${a.port}`, closed };
}
