// Gathers what resolveScope decides on: flags, environment, the service-account directory and
// every kubeconfig source that is set or present. The only module of the scope that reads files.
// Kubeconfigs are read by client-node (kubeconfig-view.ts), imported only when one is set or
// present: in a Pod there is none, and the agent does not load client-node at all.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { definedOnly } from './defined-only.ts';
import { PROXY_ENV_NAMES } from './proxy.ts';
import { FILE_LIMITS, readRegularFile } from './regular-file.ts';
import type { LoadedKubeconfig, ScopeFacts, Sourced } from './scope.ts';

export const DEFAULT_SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

export interface ScopeFlags {
  readonly kubeconfig?: Sourced<string> | undefined;
  readonly context?: Sourced<string> | undefined;
  readonly namespace?: Sourced<string> | undefined;
  /** Where the service-account token, ca.crt and namespace are; tests point it at a laid-out dir. */
  readonly serviceAccountDir?: string | undefined;
}

export async function gatherScopeFacts(
  flags: ScopeFlags,
  env: NodeJS.ProcessEnv = process.env,
): Promise<ScopeFacts> {
  const serviceAccountDir = flags.serviceAccountDir ?? DEFAULT_SERVICE_ACCOUNT_DIR;
  const homeKubeconfigPath = path.join(env.HOME ?? os.homedir(), '.kube', 'config');
  const kubeconfigs: { flag?: LoadedKubeconfig; env?: LoadedKubeconfig; home?: LoadedKubeconfig } = {};
  const hasHome = fs.existsSync(homeKubeconfigPath);
  if (flags.kubeconfig !== undefined || env.KUBECONFIG || hasHome) {
    const { loadKubeconfig } = await import('./kubeconfig-view.ts');
    if (flags.kubeconfig !== undefined) kubeconfigs.flag = loadKubeconfig([flags.kubeconfig.value], false);
    if (env.KUBECONFIG)
      kubeconfigs.env = loadKubeconfig(env.KUBECONFIG.split(path.delimiter).filter(Boolean), true);
    if (hasHome) kubeconfigs.home = loadKubeconfig([homeKubeconfigPath], false);
  }

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
      ...Object.fromEntries(PROXY_ENV_NAMES.map((name) => [name, env[name]])),
    }),
    serviceAccount: {
      dir: serviceAccountDir,
      token: tokenState(path.join(serviceAccountDir, 'token')),
      namespace: readIfExists(path.join(serviceAccountDir, 'namespace')),
    },
    kubeconfigs,
    homeKubeconfigPath,
  };
}

function tokenState(file: string): 'missing' | 'empty' | 'present' {
  const content = readIfExists(file);
  if (content === undefined) return 'missing';
  return content.trim() === '' ? 'empty' : 'present';
}

function readIfExists(file: string): string | undefined {
  try {
    return readRegularFile(file, FILE_LIMITS.token).toString('utf8');
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw error;
  }
}
