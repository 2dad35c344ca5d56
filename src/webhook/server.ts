import https from 'node:https';
import type { AddressInfo } from 'node:net';
import tls from 'node:tls';
import type { Logger } from 'pino';
import { ConfigSyncError } from '../errors.ts';
import type { SidecarOptions } from '../inject/sidecar.ts';
import { FILE_LIMITS, readRegularFile } from '../kube/regular-file.ts';
import { listenOn } from '../metrics/server.ts';
import type { RefusedReason, WebhookMetrics } from '../metrics/webhook-metrics.ts';
import { statSignature } from '../watch/file-watch.ts';
import { MAX_BODY_BYTES, MAX_JSON_DEPTH, nestsDeeperThan } from './body-limits.ts';
import { ADMISSION_DECISIONS, type AdmissionReview, type MutationResult, mutatePod } from './mutate.ts';
import { readReview } from './review.ts';

export interface WebhookOptions {
  readonly listen: string;
  readonly certFile: string;
  readonly keyFile: string;
  readonly sidecar: SidecarOptions;
  /** How often to look for a renewed certificate. */
  readonly certPollMs: number;
  /** Counts each answer (--metrics-listen serves them). */
  readonly metrics?: WebhookMetrics;
}

/**
 * The certificate and key, read and checked together: a file that is not PEM, or a key that
 * does not belong to the certificate, is a configuration error naming both files (exit 2),
 * not an internal crash.
 */
function readPair(options: WebhookOptions): { cert: Buffer; key: Buffer } {
  let pair: { cert: Buffer; key: Buffer };
  try {
    pair = {
      cert: readRegularFile(options.certFile, FILE_LIMITS.pem),
      key: readRegularFile(options.keyFile, FILE_LIMITS.pem),
    };
  } catch (error) {
    throw new ConfigSyncError(
      'CS_CONFIG_TLS',
      `webhook: cannot read the TLS certificate or key: ${(error as Error).message}`,
      {
        hint: 'pass --tls-cert-file and --tls-key-file (PEM), e.g. from a cert-manager Certificate Secret',
        cause: error,
      },
    );
  }
  try {
    tls.createSecureContext(pair);
  } catch (error) {
    throw new ConfigSyncError(
      'CS_CONFIG_TLS',
      `webhook: the TLS certificate ${options.certFile} and key ${options.keyFile} cannot be used: ${(error as Error).message}`,
      {
        hint: 'both must be PEM, and the key must be the one the certificate was issued for (tls.crt and tls.key of one Secret)',
        cause: error,
      },
    );
  }
  return pair;
}

/** A string field of the request for the log, or nothing: a hostile body may put anything there. */
function text(value: unknown): string | undefined {
  return typeof value === 'string' ? value.slice(0, 253) : undefined;
}

export async function startWebhook(
  options: WebhookOptions,
  log: Logger,
  signal: AbortSignal,
): Promise<{ address: string; closed: Promise<void> }> {
  // The last line of defence: a mutation that throws on a Pod the shape check let through
  // still answers "allowed" (config-sync never blocks a Pod) and the process keeps serving.
  const decide = (review: AdmissionReview): MutationResult => {
    try {
      return mutatePod(review, options.sidecar);
    } catch (error) {
      log.error(
        { err: (error as Error).message },
        'admission: the mutation failed; allowing the Pod unchanged',
      );
      return {
        decision: 'failed',
        review: {
          apiVersion: 'admission.k8s.io/v1',
          kind: 'AdmissionReview',
          response: {
            uid: String(review.request?.uid ?? ''),
            allowed: true,
            warnings: ['config-sync not injected: the webhook could not process this Pod'],
          },
        },
      };
    }
  };
  const refused = (reason: RefusedReason) => options.metrics?.refused.inc({ reason });
  const server = https.createServer(readPair(options), (req, res) => {
    if (req.method === 'GET' && req.url === '/healthz') {
      res.writeHead(200).end('ok\n');
      return;
    }
    if (req.method !== 'POST' || !req.url?.startsWith('/mutate')) {
      res.writeHead(404).end();
      return;
    }
    // A body over the cap is answered 413, with a line in the log, before it is read whole:
    // at once where its Content-Length says so, else as soon as it grows past it. The rest is
    // drained unkept for a second, so that the caller gets the answer rather than a reset of
    // its upload, and the connection is then closed.
    const tooLarge = (size: number | string) => {
      refused('too_large');
      log.warn(
        { bytes: size, max: MAX_BODY_BYTES, from: req.socket.remoteAddress },
        'admission: a body over the cap, refused',
      );
      res.writeHead(413, { connection: 'close' }).end(`the body is over ${MAX_BODY_BYTES} bytes; not read\n`);
      res.on('finish', () => setTimeout(() => req.destroy(), 1000).unref());
      req.resume();
    };
    const declared = Number(req.headers['content-length']);
    if (declared > MAX_BODY_BYTES) return tooLarge(declared);
    const chunks: Buffer[] = [];
    let size = 0;
    let overCap = false;
    req.on('data', (c: Buffer) => {
      if (overCap) return;
      size += c.length;
      if (size > MAX_BODY_BYTES) {
        overCap = true;
        tooLarge(`more than ${MAX_BODY_BYTES}`);
      } else chunks.push(c);
    });
    req.on('error', () => res.destroy());
    req.on('end', () => {
      if (overCap) return;
      const raw = Buffer.concat(chunks).toString('utf8');
      if (nestsDeeperThan(raw, MAX_JSON_DEPTH)) {
        refused('too_deep');
        log.warn(
          { bytes: size, from: req.socket.remoteAddress },
          'admission: a body nested too deep, refused',
        );
        res.writeHead(400).end(`not an AdmissionReview: nested deeper than ${MAX_JSON_DEPTH}\n`);
        return;
      }
      let body: unknown;
      try {
        body = JSON.parse(raw);
      } catch {
        refused('not_json');
        res.writeHead(400).end('not an AdmissionReview: the body is not JSON\n');
        return;
      }
      const read = readReview(body);
      if ('invalid' in read) {
        refused('not_a_review');
        res.writeHead(400).end(`not an AdmissionReview: ${read.invalid}\n`);
        return;
      }
      const { review } = read;
      const { review: answer, decision } = decide(review);
      const label = { decision: ADMISSION_DECISIONS[decision] };
      options.metrics?.admissions.inc(label);
      if (answer.response.warnings?.length) options.metrics?.warned.inc(label);
      const meta = review.request?.object?.metadata;
      log.info(
        {
          namespace: text(review.request?.namespace),
          pod: text(meta?.name) ?? text(meta?.generateName),
          decision,
        },
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
