import type https from 'node:https';
import { type Cluster, KubeConfig } from '@kubernetes/client-node';
import { ConfigSyncError } from '../errors.ts';
import { type ExecCluster, type ExecConfig, execCredentialSource } from './exec-credential.ts';
import { bearerToken, RotatingFile } from './in-cluster-connection.ts';
import { execExtensionOf, tokenFileOf } from './kubeconfig-raw.ts';
import { FILE_LIMITS, readRegularFile } from './regular-file.ts';
import type { Connection, ConnectionSource } from './transport.ts';

/** A KUBECONFIG list merged as kubectl merges it: the first file that defines a name wins. */
function mergedKubeConfig(files: readonly string[], context: string): KubeConfig {
  const [first, ...rest] = files;
  if (first === undefined) throw new Error('kubeconfig scope without a file');
  const kc = new KubeConfig();
  kc.loadFromFile(first);
  for (const file of rest) {
    const more = new KubeConfig();
    more.loadFromFile(file);
    for (const c of more.getClusters()) if (!kc.getCluster(c.name)) kc.addCluster(c);
    for (const u of more.getUsers()) if (!kc.getUser(u.name)) kc.addUser(u);
    for (const c of more.getContexts()) if (!kc.getContextObject(c.name)) kc.addContext(c);
  }
  kc.setCurrentContext(context);
  return kc;
}

/**
 * The cluster as an exec plugin is told of it (provideClusterInfo), as client-go tells it: with
 * the cluster's exec extension from the kubeconfig files as `config`.
 */
function execCluster(cluster: Cluster, files: readonly string[]): ExecCluster {
  // client-go reads a certificate-authority file into the data it hands over.
  const ca = cluster.caData
    ? Buffer.from(cluster.caData, 'base64')
    : cluster.caFile
      ? readCaFile(cluster.caFile, cluster.name)
      : undefined;
  const config = execExtensionOf(files, cluster.name);
  return {
    server: cluster.server,
    ...(cluster.tlsServerName ? { 'tls-server-name': cluster.tlsServerName } : {}),
    ...(cluster.skipTLSVerify ? { 'insecure-skip-tls-verify': true } : {}),
    ...(ca ? { 'certificate-authority-data': ca.toString('base64') } : {}),
    ...(cluster.proxyUrl ? { 'proxy-url': cluster.proxyUrl } : {}),
    ...(config === undefined ? {} : { config }),
  };
}

function readCaFile(file: string, cluster: string): Buffer {
  try {
    return readRegularFile(file, FILE_LIMITS.pem);
  } catch (error) {
    throw new ConfigSyncError(
      'CS_SCOPE_KUBECONFIG_UNREADABLE',
      `cannot read the certificate-authority file ${file} of kubeconfig cluster "${cluster}" (${(error as NodeJS.ErrnoException).code ?? 'unreadable'}), which its user's exec plugin asks for (provideClusterInfo)`,
      { hint: 'fix the path in the kubeconfig, or make the file readable', details: { path: file } },
    );
  }
}

export function kubeconfigConnection(files: readonly string[], context: string): ConnectionSource {
  const kc = mergedKubeConfig(files, context);
  const cluster = kc.getCurrentCluster();
  if (!cluster) throw new Error(`context "${context}" has no cluster`);
  const server = new URL(cluster.server);
  const current = kc.getCurrentUser();
  const userName = current?.name;
  // The exec plugin is taken out of client-node's hands: the copy it keeps has none.
  const exec = current?.exec as ExecConfig | undefined;
  const execCredential =
    exec && userName
      ? execCredentialSource(
          exec,
          userName,
          exec.provideClusterInfo ? execCluster(cluster, files) : undefined,
        )
      : undefined;
  if (exec && current) kc.users = kc.users.map((u) => (u === current ? { ...u, exec: undefined } : u));
  // The proxy-url is the scope's (proxy.ts) and the transport tunnels through it itself:
  // client-node would build a proxy agent of its own on every request.
  if (cluster.proxyUrl) {
    const { proxyUrl: _tunnelledByTheTransport, ...direct } = cluster;
    kc.clusters = kc.clusters.map((c) => (c === cluster ? direct : c));
  }
  const tokenFilePath = userName && !current?.token ? tokenFileOf(files, userName) : undefined;
  const tokenFile = tokenFilePath ? new RotatingFile(tokenFilePath) : undefined;
  return async (): Promise<Connection> => {
    const options: https.RequestOptions & { headers: Record<string, string> } = { headers: {} };
    await kc.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    // Trimmed as kubectl trims them: a `token-file` that ends with a newline is read as is by
    // client-node, and a header value with a newline is refused before it is sent.
    for (const [k, v] of Object.entries(options.headers)) if (v !== undefined) headers[k] = String(v).trim();
    if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    if (tokenFile) {
      headers.Authorization = `Bearer ${bearerToken(
        tokenFile,
        `the tokenFile ${tokenFile.file} of kubeconfig user "${userName}"`,
        'write the token into that file',
      )}`;
    }
    const fromPlugin = execCredential ? await execCredential.current() : undefined;
    if (fromPlugin?.token) headers.Authorization = `Bearer ${fromPlugin.token}`;
    return {
      server,
      headers,
      tls: {
        ca: options.ca as Buffer | undefined,
        cert: fromPlugin?.clientCertificateData ?? (options.cert as Buffer | undefined),
        key: fromPlugin?.clientKeyData ?? (options.key as Buffer | undefined),
        pfx: options.pfx as Buffer | undefined,
        passphrase: options.passphrase,
        rejectUnauthorized: options.rejectUnauthorized,
        servername: options.servername,
      },
      ...(execCredential && fromPlugin
        ? { credentialsRefused: () => execCredential.refused(fromPlugin) }
        : {}),
    };
  };
}
