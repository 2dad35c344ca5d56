// Finds the control-plane binaries, in the envtest order of precedence:
//   1. TEST_ASSET_ETCD, TEST_ASSET_KUBE_APISERVER, TEST_ASSET_KUBE_CONTROLLER_MANAGER,
//      TEST_ASSET_KUBECTL: one binary each, used as given;
//   2. KUBEBUILDER_ASSETS: a directory holding all of them;
//   3. otherwise test/cluster/build.sh, which builds them from the Go module proxy once and
//      caches them by version (~/.cache/config-sync/kube/<version>-<go.sum hash>/).
import { execFileSync, spawn } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { NodeAssets } from './node.ts';

export interface ControlPlaneAssets {
  readonly etcd: string;
  readonly kubeApiserver: string;
  readonly kubeControllerManager: string;
  readonly kubectl: string;
}

const here = path.dirname(fileURLToPath(import.meta.url));

const overrides: Record<keyof ControlPlaneAssets, [env: string, file: string]> = {
  etcd: ['TEST_ASSET_ETCD', 'etcd'],
  kubeApiserver: ['TEST_ASSET_KUBE_APISERVER', 'kube-apiserver'],
  kubeControllerManager: ['TEST_ASSET_KUBE_CONTROLLER_MANAGER', 'kube-controller-manager'],
  kubectl: ['TEST_ASSET_KUBECTL', 'kubectl'],
};

function assertExecutable(file: string, origin: string): string {
  try {
    accessSync(file, constants.X_OK);
  } catch (cause) {
    throw new Error(`control-plane binary ${file} (from ${origin}) is missing or not executable`, { cause });
  }
  return file;
}

/** Builds (or finds in the cache) the binaries; returns their directory. Slow only the first time. */
export function buildAssets(): string {
  const out = execFileSync('bash', [path.join(here, 'build.sh')], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const dir = out.trim().split('\n').at(-1);
  if (!dir) throw new Error('test/cluster/build.sh printed no asset directory');
  return dir;
}

export function resolveAssets(env: NodeJS.ProcessEnv = process.env): ControlPlaneAssets {
  const entries = Object.entries(overrides) as [keyof ControlPlaneAssets, [string, string]][];
  const missing = entries.filter(([, [envName]]) => !env[envName]);
  const dir = missing.length === 0 ? '' : buildAssets();
  const resolved = {} as Record<keyof ControlPlaneAssets, string>;
  for (const [key, [envName, file]] of entries) {
    const given = env[envName];
    resolved[key] = given ? assertExecutable(given, envName) : assertExecutable(path.join(dir, file), dir);
  }
  return resolved;
}

/** The node's binaries: built and cached beside the control plane's by the same build.sh. */
export function resolveNodeAssets(): NodeAssets {
  const dir = buildAssets();
  const file = (name: string) => assertExecutable(path.join(dir, name), dir);
  file('containerd-shim-runc-v2');
  return {
    kubelet: file('kubelet'),
    kubeScheduler: file('kube-scheduler'),
    containerd: file('containerd'),
    ctr: file('ctr'),
    binDir: dir,
  };
}

/** The images the node runs (test/cluster/node-images.sh), as docker-archive files in `out`. */
export function buildNodeImages(out: string): string {
  const printed = execFileSync('bash', [path.join(here, 'node-images.sh'), out], {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return printed.trim().split('\n').at(-1) ?? out;
}

/** Installs the node's Debian packages (runc, CNI plugins, buildah, ...) where missing. */
export function ensureNodePackages(): void {
  execFileSync('bash', [path.join(here, 'node-packages.sh')], { stdio: ['ignore', 'inherit', 'inherit'] });
}

/**
 * One tool the tests drive, built from the Go module proxy or found in the cache
 * (test/cluster/build-tool.sh): its path. Asynchronous, so that an e2e file keeps forwarding its
 * node's API traffic while a cold build runs; progress goes to stderr.
 */
export function buildTool(name: 'helm' | 'opa' | 'kubelet-writer'): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(here, 'build-tool.sh'), name], {
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.once('error', reject);
    // 'close', not 'exit': 'exit' may come before the last of stdout has been read, and a cached
    // tool's path, printed just before the script exits, was then missed (a bench run failed
    // with "exit 0" on 2026-12-05).
    child.once('close', (code) => {
      const binary = out.trim().split('\n').at(-1);
      if (code === 0 && binary) resolve(binary);
      else
        reject(
          new Error(
            `test/cluster/build-tool.sh ${name} failed (exit ${code}${code === 0 ? ', and it printed no path' : ''})`,
          ),
        );
    });
  });
}
