// Reads kubeconfig files into the plain view the scope decides on, with client-node's parser and
// validation. Imported lazily by scope-facts.ts, only when a kubeconfig is set or present.
import fs from 'node:fs';
import path from 'node:path';
import { KubeConfig, type User } from '@kubernetes/client-node';
import { tokenFiles } from './kubeconfig-raw.ts';
import { assertRegularFile, FILE_LIMITS } from './regular-file.ts';
import type { CredentialKind, KubeconfigView, LoadedKubeconfig } from './scope.ts';

/**
 * Reads one kubeconfig, or a KUBECONFIG list merged as kubectl merges it: files that do not exist
 * are skipped (only in a list), and for every name and for current-context the first file that
 * sets it wins.
 */
export function loadKubeconfig(files: readonly string[], isList: boolean): LoadedKubeconfig {
  const used: string[] = [];
  const view = {
    files: used,
    currentContext: undefined as string | undefined,
    contexts: {} as Record<string, KubeconfigView['contexts'][string]>,
    clusters: {} as Record<string, KubeconfigView['clusters'][string]>,
    users: {} as Record<string, KubeconfigView['users'][string]>,
  };
  for (const file of files) {
    if (isList && !fs.existsSync(file)) continue;
    const kc = new KubeConfig();
    try {
      // client-node reads it with readFileSync: a FIFO there would block the process.
      assertRegularFile(file, FILE_LIMITS.config);
      kc.loadFromFile(file);
    } catch (error) {
      const reason =
        (error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message;
      return { ok: false, path: file, reason: `${file}: ${reason}` };
    }
    used.push(file);
    view.currentContext ??= kc.getCurrentContext() || undefined;
    for (const c of kc.getContexts()) {
      view.contexts[c.name] ??= { cluster: c.cluster, user: c.user, namespace: c.namespace || undefined };
    }
    for (const c of kc.getClusters())
      view.clusters[c.name] ??= { server: c.server, ...(c.proxyUrl ? { proxyUrl: c.proxyUrl } : {}) };
    const withTokenFile = tokenFiles(file);
    for (const u of kc.getUsers())
      view.users[u.name] ??= { credentials: credentialKind(u, withTokenFile.has(u.name)) };
  }
  if (used.length === 0) {
    return {
      ok: false,
      path: files.join(path.delimiter),
      reason: `none of the files exists: ${files.join(', ')}`,
    };
  }
  return { ok: true, view };
}

function credentialKind(user: User, hasTokenFile: boolean): CredentialKind {
  if (user.token?.trim()) return 'token';
  if (hasTokenFile) return 'token-file';
  if (user.certData || user.certFile) return 'client-certificate';
  if (user.exec) return 'exec';
  if (user.authProvider) return 'auth-provider';
  if (user.username && user.password) return 'basic-auth';
  return 'none';
}
