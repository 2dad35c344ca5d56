// A real Kubernetes control plane for tests: etcd, kube-apiserver with RBAC and ServiceAccount
// tokens, and kube-controller-manager, all on 127.0.0.1, from binaries built by build.sh.
// There is no kubelet and no scheduler here: Pods are created and stay Pending, which is all the
// agent needs (it reads Pod objects, it does not run them). test/cluster/node.ts adds a real node
// (kubelet, containerd, kube-scheduler) to a control plane, with the credentials made here. Flags follow controller-runtime envtest's
// defaultArgs(), plus what envtest leaves out because it runs no controller-manager.
//
// Start-up, step by step:
//  (1) a fresh data directory, marked with our PID so a later run can sweep it if we are killed;
//  (2) free loopback ports, a ServiceAccount signing key and an admin token, all per run;
//  (3) etcd, waited on through /health;
//  (4) kube-apiserver, which writes its own self-signed serving certificate (and the CA that
//      signed it) into --cert-dir; that bundle becomes the CA of every client; waited on /readyz;
//  (5) the admin kubeconfig;
//  (6) kube-controller-manager, waited on /healthz and then on the `default` ServiceAccount of
//      the `default` namespace, the sign that its controllers really run.
// Any failure stops what was started and throws with the tail of each component's log.
import { execFileSync } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { ControlPlaneAssets } from './assets.ts';
import { Component } from './component.ts';
import { freeLoopbackPort } from './ports.ts';
import { httpsGet } from './probe.ts';
import { waitFor } from './wait.ts';

/** Everything a test needs to reach the control plane; plain data, so it can cross processes. */
export interface ControlPlaneInfo {
  /** https://127.0.0.1:<port> */
  readonly server: string;
  readonly host: string;
  readonly port: number;
  /** PEM bundle that signs the apiserver's serving certificate. */
  readonly caFile: string;
  readonly caPem: string;
  /** A `system:masters` bearer token. */
  readonly adminToken: string;
  readonly adminKubeconfig: string;
  readonly serviceAccountIssuer: string;
  readonly kubectl: string;
  readonly dataDir: string;
  readonly pids: Readonly<Record<string, number>>;
  /** Credentials for a node of this control plane (test/cluster/node.ts). */
  readonly node: NodeCredentials;
}

/** What a node needs from the control plane to join it as a real cluster's node does. */
export interface NodeCredentials {
  /** The node's name; its token authenticates as system:node:<name> in group system:nodes. */
  readonly name: string;
  readonly kubeletToken: string;
  /** A token for kube-scheduler (user system:kube-scheduler, bound by the bootstrap RBAC). */
  readonly schedulerToken: string;
  /** The CA that signed the apiserver's kubelet client certificate: kubelet's x509 client CA. */
  readonly kubeletClientCaFile: string;
}

export const NODE_NAME = 'config-sync-node';

export interface StartOptions {
  readonly assets: ControlPlaneAssets;
  /** Parent of the data directory; the OS temp dir by default. */
  readonly baseDir?: string;
  /** Keep the data directory (logs, certs) after stop, for debugging. */
  readonly keepData?: boolean;
  readonly log?: (line: string) => void;
  /** More kube-apiserver flags, after the harness's own (e.g. `--goaway-chance=0.02`). */
  readonly apiServerArgs?: readonly string[];
}

const DIR_PREFIX = 'config-sync-cp-';
const OWNER_FILE = 'owner.pid';
const PODS_SUFFIX = '-pods';
export const SERVICE_ACCOUNT_ISSUER = 'https://kubernetes.default.svc.cluster.local';

/**
 * Where the harness lays out the simulated Pods of a control plane (test/cluster/app.ts): beside
 * its data directory, not in it, since the data directory is private to root (0700: it holds the
 * cluster's keys) and an agent run as a non-root UID must reach its Pod's files. Each Pod's
 * directory holds a token; it goes with the data directory when the plane stops or is swept.
 */
export function podsDirOf(info: { readonly dataDir: string }): string {
  return `${info.dataDir}${PODS_SUFFIX}`;
}

/** Removes data directories left by harness runs whose process no longer exists. */
function sweepStaleDataDirs(baseDir: string): void {
  for (const name of readdirSync(baseDir)) {
    if (!name.startsWith(DIR_PREFIX)) continue;
    const dir = path.join(baseDir, name);
    let owner: number;
    try {
      owner = Number(readFileSync(path.join(dir, OWNER_FILE), 'utf8'));
    } catch {
      continue;
    }
    if (owner > 0 && !isAlive(owner)) rmSync(dir, { recursive: true, force: true });
  }
  // A Pods directory whose data directory is gone (stopped, or swept just above) goes too.
  for (const name of readdirSync(baseDir)) {
    if (!name.startsWith(DIR_PREFIX) || !name.endsWith(PODS_SUFFIX)) continue;
    if (!existsSync(path.join(baseDir, name.slice(0, -PODS_SUFFIX.length))))
      rmSync(path.join(baseDir, name), { recursive: true, force: true });
  }
}

/** Whether process `pid` exists (EPERM: it does, but is not ours to signal). */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export const SERVICE_CIDR = '10.0.0.0/24';
/** The `kubernetes` Service's ClusterIP: the first address of the service range. */
export const KUBERNETES_SERVICE_IP = '10.0.0.1';

/**
 * A CA and the client certificate the apiserver presents to kubelets (exec, logs, port-forward),
 * made with openssl: Node's crypto signs nothing X.509. The certificate's group system:masters
 * passes kubelet's SubjectAccessReview without a binding of our own.
 */
function makeKubeletClientCertificate(dataDir: string): { ca: string; cert: string; key: string } {
  const dir = path.join(dataDir, 'kubelet-client');
  mkdirSync(dir);
  const f = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) =>
    execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  openssl(
    'req',
    '-x509',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-days',
    '7',
    '-subj',
    '/CN=config-sync-test-kubelet-client-ca',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.crt'),
  );
  openssl(
    'req',
    '-newkey',
    'rsa:2048',
    '-nodes',
    '-subj',
    '/O=system:masters/CN=kube-apiserver-kubelet-client',
    '-keyout',
    f('client.key'),
    '-out',
    f('client.csr'),
  );
  openssl(
    'x509',
    '-req',
    '-in',
    f('client.csr'),
    '-CA',
    f('ca.crt'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '7',
    '-out',
    f('client.crt'),
  );
  return { ca: f('ca.crt'), cert: f('client.crt'), key: f('client.key') };
}

export class ControlPlane {
  readonly info: ControlPlaneInfo;
  private readonly components: Component[];
  private readonly keepData: boolean;
  private readonly onExit: () => void;
  private stopped = false;

  private constructor(info: ControlPlaneInfo, components: Component[], keepData: boolean) {
    this.info = info;
    this.components = components;
    this.keepData = keepData;
    // Last resort when the process ends without stop(): kill synchronously. (A SIGKILLed
    // process runs no handler; setpriv's parent-death signal covers that case.)
    this.onExit = () => {
      for (const c of this.components) c.killNow();
    };
    process.once('exit', this.onExit);
  }

  static async start(options: StartOptions): Promise<ControlPlane> {
    const log = options.log ?? (() => {});
    const { assets } = options;
    const baseDir = options.baseDir ?? os.tmpdir();
    const t0 = Date.now();

    // (1)
    sweepStaleDataDirs(baseDir);
    const dataDir = mkdtempSync(path.join(baseDir, DIR_PREFIX));
    writeFileSync(path.join(dataDir, OWNER_FILE), String(process.pid));
    const certDir = path.join(dataDir, 'apiserver-certs');
    const kcmCertDir = path.join(dataDir, 'kcm-certs');
    mkdirSync(certDir);
    mkdirSync(kcmCertDir);

    // (2)
    const [etcdClientPort, etcdPeerPort, apiserverPort, kcmPort] = (await Promise.all(
      [0, 1, 2, 3].map(() => freeLoopbackPort()),
    )) as [number, number, number, number];
    const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const saKeyFile = path.join(dataDir, 'sa.key');
    const saPubFile = path.join(dataDir, 'sa.pub');
    writeFileSync(saKeyFile, privateKey.export({ type: 'pkcs8', format: 'pem' }), { mode: 0o600 });
    writeFileSync(saPubFile, publicKey.export({ type: 'spki', format: 'pem' }));
    const adminToken = randomBytes(24).toString('hex');
    const kubeletToken = randomBytes(24).toString('hex');
    const schedulerToken = randomBytes(24).toString('hex');
    const tokenFile = path.join(dataDir, 'tokens.csv');
    writeFileSync(
      tokenFile,
      [
        `${adminToken},config-sync-test-admin,config-sync-test-admin,"system:masters"`,
        `${kubeletToken},system:node:${NODE_NAME},system:node:${NODE_NAME},"system:nodes"`,
        `${schedulerToken},system:kube-scheduler,system:kube-scheduler`,
        '',
      ].join('\n'),
      { mode: 0o600 },
    );
    const kubeletClient = makeKubeletClientCertificate(dataDir);

    const components: Component[] = [];
    const failWith = async (error: unknown): Promise<never> => {
      for (const c of [...components].reverse()) await c.stop(2000);
      const tails = components.map((c) => `--- ${c.name} (${c.logFile}) ---\n${c.logTail()}`).join('\n');
      throw new Error(
        `control plane failed to start: ${(error as Error).message}\n${tails}\n(data kept in ${dataDir})`,
        {
          cause: error,
        },
      );
    };

    try {
      // (3)
      const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
      const etcd = Component.start({
        name: 'etcd',
        binary: assets.etcd,
        logFile: path.join(dataDir, 'etcd.log'),
        args: [
          `--data-dir=${path.join(dataDir, 'etcd')}`,
          `--listen-client-urls=${etcdUrl}`,
          `--advertise-client-urls=${etcdUrl}`,
          `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
          `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
          `--initial-cluster=default=http://127.0.0.1:${etcdPeerPort}`,
          '--unsafe-no-fsync=true',
          '--log-level=warn',
        ],
      });
      components.push(etcd);
      await waitFor(
        async () => {
          const res = await fetch(`${etcdUrl}/health`);
          return res.ok && ((await res.json()) as { health?: string }).health === 'true';
        },
        { what: 'etcd /health', abortIf: () => etcd.exitReason() },
      );
      log(`etcd ready on ${etcdUrl} (${Date.now() - t0} ms)`);

      // (4)
      const apiserver = Component.start({
        name: 'kube-apiserver',
        binary: assets.kubeApiserver,
        logFile: path.join(dataDir, 'kube-apiserver.log'),
        args: [
          `--etcd-servers=${etcdUrl}`,
          `--secure-port=${apiserverPort}`,
          '--bind-address=127.0.0.1',
          '--advertise-address=127.0.0.1',
          `--cert-dir=${certDir}`,
          // As a real cluster: a node may read only what its own Pods use.
          '--authorization-mode=Node,RBAC',
          '--enable-admission-plugins=NodeRestriction',
          `--token-auth-file=${tokenFile}`,
          `--kubelet-client-certificate=${kubeletClient.cert}`,
          `--kubelet-client-key=${kubeletClient.key}`,
          // The node's InternalIP, never its name: a name would be looked up in the machine's DNS.
          '--kubelet-preferred-address-types=InternalIP',
          // A webhook's Service is reached at its endpoints (a Pod on the node's bridge), never by
          // its DNS name: there is no cluster DNS, and the name would go to the machine's resolver.
          '--enable-aggregator-routing=true',
          `--service-account-issuer=${SERVICE_ACCOUNT_ISSUER}`,
          `--service-account-key-file=${saPubFile}`,
          `--service-account-signing-key-file=${saKeyFile}`,
          // Without a node, bookkeeping only. With one (test/cluster/node.ts), the `kubernetes`
          // Service's 10.0.0.1:443 is forwarded to this port on the node's bridge.
          `--service-cluster-ip-range=${SERVICE_CIDR}`,
          '--allow-privileged=true',
          '--profiling=false',
          '--v=1',
          ...(options.apiServerArgs ?? []),
        ],
      });
      components.push(apiserver);
      const caFile = path.join(certDir, 'apiserver.crt');
      await waitFor(() => existsSync(caFile) || undefined, {
        what: 'kube-apiserver serving certificate',
        abortIf: () => apiserver.exitReason(),
      });
      const caPem = readFileSync(caFile, 'utf8');
      const server = `https://127.0.0.1:${apiserverPort}`;
      await waitFor(
        async () => (await httpsGet(`${server}/readyz`, { ca: caPem, token: adminToken })).status === 200,
        {
          what: 'kube-apiserver /readyz',
          timeoutMs: 90_000,
          intervalMs: 250,
          abortIf: () => apiserver.exitReason(),
        },
      );
      log(`kube-apiserver ready on ${server} (${Date.now() - t0} ms)`);

      // (5)
      const adminKubeconfig = path.join(dataDir, 'admin.kubeconfig');
      writeKubeconfig(adminKubeconfig, {
        server,
        caPem,
        token: adminToken,
        user: 'admin',
        namespace: undefined,
      });

      // (6)
      const kcm = Component.start({
        name: 'kube-controller-manager',
        binary: assets.kubeControllerManager,
        logFile: path.join(dataDir, 'kube-controller-manager.log'),
        args: [
          `--kubeconfig=${adminKubeconfig}`,
          `--authentication-kubeconfig=${adminKubeconfig}`,
          `--authorization-kubeconfig=${adminKubeconfig}`,
          `--service-account-private-key-file=${saKeyFile}`,
          `--root-ca-file=${caFile}`,
          '--use-service-account-credentials=true',
          '--controllers=*',
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          `--secure-port=${kcmPort}`,
          `--cert-dir=${kcmCertDir}`,
          '--v=1',
        ],
      });
      components.push(kcm);
      const kcmCa = path.join(kcmCertDir, 'kube-controller-manager.crt');
      await waitFor(
        async () =>
          existsSync(kcmCa) &&
          (await httpsGet(`https://127.0.0.1:${kcmPort}/healthz`, { ca: readFileSync(kcmCa, 'utf8') }))
            .status === 200,
        { what: 'kube-controller-manager /healthz', timeoutMs: 60_000, abortIf: () => kcm.exitReason() },
      );
      await waitFor(
        async () =>
          (
            await httpsGet(`${server}/api/v1/namespaces/default/serviceaccounts/default`, {
              ca: caPem,
              token: adminToken,
            })
          ).status === 200,
        {
          what: 'the default ServiceAccount (controller-manager running its controllers)',
          timeoutMs: 60_000,
          abortIf: () => kcm.exitReason(),
        },
      );
      log(`kube-controller-manager ready (${Date.now() - t0} ms)`);

      const info: ControlPlaneInfo = {
        server,
        host: '127.0.0.1',
        port: apiserverPort,
        caFile,
        caPem,
        adminToken,
        adminKubeconfig,
        serviceAccountIssuer: SERVICE_ACCOUNT_ISSUER,
        kubectl: assets.kubectl,
        dataDir,
        pids: Object.fromEntries(components.map((c) => [c.name, c.pid])),
        node: { name: NODE_NAME, kubeletToken, schedulerToken, kubeletClientCaFile: kubeletClient.ca },
      };
      return new ControlPlane(info, components, options.keepData ?? false);
    } catch (error) {
      return failWith(error);
    }
  }

  /**
   * Kills the kube-apiserver (SIGKILL: a crash, not a graceful shutdown that drains watches)
   * and starts it again on the same port, certificates and etcd, as a node's static Pod would
   * be restarted; resolves once it answers /readyz. `whileDown` runs in between.
   */
  async restartApiserver(whileDown: () => Promise<void> = async () => {}): Promise<void> {
    const index = this.components.findIndex((c) => c.name === 'kube-apiserver');
    const old = this.components[index];
    if (!old) throw new Error('no kube-apiserver in this control plane');
    old.killNow();
    await old.stop(0);
    await whileDown();
    const fresh = Component.start(old.spec);
    this.components[index] = fresh;
    await waitFor(
      async () =>
        (await httpsGet(`${this.info.server}/readyz`, { ca: this.info.caPem, token: this.info.adminToken }))
          .status === 200,
      {
        what: 'kube-apiserver /readyz after a restart',
        timeoutMs: 90_000,
        abortIf: () => fresh.exitReason(),
      },
    );
  }

  /** Stops the components in reverse start order and removes the data directory. Idempotent. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    for (const c of [...this.components].reverse()) await c.stop();
    process.removeListener('exit', this.onExit);
    if (this.keepData) return;
    rmSync(this.info.dataDir, { recursive: true, force: true });
    rmSync(podsDirOf(this.info), { recursive: true, force: true });
  }
}

export interface KubeconfigSpec {
  readonly server: string;
  readonly caPem: string;
  readonly token: string;
  readonly user: string;
  readonly namespace: string | undefined;
}

/**
 * Writes a single-context kubeconfig. JSON is valid YAML, and both kubectl and client-node read
 * it; the CA is embedded so the file stands alone.
 */
export function writeKubeconfig(file: string, spec: KubeconfigSpec): void {
  const context: Record<string, string> = { cluster: 'config-sync-test', user: spec.user };
  if (spec.namespace) context.namespace = spec.namespace;
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [
      {
        name: 'config-sync-test',
        cluster: {
          server: spec.server,
          'certificate-authority-data': Buffer.from(spec.caPem).toString('base64'),
        },
      },
    ],
    users: [{ name: spec.user, user: { token: spec.token } }],
    contexts: [{ name: spec.user, context }],
    'current-context': spec.user,
  };
  writeFileSync(file, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
}
