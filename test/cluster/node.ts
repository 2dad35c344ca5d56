// A real node for a test control plane: containerd (with Debian's runc and CNI plugins),
// kube-scheduler and kubelet, registered as system:node:<name>, running real Pods from images
// built here (test/cluster/node-images.sh). Needs root on Linux.
//
// Start-up, step by step:
//  (1) take the machine-wide lock (kubelet and containerd write outside their own directories,
//      so one node fits a machine at a time) and sweep whatever a killed earlier run left;
//  (2) the bridge (its MAC address set: BRIDGE_MAC), with the node's address and the
//      `kubernetes` Service's ClusterIP on it, and a TCP forwarder from that ClusterIP:443 to the
//      apiserver (there is no kube-proxy); Pods get a route to the Pod and Service ranges only,
//      and the host does not forward, so nothing a Pod sends leaves this machine;
//  (3) containerd with its own config, root, state and socket; the images imported into it;
//  (4) kube-scheduler;
//  (5) kubelet with the node identity, its own root directory (a shared mount, so that its
//      mounts propagate to a container that asks: the node agent), a cgroup root of its own, and a
//      serving port the apiserver reaches for exec and logs; waited on until the Node is Ready.
// stop() (and the sweep at the next start) undoes all of it: Pods deleted through the API so
// kubelet tears them down, then every process, mount, cgroup, the bridge and the directories.
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { Component } from './component.ts';
import {
  type ControlPlaneInfo,
  isAlive,
  KUBERNETES_SERVICE_IP,
  SERVICE_CIDR,
  writeKubeconfig,
} from './control-plane.ts';
import { type Forwarder, forward } from './forwarder.ts';
import { freeLoopbackPort } from './ports.ts';
import { waitFor } from './wait.ts';

/** Everything the node's harness made lives here (fixed: a later run must find a killed one's). */
export const NODE_BASE = '/var/lib/config-sync-node';
const LOCK_FILE = '/run/config-sync-node.lock';
const BRIDGE = 'cs-node0';
/**
 * The bridge's own MAC address, set when it is made. A bridge whose address the kernel chose
 * takes the lowest address of its ports, and changes it whenever a Pod's veth joins or leaves:
 * every Pod that had resolved the node's address then sends to a MAC nobody has, until its ARP
 * entry expires (15 to 45 s). Measured: a Pod cut off from the API forwarder, OPA and kubelet's
 * probes for 20 to 40 s after the Pods of an earlier rollout were torn down. A set address
 * stays. Locally administered (0x02), so it is no vendor's.
 */
export const BRIDGE_MAC = '02:63:73:00:00:01';

/** The bridge's MAC address as the kernel has it now. */
export function bridgeMac(): string {
  return fs.readFileSync(`/sys/class/net/${BRIDGE}/address`, 'utf8').trim();
}
const POD_SUBNET = '10.77.0.0/24';
/** The bridge's host address: the node's InternalIP and every Pod's gateway. */
export const NODE_IP = '10.77.0.1';
const CNI_NETWORK = 'config-sync-test';
const CGROUP_ROOT = 'config-sync-node';
const CGROUP_V1 = '/sys/fs/cgroup';
/** Directories kubelet and containerd write outside their roots; removed at stop if we made them. */
const OUTSIDE_DIRS = [
  '/var/lib/kubelet',
  '/var/lib/cni',
  '/run/netns',
  '/var/log/pods',
  '/var/log/containers',
  '/run/containerd',
  `/var/lib/cni/networks/${CNI_NETWORK}`,
];

export interface NodeAssets {
  readonly kubelet: string;
  readonly kubeScheduler: string;
  readonly containerd: string;
  readonly ctr: string;
  /** The directory of containerd-shim-runc-v2, put first on containerd's PATH. */
  readonly binDir: string;
}

export interface NodeInfo {
  readonly name: string;
  readonly ip: string;
  readonly containerdSocket: string;
  readonly ctr: string;
  readonly kubeletPid: number;
  readonly baseDir: string;
}

/**
 * Why this machine cannot run the node, or undefined when it can. Missing Debian packages do not
 * count where apt-get can install them: every caller that starts a node runs ensureNodePackages
 * (test/cluster/node-packages.sh) first. Counting them made a brand-new machine skip every
 * real-node test, since the check ran before the install.
 */
export function nodeUnsupported(): string | undefined {
  if (process.platform !== 'linux') return `the real node needs Linux (this is ${process.platform})`;
  if (process.getuid?.() !== 0) return 'the real node needs root (kubelet, containerd, runc, the bridge)';
  if (!fs.existsSync('/usr/lib/cni/bridge') && !fs.existsSync('/usr/bin/apt-get'))
    return 'the CNI plugins are missing and there is no apt-get to install them (test/cluster/node-packages.sh)';
  return undefined;
}

function run(cmd: string, args: string[]): string {
  return execFileSync(cmd, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function tryRun(cmd: string, args: string[]): void {
  spawnSync(cmd, args, { stdio: 'ignore' });
}

export class KubeNode {
  readonly info: NodeInfo;
  /** Directories outside NODE_BASE that were not there before this node started. */
  readonly madeOutside: readonly string[];
  private readonly components: Component[];
  private readonly forwarder: Forwarder;
  private readonly plane: ControlPlaneInfo;
  private readonly onExit: () => void;
  private stopped = false;

  private constructor(
    info: NodeInfo,
    plane: ControlPlaneInfo,
    components: Component[],
    forwarder: Forwarder,
    madeOutside: readonly string[],
  ) {
    this.info = info;
    this.madeOutside = madeOutside;
    this.plane = plane;
    this.components = components;
    this.forwarder = forwarder;
    this.onExit = () => {
      for (const c of this.components) c.killNow();
    };
    process.once('exit', this.onExit);
  }

  static async start(options: {
    plane: ControlPlaneInfo;
    assets: NodeAssets;
    imagesDir: string;
    log?: (line: string) => void;
  }): Promise<KubeNode> {
    const { plane, assets } = options;
    const log = options.log ?? (() => {});
    const t0 = Date.now();

    // (1)
    takeLock();
    sweep();
    const made = OUTSIDE_DIRS.filter((d) => !fs.existsSync(d));
    fs.mkdirSync(NODE_BASE, { recursive: true });
    fs.writeFileSync(path.join(NODE_BASE, 'made-outside.json'), JSON.stringify(made));
    const dir = (...p: string[]) => path.join(NODE_BASE, ...p);
    for (const d of ['containerd/root', 'containerd/state', 'cni/conf', 'kubelet', 'kubelet-pki', 'pod-logs'])
      fs.mkdirSync(dir(d), { recursive: true });

    const components: Component[] = [];
    let forwarder: Forwarder | undefined;
    try {
      // kubelet's root dir as a shared mount, as it is on a node whose / is shared (systemd makes
      // it so): the mounts kubelet makes under it (Secret volumes' tmpfs, subPath files' binds)
      // then propagate into a container that mounts the dir with mountPropagation
      // HostToContainer, as the node agent's DaemonSet does. This machine's / is private, where
      // such a container would see none of them. sweep() unmounts it with the rest.
      run('mount', ['--bind', dir('kubelet'), dir('kubelet')]);
      run('mount', ['--make-rshared', dir('kubelet')]);
      // (2)
      run('ip', ['link', 'add', BRIDGE, 'address', BRIDGE_MAC, 'type', 'bridge']);
      run('ip', ['addr', 'add', `${NODE_IP}/24`, 'dev', BRIDGE]);
      run('ip', ['addr', 'add', `${KUBERNETES_SERVICE_IP}/32`, 'dev', BRIDGE]);
      run('ip', ['link', 'set', BRIDGE, 'up']);
      forwarder = await forward(KUBERNETES_SERVICE_IP, 443, plane.host, plane.port);
      fs.writeFileSync(
        dir('cni/conf/10-config-sync.conflist'),
        JSON.stringify({
          cniVersion: '1.0.0',
          name: CNI_NETWORK,
          plugins: [
            {
              type: 'bridge',
              bridge: BRIDGE,
              isGateway: true,
              ipMasq: false,
              hairpinMode: true,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: POD_SUBNET, gateway: NODE_IP, rangeStart: '10.77.0.10' }]],
                // No default route: a Pod reaches its own bridge and the Service range, nothing else.
                routes: [{ dst: SERVICE_CIDR }],
              },
            },
            { type: 'loopback' },
          ],
        }),
      );

      // (3)
      const socket = dir('containerd/containerd.sock');
      fs.writeFileSync(
        dir('containerd/config.toml'),
        [
          'version = 3',
          `root = "${dir('containerd/root')}"`,
          `state = "${dir('containerd/state')}"`,
          '[grpc]',
          `  address = "${socket}"`,
          '[ttrpc]',
          `  address = "${socket}.ttrpc"`,
          '[debug]',
          `  address = "${socket}.debug"`,
          "[plugins.'io.containerd.cri.v1.images']",
          "  snapshotter = 'overlayfs'",
          "[plugins.'io.containerd.cri.v1.images'.pinned_images]",
          "  sandbox = 'registry.k8s.io/pause:3.10'",
          "[plugins.'io.containerd.cri.v1.runtime']",
          // This machine lacks CAP_SYS_RESOURCE: runc may not lower oom_score_adj below ours.
          '  restrict_oom_score_adj = true',
          "[plugins.'io.containerd.cri.v1.runtime'.cni]",
          "  bin_dirs = ['/usr/lib/cni']",
          `  conf_dir = "${dir('cni/conf')}"`,
          "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]",
          "  runtime_type = 'io.containerd.runc.v2'",
          "[plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]",
          "  BinaryName = '/usr/sbin/runc'",
          '',
        ].join('\n'),
      );
      const path_ = `${assets.binDir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin`;
      const containerd = Component.start({
        name: 'containerd',
        binary: assets.containerd,
        args: ['--config', dir('containerd/config.toml'), '--log-level', 'warn'],
        logFile: dir('containerd.log'),
        env: { PATH: path_ },
      });
      components.push(containerd);
      await waitFor(() => fs.existsSync(socket) || undefined, {
        what: 'the containerd socket',
        abortIf: () => containerd.exitReason(),
      });
      for (const image of fs.readdirSync(options.imagesDir).filter((f) => f.endsWith('.tar'))) {
        run(assets.ctr, [
          '-a',
          socket,
          '-n',
          'k8s.io',
          'images',
          'import',
          path.join(options.imagesDir, image),
        ]);
      }
      log(`containerd ready, images imported (${Date.now() - t0} ms)`);

      // (4)
      const schedulerKubeconfig = dir('scheduler.kubeconfig');
      writeKubeconfig(schedulerKubeconfig, {
        server: plane.server,
        caPem: plane.caPem,
        token: plane.node.schedulerToken,
        user: 'system:kube-scheduler',
        namespace: undefined,
      });
      const scheduler = Component.start({
        name: 'kube-scheduler',
        binary: assets.kubeScheduler,
        args: [
          `--kubeconfig=${schedulerKubeconfig}`,
          `--authentication-kubeconfig=${schedulerKubeconfig}`,
          `--authorization-kubeconfig=${schedulerKubeconfig}`,
          '--leader-elect=false',
          '--bind-address=127.0.0.1',
          `--secure-port=${await freeLoopbackPort()}`,
          '--v=1',
        ],
        logFile: dir('kube-scheduler.log'),
      });
      components.push(scheduler);

      // (5)
      const kubeletKubeconfig = dir('kubelet.kubeconfig');
      writeKubeconfig(kubeletKubeconfig, {
        server: plane.server,
        caPem: plane.caPem,
        token: plane.node.kubeletToken,
        user: `system:node:${plane.node.name}`,
        namespace: undefined,
      });
      for (const hierarchy of cgroupHierarchies())
        fs.mkdirSync(path.join(hierarchy, CGROUP_ROOT), { recursive: true });
      fs.writeFileSync(
        dir('kubelet-config.json'),
        JSON.stringify({
          apiVersion: 'kubelet.config.k8s.io/v1beta1',
          kind: 'KubeletConfiguration',
          address: NODE_IP,
          port: await freeLoopbackPort(),
          readOnlyPort: 0,
          healthzBindAddress: '127.0.0.1',
          healthzPort: await freeLoopbackPort(),
          authentication: {
            anonymous: { enabled: false },
            webhook: { enabled: true },
            x509: { clientCAFile: plane.node.kubeletClientCaFile },
          },
          authorization: { mode: 'Webhook' },
          containerRuntimeEndpoint: `unix://${socket}`,
          cgroupDriver: 'cgroupfs',
          cgroupRoot: `/${CGROUP_ROOT}`,
          failCgroupV1: false,
          failSwapOn: false,
          // kubelet's own propagation, as fast as a real cluster can be set: Watch, and a pod
          // sync every second (the default 1m plus cache TTL is what users usually see).
          configMapAndSecretChangeDetectionStrategy: 'Watch',
          syncFrequency: '1s',
          evictionHard: { 'memory.available': '100Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
          podLogsDir: dir('pod-logs'),
          resolvConf: '',
          serializeImagePulls: false,
          registerNode: true,
        }),
      );
      const kubelet = Component.start({
        name: 'kubelet',
        binary: assets.kubelet,
        args: [
          `--config=${dir('kubelet-config.json')}`,
          `--kubeconfig=${kubeletKubeconfig}`,
          `--root-dir=${dir('kubelet')}`,
          `--cert-dir=${dir('kubelet-pki')}`,
          `--hostname-override=${plane.node.name}`,
          `--node-ip=${NODE_IP}`,
          '--v=1',
        ],
        logFile: dir('kubelet.log'),
        env: { PATH: path_ },
      });
      components.push(kubelet);
      const admin = new KubeConfig();
      admin.loadFromFile(plane.adminKubeconfig);
      const core = admin.makeApiClient(CoreV1Api);
      await waitFor(
        async () => {
          const n = await core.readNode({ name: plane.node.name });
          return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
        },
        {
          what: `node ${plane.node.name} Ready`,
          timeoutMs: 90_000,
          intervalMs: 250,
          abortIf: () => kubelet.exitReason() ?? containerd.exitReason() ?? scheduler.exitReason(),
        },
      );
      log(`node ${plane.node.name} Ready (${Date.now() - t0} ms)`);
      const info: NodeInfo = {
        name: plane.node.name,
        ip: NODE_IP,
        containerdSocket: socket,
        ctr: assets.ctr,
        kubeletPid: kubelet.pid,
        baseDir: NODE_BASE,
      };
      return new KubeNode(info, plane, components, forwarder, made);
    } catch (error) {
      const tails = components.map((c) => `--- ${c.name} (${c.logFile}) ---\n${c.logTail()}`).join('\n');
      for (const c of [...components].reverse()) await c.stop(2000);
      forwarder?.close();
      sweep();
      releaseLock();
      throw new Error(`node failed to start: ${(error as Error).message}\n${tails}`, { cause: error });
    }
  }

  /** Deletes every Pod on the node and waits for kubelet to tear them down, then removes it all. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    try {
      await this.drain();
    } catch {
      // The sweep below removes what kubelet did not.
    }
    for (const c of [...this.components].reverse()) await c.stop(5000);
    this.forwarder.close();
    sweep();
    releaseLock();
    process.removeListener('exit', this.onExit);
  }

  private async drain(): Promise<void> {
    const admin = new KubeConfig();
    admin.loadFromFile(this.plane.adminKubeconfig);
    const core = admin.makeApiClient(CoreV1Api);
    const fieldSelector = `spec.nodeName=${this.info.name}`;
    const pods = await core.listPodForAllNamespaces({ fieldSelector });
    await Promise.all(
      pods.items.map((p) =>
        core
          .deleteNamespacedPod({
            name: p.metadata?.name ?? '',
            namespace: p.metadata?.namespace ?? '',
            gracePeriodSeconds: 0,
          })
          .catch(() => undefined),
      ),
    );
    await waitFor(() => this.sandboxes().length === 0 || undefined, {
      what: 'kubelet to stop every Pod',
      timeoutMs: 30_000,
      intervalMs: 250,
    });
  }

  /**
   * The containers containerd still runs for kubelet (its tasks). kubelet stops a deleted Pod's
   * sandbox at once (and tears its network down then) but removes the stopped containers only
   * at its next garbage collection, so running tasks, not containers, say the Pods are gone.
   */
  sandboxes(): string[] {
    return run(this.info.ctr, ['-a', this.info.containerdSocket, '-n', 'k8s.io', 'tasks', 'ls', '-q'])
      .split('\n')
      .filter(Boolean);
  }

  /**
   * A partition between the node's Pods and the API server (the `kubernetes` Service's
   * forwarder): nothing passes either way, nothing is closed, until it is lifted. kubelet reaches
   * the API server directly and goes on.
   */
  partitionPods(partitioned: boolean): void {
    if (partitioned) this.forwarder.stall();
    else this.forwarder.resume();
  }

  /** SIGSTOP or SIGCONT kubelet: a stuck kubelet, for the tests. */
  freezeKubelet(frozen: boolean): void {
    process.kill(this.info.kubeletPid, frozen ? 'SIGSTOP' : 'SIGCONT');
  }
}

function cgroupHierarchies(): string[] {
  return fs
    .readdirSync(CGROUP_V1)
    .map((h) => path.join(CGROUP_V1, h))
    .filter((h) => {
      try {
        return fs.statSync(h).isDirectory() && !fs.lstatSync(h).isSymbolicLink();
      } catch {
        return false;
      }
    });
}

function takeLock(): void {
  for (;;) {
    try {
      fs.writeFileSync(LOCK_FILE, String(process.pid), { flag: 'wx' });
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    const owner = Number(fs.readFileSync(LOCK_FILE, 'utf8'));
    if (owner > 0 && owner !== process.pid && isAlive(owner))
      throw new Error(
        `another test node runs on this machine (pid ${owner}, ${LOCK_FILE}); one node fits a machine`,
      );
    fs.rmSync(LOCK_FILE, { force: true });
  }
}

function releaseLock(): void {
  try {
    if (Number(fs.readFileSync(LOCK_FILE, 'utf8')) === process.pid) fs.rmSync(LOCK_FILE);
  } catch {
    // not ours or already gone
  }
}

/** Processes whose command line mentions `needle` (the node's base directory), but not us. */
function processesMentioning(needle: string): number[] {
  const found: number[] = [];
  for (const entry of fs.readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid) || pid === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(needle)) found.push(pid);
    } catch {
      // gone
    }
  }
  return found;
}

/** Every process in the node's cgroup tree (the Pods' containers), from every hierarchy. */
function cgroupProcesses(): number[] {
  const pids = new Set<number>();
  const walk = (d: string) => {
    let entries: fs.Dirent[];
    try {
      entries = fs.readdirSync(d, { withFileTypes: true });
    } catch {
      return;
    }
    try {
      for (const p of fs.readFileSync(path.join(d, 'cgroup.procs'), 'utf8').split('\n'))
        if (p) pids.add(Number(p));
    } catch {
      // no procs file
    }
    for (const e of entries) if (e.isDirectory()) walk(path.join(d, e.name));
  };
  for (const h of cgroupHierarchies()) walk(path.join(h, CGROUP_ROOT));
  return [...pids];
}

function killAll(find: () => number[], what: string): void {
  for (let round = 0; round < 50; round++) {
    const pids = find();
    if (pids.length === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
    spawnSync('sleep', ['0.1']);
  }
  throw new Error(`could not kill ${what}: ${find().join(', ')}`);
}

/** Mount points at or below one of `roots`, deepest first. */
function mountsUnder(roots: readonly string[]): string[] {
  const points = fs
    .readFileSync('/proc/self/mountinfo', 'utf8')
    .split('\n')
    .map((l) => l.split(' ')[4])
    .filter((p): p is string => !!p)
    .map((p) => p.replace(/\\040/g, ' '))
    .filter((p) => roots.some((r) => p === r || p.startsWith(`${r}/`)));
  return [...new Set(points)].sort((a, b) => b.length - a.length);
}

function rmdirTree(d: string): void {
  let entries: fs.Dirent[];
  try {
    entries = fs.readdirSync(d, { withFileTypes: true });
  } catch {
    return;
  }
  for (const e of entries) if (e.isDirectory()) rmdirTree(path.join(d, e.name));
  try {
    fs.rmdirSync(d);
  } catch {
    // a cgroup still in use shows in leftovers()
  }
}

/**
 * Removes everything a node of this harness makes, whether it stopped cleanly or was killed:
 * processes (containers by cgroup, shims and daemons by the base directory on their command
 * line), mounts, cgroups, the bridge and the directories. Safe to run when nothing is there.
 */
export function sweep(): void {
  // A lock whose owner is dead is part of what it left.
  try {
    if (!isAlive(Number(fs.readFileSync(LOCK_FILE, 'utf8')))) fs.rmSync(LOCK_FILE);
  } catch {
    // no lock
  }
  killAll(cgroupProcesses, 'the Pods’ processes');
  killAll(() => processesMentioning(NODE_BASE), 'the node’s daemons and shims');
  const roots = [NODE_BASE, '/run/containerd', '/var/lib/kubelet', '/run/netns'];
  for (const point of mountsUnder(roots)) tryRun('umount', ['-l', point]);
  for (const h of cgroupHierarchies()) rmdirTree(path.join(h, CGROUP_ROOT));
  tryRun('ip', ['link', 'del', BRIDGE]);
  let made: string[] = [];
  try {
    made = JSON.parse(fs.readFileSync(path.join(NODE_BASE, 'made-outside.json'), 'utf8')) as string[];
  } catch {
    // nothing recorded
  }
  for (const d of made) fs.rmSync(d, { recursive: true, force: true });
  // Our own network's IPAM state, even where the directory above it was there before us.
  fs.rmSync(`/var/lib/cni/networks/${CNI_NETWORK}`, { recursive: true, force: true });
  fs.rmSync(NODE_BASE, { recursive: true, force: true });
}

/**
 * What of the node is still on the machine: empty after a clean stop (the tests check).
 * `made`: the directories outside its own that the node created (KubeNode.madeOutside).
 */
export function leftovers(made: readonly string[] = []): string[] {
  const found: string[] = made.filter((d) => fs.existsSync(d));
  if (cgroupProcesses().length > 0)
    found.push(`processes in cgroup ${CGROUP_ROOT}: ${cgroupProcesses().join(', ')}`);
  const procs = processesMentioning(NODE_BASE);
  if (procs.length > 0) found.push(`processes naming ${NODE_BASE}: ${procs.join(', ')}`);
  const mounts = mountsUnder([NODE_BASE, '/run/containerd', '/var/lib/kubelet']);
  if (mounts.length > 0) found.push(`mounts: ${mounts.join(', ')}`);
  for (const h of cgroupHierarchies())
    if (fs.existsSync(path.join(h, CGROUP_ROOT))) found.push(`cgroup ${h}/${CGROUP_ROOT}`);
  if (spawnSync('ip', ['link', 'show', BRIDGE], { stdio: 'ignore' }).status === 0)
    found.push(`bridge ${BRIDGE}`);
  if (fs.existsSync(NODE_BASE)) found.push(NODE_BASE);
  if (fs.existsSync(LOCK_FILE)) found.push(LOCK_FILE);
  return found;
}
