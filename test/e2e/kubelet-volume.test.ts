// test/cluster/kubelet-volume.ts (our transcription of kubelet's AtomicWriter, which the fast
// tests write volumes with) checked against the real kubelet once: the same ConfigMap, with
// items, a nested path and modes, through both gives the same layout, names of the timestamped
// directories aside. And the agent's volume watch on a real kubelet's volume of a Pod with an
// fsGroup, whose every update kubelet precedes with a chown and chmod of the whole volume.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api, type V1ConfigMapVolumeSource, type V1PodSecurityContext } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { adminKubeConfig, createTestNamespace } from '../cluster/identities.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';
import { NODE_BASE } from '../cluster/node.ts';
import { waitFor } from '../cluster/wait.ts';
import { startWatchProbe } from '../cluster/watch-probe.ts';
import { cluster, describeOnNode, useNode } from './support.ts';

const ours = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-atomic-'));
afterAll(() => fs.rmSync(ours, { recursive: true, force: true }));

/** Every entry below `dir`: links with their target (timestamps named `..<ts>`), files with mode and digest. */
function layout(dir: string): string[] {
  const ts = (name: string) => name.replace(/^\.\.\d{4}_\d\d_\d\d_\d\d_\d\d_\d\d\.\d+/, '..<ts>');
  const out: string[] = [];
  const walk = (rel: string) => {
    const full = path.join(dir, rel);
    const st = fs.lstatSync(full);
    const name = rel.split('/').map(ts).join('/');
    if (st.isSymbolicLink()) out.push(`${name} -> ${ts(fs.readlinkSync(full))}`);
    else if (st.isDirectory()) {
      out.push(`${name}/ ${(st.mode & 0o777).toString(8)}`);
      for (const e of fs.readdirSync(full).sort()) walk(rel ? `${rel}/${e}` : e);
    } else {
      const sum = crypto.createHash('sha256').update(fs.readFileSync(full)).digest('hex').slice(0, 12);
      out.push(`${name} ${(st.mode & 0o777).toString(8)} ${sum}`);
    }
  };
  for (const e of fs.readdirSync(dir).sort()) walk(e);
  return out;
}

/**
 * A namespace of its own, a ConfigMap `cfg` holding `data`, and a running busybox Pod that mounts
 * it with `volume` (items, modes) and `securityContext`: the volume's directory as kubelet keeps
 * it on the node.
 */
async function podWithConfigMap(
  prefix: string,
  data: Record<string, string>,
  volume: Omit<V1ConfigMapVolumeSource, 'name'>,
  securityContext?: V1PodSecurityContext,
): Promise<{ core: CoreV1Api; ns: string; real: string }> {
  const admin = adminKubeConfig(cluster().plane);
  const ns = await createTestNamespace(admin, prefix);
  const core = admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'cfg' }, data } });
  const pod = await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name: 'p' },
      spec: {
        ...(securityContext ? { securityContext } : {}),
        containers: [
          {
            name: 'c',
            image: 'config-sync.test/busybox:1',
            command: ['sleep', '3600'],
            volumeMounts: [{ name: 'cfg', mountPath: '/cfg' }],
          },
        ],
        volumes: [{ name: 'cfg', configMap: { name: 'cfg', ...volume } }],
      },
    },
  });
  await waitFor(
    async () => (await core.readNamespacedPod({ name: 'p', namespace: ns })).status?.phase === 'Running',
    { what: 'the Pod Running', timeoutMs: 60_000, intervalMs: 250 },
  );
  const real = path.join(
    NODE_BASE,
    'kubelet/pods',
    pod.metadata?.uid ?? '',
    'volumes/kubernetes.io~configmap/cfg',
  );
  return { core, ns, real };
}

describeOnNode('kubelet-volume.ts against the real kubelet', () => {
  useNode();

  it('the same ConfigMap and volume source give the same layout', async () => {
    const data = { 'a.yaml': 'a: 1\n', 'b.yaml': 'b: 2\n', 'c.txt': 'not projected\n' };
    const items = [
      { key: 'a.yaml', path: 'a.yaml' },
      { key: 'b.yaml', path: 'nested/deeper/b.yaml', mode: 0o600 },
    ];
    const { real } = await podWithConfigMap('e2e-volume', data, { items, defaultMode: 0o640 });

    atomicWrite(ours, configMapPayload({ data }, { items, defaultMode: 0o640 }));
    expect(layout(ours)).toEqual(layout(real));
    // And what the layout is, so that a change on either side is seen here.
    expect(layout(real)).toContain('..data -> ..<ts>');
    expect(layout(real).find((l) => l.startsWith('..<ts>/nested/deeper/b.yaml'))).toMatch(/ 600 /);
  });

  it('with a Pod fsGroup, an update wakes the volume watch once: the swap, not kubelet’s chown of every entry', async () => {
    const data = (i: number) =>
      Object.fromEntries(
        Array.from({ length: 20 }, (_, k) => [`key-${k}.yaml`, `value: ${k === 0 ? i : k}\n`]),
      );
    const { core, ns, real } = await podWithConfigMap('e2e-fsgroup', data(0), {}, { fsGroup: 2345 });
    // What makes this case: kubelet applied the fsGroup to the volume and its files.
    expect(fs.statSync(real).gid).toBe(2345);
    expect(fs.statSync(path.join(real, 'key-0.yaml')).gid).toBe(2345);

    const probe = await startWatchProbe([real]);
    try {
      for (let i = 1; i <= 3; i += 1) {
        const mark = probe.reasons.length;
        await core.replaceNamespacedConfigMap({
          name: 'cfg',
          namespace: ns,
          body: { metadata: { name: 'cfg' }, data: data(i) },
        });
        await waitFor(
          () => fs.readFileSync(path.join(real, 'key-0.yaml'), 'utf8') === `value: ${i}\n` || undefined,
          { what: `kubelet to deliver update ${i}`, timeoutMs: 30_000, intervalMs: 20 },
        );
        await probe.barrier();
        expect(probe.reasons.slice(mark)).toEqual([`inotify rename ${real}/..data`]);
      }
    } finally {
      await probe.stop();
    }
  });
});
