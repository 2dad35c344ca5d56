// The admission webhook for real: `config-sync webhook` on 127.0.0.1 with a self-signed
// certificate, registered in the test API server with a URL client config; Deployments then get
// their Pods from the controller-manager, through the webhook.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import https from 'node:https';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  CoreV1Api,
  type KubeConfig,
  type V1MutatingWebhook,
  type V1Pod,
} from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bin, root, sample, webDeployment } from '../cluster/app.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { selfSignedCertificate } from '../cluster/self-signed.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';

const labelled = useNamespace('webhook-on');
const plain = useNamespace('webhook-off');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'webhook-'));
const cert = path.join(dir, 'tls.crt');
const key = path.join(dir, 'tls.key');
const configName = `config-sync-inject-test-${process.pid}`;
let port: number;
let metricsPort: number;
let webhook: ChildProcess | undefined;

function selfSigned(): void {
  selfSignedCertificate({ cert: `${cert}.new`, key: `${key}.new` }, '127.0.0.1', 'IP:127.0.0.1');
  // Swap both files in, as a renewed Secret would be.
  fs.renameSync(`${key}.new`, key);
  fs.renameSync(`${cert}.new`, cert);
}

function startWebhook(): ChildProcess {
  const child = spawn(
    process.execPath,
    [
      bin,
      'webhook',
      '--listen',
      `127.0.0.1:${port}`,
      '--metrics-listen',
      `127.0.0.1:${metricsPort}`,
      '--tls-cert-file',
      cert,
      '--tls-key-file',
      key,
    ],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  child.stdout?.resume();
  return child;
}

/** The SHA-256 of the certificate the webhook serves now. */
async function servedFingerprint(): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = tls.connect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => {
      resolve(createHash('sha256').update(socket.getPeerCertificate().raw).digest('hex'));
      socket.end();
    });
    socket.once('error', reject);
  });
}

const fileFingerprint = () =>
  createHash('sha256')
    .update(new X509Certificate(fs.readFileSync(cert)).raw)
    .digest('hex');

async function deployAndGetPod(
  kc: KubeConfig,
  namespace: string,
  name: string,
  podLabels: Record<string, string> = {},
): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  await core
    .createNamespacedConfigMap({
      namespace,
      body: { metadata: { name: 'web-config' }, data: { 'app.yaml': 'a: 1\n' } },
    })
    .catch(() => undefined);
  const d = webDeployment(1);
  d.metadata = { name };
  if (d.spec) {
    d.spec.selector = { matchLabels: { app: name } };
    d.spec.template.metadata = { labels: { app: name, ...podLabels } };
    const { serviceAccountName: _ignored, ...spec } = d.spec.template.spec ?? { containers: [] };
    d.spec.template.spec = { ...spec, containers: spec.containers.filter((c) => c.name === 'app') };
  }
  await kc.makeApiClient(AppsV1Api).createNamespacedDeployment({ namespace, body: d });
  return waitFor(
    async () => (await core.listNamespacedPod({ namespace, labelSelector: `app=${name}` })).items[0],
    {
      what: `a Pod of ${namespace}/${name}`,
    },
  );
}

const hasSidecar = (pod: V1Pod) =>
  (pod.spec?.initContainers ?? []).some((c) => c.name === 'config-sync' && c.restartPolicy === 'Always');

beforeAll(async () => {
  port = await freeLoopbackPort();
  metricsPort = await freeLoopbackPort();
  selfSigned();
  webhook = startWebhook();
  await waitFor(async () => (await servedFingerprint()) === fileFingerprint() || undefined, {
    what: 'the webhook to serve TLS',
  });
  const cp = controlPlane();
  expect(
    spawnSync(cp.kubectl, [
      '--kubeconfig',
      cp.adminKubeconfig,
      'label',
      'namespace',
      labelled.name,
      'config-sync.io/inject=enabled',
    ]).status,
  ).toBe(0);
  // The shipped registration's two entries (namespace label, or Pod label outside labelled
  // namespaces), with a URL on 127.0.0.1 instead of the in-cluster Service.
  const entry = (
    name: string,
    selectors: Pick<V1MutatingWebhook, 'namespaceSelector' | 'objectSelector'>,
  ): V1MutatingWebhook => ({
    name,
    admissionReviewVersions: ['v1'],
    sideEffects: 'None',
    failurePolicy: 'Ignore',
    timeoutSeconds: 5,
    clientConfig: {
      url: `https://127.0.0.1:${port}/mutate`,
      caBundle: fs.readFileSync(cert).toString('base64'),
    },
    rules: [
      {
        operations: ['CREATE'],
        apiGroups: [''],
        apiVersions: ['v1'],
        resources: ['pods'],
        scope: 'Namespaced',
      },
    ],
    ...selectors,
  });
  await labelled.admin.makeApiClient(AdmissionregistrationV1Api).createMutatingWebhookConfiguration({
    body: {
      metadata: { name: configName },
      webhooks: [
        entry('namespace.inject.config-sync.io', {
          namespaceSelector: { matchLabels: { 'config-sync.io/inject': 'enabled' } },
        }),
        entry('workload.inject.config-sync.io', {
          namespaceSelector: {
            matchExpressions: [{ key: 'config-sync.io/inject', operator: 'NotIn', values: ['enabled'] }],
          },
          objectSelector: { matchLabels: { 'config-sync.io/inject': 'enabled' } },
        }),
      ],
    },
  });
  // The API server picks up a new webhook configuration within moments: probe with a dry-run Pod.
  const core = labelled.admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: labelled.name,
    body: { metadata: { name: 'probe' }, data: { a: 'b' } },
  });
  await waitFor(
    async () => {
      const probe = await core.createNamespacedPod({
        namespace: labelled.name,
        dryRun: 'All',
        body: {
          metadata: { name: 'probe' },
          spec: {
            volumes: [{ name: 'c', configMap: { name: 'probe' } }],
            containers: [{ name: 'app', image: 'x', volumeMounts: [{ name: 'c', mountPath: '/c' }] }],
          },
        },
      });
      return hasSidecar(probe) || undefined;
    },
    { what: 'the webhook configuration to take effect', intervalMs: 250 },
  );
});

afterAll(async () => {
  await labelled.admin
    .makeApiClient(AdmissionregistrationV1Api)
    .deleteMutatingWebhookConfiguration({ name: configName })
    .catch(() => undefined);
  webhook?.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('config-sync webhook', () => {
  it('injects the sidecar into Pods the controller-manager creates in a labelled namespace', async () => {
    const pod = await deployAndGetPod(labelled.admin, labelled.name, 'web');
    expect(hasSidecar(pod)).toBe(true);
    const sidecar = pod.spec?.initContainers?.find((c) => c.name === 'config-sync');
    // Its own read-only config mount, its state emptyDir, and (added by the ServiceAccount
    // admission plugin, which the API server re-runs after a webhook mutated the Pod) the token
    // the agent needs.
    expect(sidecar?.volumeMounts).toEqual([
      expect.objectContaining({ name: 'config', mountPath: '/etc/app', readOnly: true }),
      { name: 'config-sync-state', mountPath: '/var/run/config-sync' },
      expect.objectContaining({
        name: expect.stringMatching(/^kube-api-access-/),
        mountPath: '/var/run/secrets/kubernetes.io/serviceaccount',
      }),
    ]);
  });

  it('leaves an unlabelled namespace untouched', async () => {
    expect(hasSidecar(await deployAndGetPod(plain.admin, plain.name, 'web'))).toBe(false);
  });

  it('injects a workload labelled config-sync.io/inject=enabled in an unlabelled namespace', async () => {
    expect(
      hasSidecar(
        await deployAndGetPod(plain.admin, plain.name, 'opted-in', { 'config-sync.io/inject': 'enabled' }),
      ),
    ).toBe(true);
  });

  it('reloads a renewed certificate without a restart', async () => {
    const before = await servedFingerprint();
    selfSigned();
    const renewed = fileFingerprint();
    expect(renewed).not.toBe(before);
    await waitFor(async () => (await servedFingerprint()) === renewed || undefined, {
      what: 'the renewed certificate to be served',
    });
  });

  it('counts each admission by decision, its warnings and the requests it refused, on --metrics-listen', async () => {
    // A body that is not JSON: refused before any decision.
    const garbage = await new Promise<number>((resolve, reject) => {
      const req = https.request(
        { host: '127.0.0.1', port, path: '/mutate', method: 'POST', rejectUnauthorized: false },
        (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        },
      );
      req.once('error', reject);
      req.end('{not json');
    });
    expect(garbage).toBe(400);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    // web and opted-in, and the dry-run probes before them: each injected.
    expect(
      sample(metrics, 'config_sync_webhook_admissions_total', { decision: 'injected' }),
    ).toBeGreaterThanOrEqual(2);
    // The test's Deployments run as ServiceAccount "default": injected with a warning.
    expect(
      sample(metrics, 'config_sync_webhook_warnings_total', { decision: 'injected' }),
    ).toBeGreaterThanOrEqual(2);
    expect(sample(metrics, 'config_sync_webhook_refused_requests_total', { reason: 'not_json' })).toBe(1);
    expect(metrics).toContain('config_sync_process_resident_memory_bytes');
    expect((await fetch(`http://127.0.0.1:${metricsPort}/healthz`)).status).toBe(200);
  });

  it('down, it never blocks Pod creation (failurePolicy Ignore)', async () => {
    webhook?.kill('SIGTERM');
    await new Promise((resolve) => webhook?.once('exit', resolve));
    const pod = await deployAndGetPod(labelled.admin, labelled.name, 'while-down');
    expect(hasSidecar(pod)).toBe(false);
    // Nothing else would say the Pod runs unchecked: `status` lists it as NotInjected, exit 1.
    const status = spawnSync(
      process.execPath,
      [bin, 'status', '-n', labelled.name, '--kubeconfig', controlPlane().adminKubeconfig],
      { encoding: 'utf8', env: { PATH: process.env.PATH ?? '', HOME: dir } },
    );
    const row = status.stdout.split('\n').find((l) => l.startsWith(pod.metadata?.name ?? '?'));
    expect(row).toMatch(/\bNotInjected\s+NotInjected\b/);
    expect(status.stdout).toMatch(/while-down: 0\/1 in sync \(1 without the sidecar it asked for\)/);
    expect(status.status).toBe(1);
  });
});

describe('deploy/webhook', () => {
  it('applies to the API server (the service-backed registration, then removed so it does not interfere)', () => {
    const cp = controlPlane();
    const apply = spawnSync(
      cp.kubectl,
      ['--kubeconfig', cp.adminKubeconfig, 'apply', '--server-side', '-k', path.join(root, 'deploy/webhook')],
      {
        encoding: 'utf8',
      },
    );
    expect(apply.stderr).toBe('');
    expect(apply.stdout).toContain(
      'mutatingwebhookconfiguration.admissionregistration.k8s.io/config-sync-inject serverside-applied',
    );
    spawnSync(cp.kubectl, [
      '--kubeconfig',
      cp.adminKubeconfig,
      'delete',
      'mutatingwebhookconfiguration',
      'config-sync-inject',
    ]);
  });
});
