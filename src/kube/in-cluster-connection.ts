// The in-cluster connection: the API server from KUBERNETES_SERVICE_HOST/PORT, the CA and the
// bearer token from the projected service-account volume. No client-node here: this is the
// agent's production path, and it stays as small as the transport.
//
// kubelet rotates the token (and, more rarely, the CA) by swapping the volume's `..data` link.
// Each file is stat()ed on every request (one cheap syscall that follows the `token ->
// ..data/token` link) and re-read only when its inode, mtime or size changed: AtomicWriter gives
// every update a new inode, so a rotated token is used from the next request on, with no restart
// and no window of 401s. client-node's own `tokenFile` provider re-reads only every 60 s.
import fs from 'node:fs';
import path from 'node:path';
import { ConfigSyncError } from '../errors.ts';
import { FILE_LIMITS, readRegularFile } from './regular-file.ts';
import type { ConnectionSource } from './transport.ts';

/** A file re-read whenever kubelet replaces it. */
export class RotatingFile {
  private cached: { identity: string; content: string } | undefined;
  readonly file: string;
  private readonly maxBytes: number;

  constructor(file: string, maxBytes: number = FILE_LIMITS.pem) {
    this.file = file;
    this.maxBytes = maxBytes;
  }

  read(): string {
    const st = fs.statSync(this.file);
    const identity = `${st.ino}:${st.mtimeMs}:${st.size}`;
    if (this.cached?.identity === identity) return this.cached.content;
    const content = readRegularFile(this.file, this.maxBytes).toString('utf8');
    this.cached = { identity, content };
    return content;
  }
}

/**
 * The token in `file`, trimmed, for an Authorization header. An empty one would send the
 * request as system:anonymous, and a refusal would then point at the wrong identity: never
 * send one (kubelet may be mid-swap; the next request reads the file again).
 */
export function bearerToken(file: RotatingFile, what: string, fix: string): string {
  const token = file.read().trim();
  if (token !== '') return token;
  throw new ConfigSyncError('CS_AUTH_EMPTY_TOKEN', `${what} is empty: no request sent`, {
    hint: `config-sync never sends an anonymous request; ${fix}`,
    details: { path: file.file },
  });
}

export function inClusterConnection(server: string, serviceAccountDir: string): ConnectionSource {
  const url = new URL(server);
  const token = new RotatingFile(path.join(serviceAccountDir, 'token'), FILE_LIMITS.token);
  const ca = new RotatingFile(path.join(serviceAccountDir, 'ca.crt'));
  return async () => {
    const bearer = bearerToken(
      token,
      `the service-account token file ${token.file}`,
      'check the projected service-account token volume',
    );
    return { server: url, headers: { authorization: `Bearer ${bearer}` }, tls: { ca: ca.read() } };
  };
}
