// deploy/sidecar as a user applies it: into a namespace that enforces Pod Security "restricted",
// server-side, with no warnings; Pods admitted; and the agent in such a Pod finds the app's
// targets and has exactly the permissions it needs.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { discoverTargets } from '../../src/discover/targets.ts';
import { bin, root } from '../cluster/app.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { layInClusterDir, podEnv } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';

const ns = useNamespace('deploy');

function kubectl(...args: string[]) {
  const cp = controlPlane();
  return spawnSync(cp.kubectl, ['--kubeconfig', cp.adminKubeconfig, ...args], { encoding: 'utf8' });
}

let pods: V1Pod[];

beforeAll(async () => {
  const labels = ['enforce', 'warn', 'audit'].map((mode) => `pod-security.kubernetes.io/${mode}=restricted`);
  expect(kubectl('label', 'namespace', ns.name, ...labels).status).toBe(0);
});

describe('kubectl apply -k deploy/sidecar into a Pod Security "restricted" namespace', () => {
  it('is accepted by a server-side dry run, with no warnings', () => {
    const res = kubectl(
      'apply',
      '--server-side',
      '--dry-run=server',
      '-n',
      ns.name,
      '-k',
      path.join(root, 'deploy/sidecar'),
    );
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
    expect(res.stdout).toContain('deployment.apps/web serverside-applied (server dry run)');
  });

  it('applies, with no warnings, and the controller-manager gets its Pods admitted', async () => {
    const res = kubectl('apply', '--server-side', '-n', ns.name, '-k', path.join(root, 'deploy/sidecar'));
    expect(res.stderr).toBe('');
    expect(res.status).toBe(0);
    pods = await waitFor(
      async () => {
        const list = await ns.admin
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
        return list.items.length === 2 ? list.items : undefined;
      },
      { what: 'two Pods admitted under restricted enforcement' },
    );
  });

  it('runs the agent as a native sidecar with the downward API and read-only mounts', () => {
    const spec = pods[0]?.spec;
    const sidecar = spec?.initContainers?.find((c) => c.name === 'config-sync');
    expect(sidecar?.restartPolicy).toBe('Always');
    expect(sidecar?.env?.map((e) => [e.name, e.valueFrom?.fieldRef?.fieldPath])).toEqual(
      expect.arrayContaining([
        ['POD_NAME', 'metadata.name'],
        ['POD_NAMESPACE', 'metadata.namespace'],
      ]),
    );
    // The app's configuration read-only; writable only its own emptyDir (the fingerprint key).
    const writable = sidecar?.volumeMounts?.filter((m) => !m.readOnly);
    expect(writable).toEqual([{ name: 'config-sync-state', mountPath: '/var/run/config-sync' }]);
    expect(spec?.volumes?.find((v) => v.name === 'config-sync-state')?.emptyDir).toBeDefined();
    expect(sidecar?.securityContext).toMatchObject({
      readOnlyRootFilesystem: true,
      allowPrivilegeEscalation: false,
    });
  });

  it("the agent finds the app's volume, subPath and env targets, and not itself", () => {
    const pod = pods[0] as V1Pod;
    const { targets } = discoverTargets(pod, { self: 'config-sync' });
    const ids = targets.map((t) =>
      t.type === 'volume'
        ? `${t.container}:${t.mountPath}${t.subPath ? ' (subPath)' : ''}`
        : `${t.container}:env:${t.ref.name}`,
    );
    expect(ids.sort()).toEqual(['app:/etc/app', 'app:/etc/log.yaml (subPath)', 'app:env:web-secrets']);
  });

  it('doctor, as the agent in one of these Pods, finds every permission it needs', async () => {
    const pod = pods[0] as V1Pod;
    const name = pod.metadata?.name ?? '';
    const id = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'config-sync-agent',
      existingServiceAccount: true,
      bindToPod: { name, uid: pod.metadata?.uid ?? '' },
    });
    const layout = layInClusterDir(tempDir('deploy-'), controlPlane(), {
      token: id.token,
      namespace: ns.name,
    });
    const res = spawnSync(process.execPath, [bin, 'doctor'], {
      encoding: 'utf8',
      env: podEnv(layout, ns.name, name),
    });
    expect(res.stdout.split('\n')[0]).toBe(
      `ok: config-sync can work in namespace "${ns.name}" as system:serviceaccount:${ns.name}:config-sync-agent (14 permissions checked)`,
    );
    expect(res.status).toBe(0);
  });
});
