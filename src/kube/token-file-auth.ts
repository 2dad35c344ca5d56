// Bearer-token authentication from a file that kubelet rotates (the projected service-account
// token), re-read as soon as it changes.
//
// client-node's own `tokenFile` provider re-reads the file every 60 s and keeps one token for all
// users. Here the file is stat()ed on every request (one cheap syscall that follows the
// `token -> ..data/token` link) and re-read only when its inode, mtime or size changed: kubelet's
// AtomicWriter gives every update a new inode, so a rotated token is used from the next request
// on, with no restart and no window of 401s.
import fs from 'node:fs';
import type { KubeConfig, User } from '@kubernetes/client-node';

/** client-node's Authenticator (not exported from its index). */
type Authenticator = Parameters<KubeConfig['addAuthenticator']>[0];

export const TOKEN_FILE_PROVIDER = 'config-sync-token-file';

interface Cached {
  readonly identity: string;
  readonly token: string;
}

export class RotatingTokenFileAuth implements Authenticator {
  private readonly cache = new Map<string, Cached>();
  /** How many times a token file was (re)read: observable for tests and `doctor`. */
  reads = 0;

  isAuthProvider(user: User): boolean {
    return user.authProvider?.name === TOKEN_FILE_PROVIDER;
  }

  async applyAuthentication(user: User, opts: { headers?: Record<string, unknown> }): Promise<void> {
    const file = user.authProvider?.config?.path as string | undefined;
    if (!file) return;
    opts.headers ??= {};
    opts.headers.Authorization = `Bearer ${this.token(file)}`;
  }

  token(file: string): string {
    const st = fs.statSync(file);
    const identity = `${st.ino}:${st.mtimeMs}:${st.size}`;
    const cached = this.cache.get(file);
    if (cached?.identity === identity) return cached.token;
    const token = fs.readFileSync(file, 'utf8').trim();
    this.reads += 1;
    this.cache.set(file, { identity, token });
    return token;
  }
}
