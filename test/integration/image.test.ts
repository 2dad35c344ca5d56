// The container image, built from deploy/image/Dockerfile with buildah and run: the CLI works
// as the non-root user, and the agent inside it gets in sync against the test control plane
// with a read-only config volume. (No Docker engine here; buildah's chroot isolation shares
// the host network, so 127.0.0.1 is the control plane.)
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };
import { root } from '../cluster/app.ts';
import { atomicWrite, configMapPayload } from '../cluster/kubelet-volume.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';

const ns = useNamespace('image');
const image = `config-sync:${pkg.version}`;
const containers: string[] = [];
let agent: ChildProcess | undefined;
const buildah = (...args: string[]) =>
  execFileSync('buildah', ['--storage-driver', 'vfs', ...args], { encoding: 'utf8' }).trim();

beforeAll(() => {
  execFileSync('bash', [path.join(root, 'scripts/ensure-buildah.sh')], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const built = execFileSync('bash', [path.join(root, 'scripts/build-image.sh')], {
    cwd: root,
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  expect(built.trim().split('\n').at(-1)).toBe(image);
}, 300_000);

afterAll(() => {
  agent?.kill('SIGKILL');
  // chroot isolation runs the process as a child of buildah: make sure nothing of it is left.
  spawnSync('pkill', [
    '-KILL',
    '-f',
    `/app/config-sync.js agent --kubeconfig /kc/config --namespace ${ns.name}`,
  ]);
  // The manifest list's build (the last test) re-tags the image's name, removing what was made
  // from it: a container already gone is not an error.
  for (const c of containers) spawnSync('buildah', ['--storage-driver', 'vfs', 'rm', c]);
}, 30_000);

function container(): string {
  const c = buildah('from', image);
  containers.push(c);
  return c;
}

it('is a non-root image whose entrypoint is the CLI', () => {
  const config = (
    JSON.parse(buildah('inspect', '--type', 'image', image)) as { OCIv1: { config: Record<string, unknown> } }
  ).OCIv1.config;
  expect(config).toMatchObject({
    User: '65532:65532',
    Entrypoint: ['/nodejs/bin/node', '/app/config-sync.js'],
    Cmd: ['agent'],
  });
  expect(config.Env).toContain('NODE_OPTIONS=--max-semi-space-size=1');
  expect(config.Env).toContain('MALLOC_MMAP_THRESHOLD_=131072');
  expect(config.Env).toContain('MALLOC_ARENA_MAX=2');
  const c = container();
  const out = buildah(
    'run',
    '--isolation',
    'chroot',
    '--user',
    '65532:65532',
    c,
    '--',
    '/nodejs/bin/node',
    '/app/config-sync.js',
    '--version',
  );
  expect(out).toBe(`config-sync ${pkg.version} (node ${process.version}, linux/x64)`);
});

it('runs the agent in sync against the control plane, with a read-only config volume', async () => {
  await ns.admin.makeApiClient(CoreV1Api).createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'app' }, data: { 'app.yaml': 'level: info\n' } },
  });
  const work = tempDir('image-');
  const mount = path.join(work, 'etc-app');
  fs.mkdirSync(mount);
  atomicWrite(mount, configMapPayload({ data: { 'app.yaml': 'level: info\n' } }));
  fs.mkdirSync(path.join(work, 'kc'));
  fs.copyFileSync(controlPlane().adminKubeconfig, path.join(work, 'kc/config'));
  fs.chmodSync(path.join(work, 'kc/config'), 0o644);
  const port = await freeLoopbackPort();

  const c = container();
  agent = spawn(
    'buildah',
    [
      '--storage-driver',
      'vfs',
      'run',
      '--isolation',
      'chroot',
      '--network',
      'host',
      '--user',
      '65532:65532',
      '-v',
      `${mount}:/etc/app:ro`,
      '-v',
      `${path.join(work, 'kc')}:/kc:ro`,
      c,
      '--',
      '/nodejs/bin/node',
      '/app/config-sync.js',
      'agent',
      '--kubeconfig',
      '/kc/config',
      '--namespace',
      ns.name,
      '--watch',
      '/etc/app=configmap/app',
      '--listen',
      `127.0.0.1:${port}`,
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: agent.stdout as NodeJS.ReadableStream }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      // not a log line
    }
  });
  await waitFor(() => lines.find((l) => l.state === 'InSync'), {
    what: 'the agent in the image to be InSync',
    timeoutMs: 60_000,
  });
  const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
  expect(ready.status).toBe(200);
  const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  expect(metrics).toMatch(/^config_sync_in_sync 1$/m);
}, 120_000);

/** A file of an image's root filesystem, read through a mounted working container. */
function fileOf(image: string, file: string): Buffer {
  const c = buildah('from', image);
  containers.push(c);
  const dir = buildah('mount', c);
  try {
    return fs.readFileSync(path.join(dir, file));
  } finally {
    buildah('umount', c);
  }
}

/** An ELF file's machine (e_machine): 62 x86-64, 183 AArch64. */
const elfMachine = (bytes: Buffer) =>
  bytes.subarray(0, 4).toString('latin1') === '\x7fELF' ? bytes.readUInt16LE(18) : -1;

it('carries its version, revision and SBOM, and a stripped Node binary', () => {
  const inspected = JSON.parse(buildah('inspect', '--type', 'image', image)) as {
    OCIv1: { architecture: string; config: { Labels: Record<string, string> } };
  };
  expect(inspected.OCIv1.architecture).toBe('amd64');
  expect(inspected.OCIv1.config.Labels).toMatchObject({
    'org.opencontainers.image.version': pkg.version,
    'org.opencontainers.image.revision': expect.stringMatching(/^[0-9a-f]{40}$/),
  });
  const sbom = JSON.parse(fileOf(image, 'app/sbom.cdx.json').toString('utf8')) as {
    bomFormat: string;
    components: { name: string }[];
  };
  expect(sbom.bomFormat).toBe('CycloneDX');
  expect(sbom.components.map((c) => c.name)).toContain('@kubernetes/client-node');
  const node = fileOf(image, 'nodejs/bin/node');
  expect(elfMachine(node)).toBe(62);
  // Stripped: smaller than npm's binary of the same version.
  expect(node.length).toBeLessThan(
    fs.statSync(fs.realpathSync(path.join(root, 'node_modules/node/bin/node'))).size,
  );
});

// No arm64 machine here to run it: its config says arm64, its Node binary and loader are
// AArch64 ELF, and the two platforms go out as one manifest list.
it('for linux/arm64 too, both as one manifest list a registry (here an OCI layout on disk) takes', () => {
  const layout = tempDir('config-sync-oci-');
  const built = execFileSync(
    'bash',
    [path.join(root, 'scripts/build-image.sh'), '--push', `oci:${layout}:${pkg.version}`],
    { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] },
  );
  expect(built.trim().split('\n').at(-1)).toBe(`oci:${layout}:${pkg.version}`);
  const arm = `${image}-arm64`;
  const inspected = JSON.parse(buildah('inspect', '--type', 'image', arm)) as {
    OCIv1: { architecture: string; os: string };
  };
  expect(inspected.OCIv1).toMatchObject({ architecture: 'arm64', os: 'linux' });
  expect(elfMachine(fileOf(arm, 'nodejs/bin/node'))).toBe(183);
  expect(elfMachine(fileOf(arm, 'lib/ld-linux-aarch64.so.1'))).toBe(183);
  expect(elfMachine(fileOf(arm, 'lib/aarch64-linux-gnu/libstdc++.so.6'))).toBe(183);
  // The layout's index names the list; the list names both platforms.
  const index = JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8')) as {
    manifests: { digest: string; mediaType: string }[];
  };
  const [entry] = index.manifests;
  const list = JSON.parse(
    fs.readFileSync(path.join(layout, 'blobs', ...(entry?.digest ?? '').split(':')), 'utf8'),
  ) as { manifests: { platform: { architecture: string; os: string } }[] };
  expect(list.manifests.map((m) => `${m.platform.os}/${m.platform.architecture}`).sort()).toEqual([
    'linux/amd64',
    'linux/arm64',
  ]);
}, 600_000);
