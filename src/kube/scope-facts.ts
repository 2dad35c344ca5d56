// Gathers what resolveScope decides on: flags, environment, the service-account directory and
// every kubeconfig source that is set or present. The only module of the scope that reads files.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KubeConfig, type User } from '@kubernetes/client-node';
import type { CredentialKind, KubeconfigView, LoadedKubeconfig, ScopeFacts, Sourced } from './scope.ts';

export const DEFAULT_SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface ScopeFlags {
  readonly kubeconfig?: Sourced<string> | undefined;
  readonly context?: Sourced<string> | undefined;
  readonly namespace?: Sourced<string> | undefined;
  /** Where the service-account token, ca.crt and namespace are; tests point it at a laid-out dir. */
  readonly serviceAccountDir?: string | undefined;
}

export function gatherScopeFacts(flags: ScopeFlags, env: NodeJS.ProcessEnv = process.env): ScopeFacts {
  const serviceAccountDir = flags.serviceAccountDir ?? DEFAULT_SERVICE_ACCOUNT_DIR;
  const homeKubeconfigPath = path.join(env.HOME ?? os.homedir(), '.kube', 'config');
  const kubeconfigs: { flag?: LoadedKubeconfig; env?: LoadedKubeconfig; home?: LoadedKubeconfig } = {};
  if (flags.kubeconfig !== undefined) kubeconfigs.flag = loadKubeconfig([flags.kubeconfig.value], false);
  if (env.KUBECONFIG)
    kubeconfigs.env = loadKubeconfig(env.KUBECONFIG.split(path.delimiter).filter(Boolean), true);
  if (fs.existsSync(homeKubeconfigPath)) kubeconfigs.home = loadKubeconfig([homeKubeconfigPath], false);

  return {
    flags: {
      ...(flags.kubeconfig ? { kubeconfig: flags.kubeconfig } : {}),
      ...(flags.context ? { context: flags.context } : {}),
      ...(flags.namespace ? { namespace: flags.namespace } : {}),
    },
    env: definedOnly({
      KUBECONFIG: env.KUBECONFIG,
      POD_NAMESPACE: env.POD_NAMESPACE,
      KUBERNETES_SERVICE_HOST: env.KUBERNETES_SERVICE_HOST,
      KUBERNETES_SERVICE_PORT: env.KUBERNETES_SERVICE_PORT,
    }),
    serviceAccount: {
      dir: serviceAccountDir,
      hasToken: fs.existsSync(path.join(serviceAccountDir, 'token')),
      hasCa: fs.existsSync(path.join(serviceAccountDir, 'ca.crt')),
      namespace: readIfExists(path.join(serviceAccountDir, 'namespace')),
    },
    kubeconfigs,
    homeKubeconfigPath,
  };
}

function definedOnly<T extends Record<string, string | undefined>>(o: T): { [K in keyof T]?: string } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as {
    [K in keyof T]?: string;
  };
}

function readIfExists(file: string): string | undefined {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}

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
    for (const c of kc.getClusters()) view.clusters[c.name] ??= { server: c.server };
    for (const u of kc.getUsers()) view.users[u.name] ??= { credentials: credentialKind(u) };
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

function credentialKind(user: User): CredentialKind {
  if (user.token) return 'token';
  if (user.certData || user.certFile) return 'client-certificate';
  if (user.exec) return 'exec';
  if (user.authProvider) return 'auth-provider';
  if (user.username && user.password) return 'basic-auth';
  return 'none';
}
