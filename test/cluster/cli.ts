// `npm run cluster:up` / `npm run cluster:down`: the test control plane for a person.
//
// `up` starts a detached supervisor (this file, `serve`) that runs the control plane, and a real
// node beside it where the machine can run one (root on Linux; test/cluster/node.ts), and writes
// .cluster/state.json when it is ready; `up` waits for that file and prints how to use it.
// CONFIG_SYNC_NODE=0 leaves the node out.
// `down` sends the supervisor SIGTERM, which stops every component and removes the data.
// The components carry a parent-death signal tied to the supervisor, so killing the supervisor
// in any way takes them with it.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildNodeImages, ensureNodePackages, resolveAssets, resolveNodeAssets } from './assets.ts';
import { ControlPlane, type ControlPlaneInfo } from './control-plane.ts';
import { KubeNode, type NodeInfo, nodeUnsupported } from './node.ts';
import { waitFor } from './wait.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
// CONFIG_SYNC_CLUSTER_DIR moves the state (and the data) elsewhere; tests use it so they never
// touch a control plane a developer started by hand.
const stateDir = process.env.CONFIG_SYNC_CLUSTER_DIR ?? path.join(root, '.cluster');
const stateFile = path.join(stateDir, 'state.json');
const logFile = path.join(stateDir, 'supervisor.log');

interface State {
  readonly supervisorPid: number;
  readonly info: ControlPlaneInfo;
  /** The node, or why there is none. */
  readonly node: NodeInfo | { readonly none: string };
}

function whyNoNode(): string | undefined {
  if (process.env.CONFIG_SYNC_NODE === '0') return 'CONFIG_SYNC_NODE=0';
  return nodeUnsupported();
}

function readState(): State | undefined {
  try {
    return JSON.parse(fs.readFileSync(stateFile, 'utf8')) as State;
  } catch {
    return undefined;
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function up(): Promise<number> {
  const existing = readState();
  if (existing && alive(existing.supervisorPid)) {
    printUsage(existing, 'already running');
    return 0;
  }
  fs.rmSync(stateFile, { force: true });
  // Build in the foreground, so a first-time build shows its progress here.
  resolveAssets();
  if (!whyNoNode()) ensureNodePackages();
  fs.mkdirSync(stateDir, { recursive: true });
  const out = fs.openSync(logFile, 'w');
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), 'serve'], {
    detached: true,
    stdio: ['ignore', out, out],
  });
  child.unref();
  let exited = false;
  child.once('exit', () => {
    exited = true;
  });
  const state = await waitFor(() => readState(), {
    what: `the control plane (log: ${logFile})`,
    timeoutMs: 180_000,
    intervalMs: 250,
    abortIf: () => (exited ? `supervisor exited:\n${fs.readFileSync(logFile, 'utf8')}` : undefined),
  });
  printUsage(state, 'started');
  return 0;
}

function printUsage(state: State, what: string): void {
  const info = state.info;
  process.stdout.write(
    [
      `control plane ${what}: ${info.server}`,
      'none' in state.node
        ? `no node (${state.node.none}): Pods stay Pending`
        : `node ${state.node.name} Ready at ${state.node.ip}: Pods run (kubelet, containerd, runc)`,
      `export KUBECONFIG=${info.adminKubeconfig}`,
      `kubectl: ${info.kubectl}`,
      `stop it with: npm run cluster:down`,
      '',
    ].join('\n'),
  );
}

async function serve(): Promise<number> {
  const plane = await ControlPlane.start({
    assets: resolveAssets(),
    baseDir: stateDir,
    log: (line) => process.stdout.write(`${line}\n`),
  });
  const log = (line: string) => process.stdout.write(`${line}\n`);
  const why = whyNoNode();
  let node: KubeNode | undefined;
  if (!why) {
    try {
      const imagesDir = buildNodeImages(path.join(stateDir, 'images'));
      node = await KubeNode.start({ plane: plane.info, assets: resolveNodeAssets(), imagesDir, log });
    } catch (error) {
      await plane.stop();
      throw error;
    }
  }
  const state: State = {
    supervisorPid: process.pid,
    info: plane.info,
    node: node?.info ?? { none: why ?? '' },
  };
  fs.writeFileSync(`${stateFile}.tmp`, JSON.stringify(state, null, 2));
  fs.renameSync(`${stateFile}.tmp`, stateFile);
  await new Promise<void>((resolve) => {
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await node?.stop();
  await plane.stop();
  fs.rmSync(stateFile, { force: true });
  return 0;
}

async function down(): Promise<number> {
  const state = readState();
  if (!state || !alive(state.supervisorPid)) {
    fs.rmSync(stateFile, { force: true });
    process.stdout.write('no control plane running\n');
    return 0;
  }
  process.kill(state.supervisorPid, 'SIGTERM');
  await waitFor(() => !alive(state.supervisorPid) || undefined, {
    what: 'the supervisor to exit',
    timeoutMs: 60_000,
  });
  process.stdout.write('control plane stopped\n');
  return 0;
}

const commands: Record<string, () => Promise<number>> = { up, down, serve };
const command = commands[process.argv[2] ?? ''];
if (!command) {
  process.stderr.write('usage: node test/cluster/cli.ts up|down\n');
  process.exitCode = 2;
} else {
  process.exitCode = await command();
}
