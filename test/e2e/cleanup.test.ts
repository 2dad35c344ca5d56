// The node leaves nothing on the machine: kubelet and containerd write outside their own
// directories, containers outlive the shims' parents, volumes are mounts, Pods are cgroups and
// network namespaces. Both ways a run ends are checked with Pods running (a ConfigMap volume, a
// Secret volume on tmpfs): a clean stop, and the harness SIGKILLed, swept by the next start.
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { expect, it } from 'vitest';
import { ControlPlane } from '../cluster/control-plane.ts';
import { adminKubeConfig, createTestNamespace } from '../cluster/identities.ts';
import { KubeNode, leftovers, NODE_BASE, sweep } from '../cluster/node.ts';
import { waitFor } from '../cluster/wait.ts';
import { describeOnNode, e2eAssets } from './support.ts';

const cli = path.resolve(import.meta.dirname, '../cluster/cli.ts');

/** A Pod with a ConfigMap volume and a Secret volume (tmpfs), running busybox. */
async function runPods(kubeconfig: string, kubectl: string): Promise<void> {
  const ns = await createTestNamespace(adminKubeConfigFrom(kubeconfig), 'cleanup');
  const manifest = {
    apiVersion: 'v1',
    kind: 'List',
    items: [
      { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'c' }, data: { a: '1' } },
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: 's' }, stringData: { b: '2' } },
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'p' },
        spec: {
          containers: [
            {
              name: 'c',
              image: 'config-sync.test/busybox:1',
              command: ['sleep', '3600'],
              volumeMounts: [
                { name: 'c', mountPath: '/c' },
                { name: 's', mountPath: '/s' },
              ],
            },
          ],
          volumes: [
            { name: 'c', configMap: { name: 'c' } },
            { name: 's', secret: { secretName: 's' } },
          ],
        },
      },
    ],
  };
  execFileSync(kubectl, ['--kubeconfig', kubeconfig, '-n', ns, 'apply', '-f', '-'], {
    input: JSON.stringify(manifest),
  });
  const core = adminKubeConfigFrom(kubeconfig).makeApiClient(CoreV1Api);
  await waitFor(
    async () => (await core.readNamespacedPod({ name: 'p', namespace: ns })).status?.phase === 'Running',
    {
      what: 'the Pod Running',
      timeoutMs: 60_000,
      intervalMs: 250,
    },
  );
}

function adminKubeConfigFrom(kubeconfig: string) {
  return adminKubeConfig({ adminKubeconfig: kubeconfig } as never);
}

describeOnNode('the node leaves nothing behind', () => {
  it('after a clean stop: no process, mount, cgroup, bridge or directory of it', async () => {
    const { assets, nodeAssets, imagesDir } = e2eAssets();
    const plane = await ControlPlane.start({ assets });
    let node: KubeNode | undefined;
    try {
      node = await KubeNode.start({ plane: plane.info, assets: nodeAssets, imagesDir });
      await runPods(plane.info.adminKubeconfig, plane.info.kubectl);
      expect(leftovers().length).toBeGreaterThan(0); // the check sees a running node
    } finally {
      await node?.stop();
      await plane.stop();
    }
    expect(leftovers(node?.madeOutside)).toEqual([]);
  });

  it('after the harness is SIGKILLed: the next start sweeps what it left', async () => {
    const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cleanup-cli-'));
    const env = { ...process.env, CONFIG_SYNC_CLUSTER_DIR: stateDir };
    try {
      execFileSync(process.execPath, [cli, 'up'], {
        env,
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      const state = JSON.parse(fs.readFileSync(path.join(stateDir, 'state.json'), 'utf8')) as {
        supervisorPid: number;
        info: { adminKubeconfig: string; kubectl: string };
        node: { name?: string };
      };
      expect(state.node.name).toBe('config-sync-node');
      await runPods(state.info.adminKubeconfig, state.info.kubectl);
      const made = JSON.parse(fs.readFileSync(path.join(NODE_BASE, 'made-outside.json'), 'utf8')) as string[];

      process.kill(state.supervisorPid, 'SIGKILL');
      await waitFor(
        () => {
          try {
            process.kill(state.supervisorPid, 0);
            return undefined;
          } catch {
            return true;
          }
        },
        { what: 'the supervisor gone' },
      );
      // The containers and their shims outlive it: that is what the sweep is for.
      expect(leftovers(made).length).toBeGreaterThan(0);
      sweep();
      expect(leftovers(made)).toEqual([]);
    } finally {
      spawn(process.execPath, [cli, 'down'], { env, stdio: 'ignore' });
      sweep();
      fs.rmSync(stateDir, { recursive: true, force: true });
    }
  });
});
