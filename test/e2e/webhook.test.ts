// The admission webhook deployed in the cluster from deploy/webhook, unmodified but for what
// cert-manager would do there (the TLS Secret and the caBundle): it injects the sidecar into a
// real Pod of a labelled namespace, and that Pod runs and reports InSync; its metrics port counts
// the injection.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, expect, it } from 'vitest';
import { root, sample } from '../cluster/app.ts';
import { adminKubeConfig, createTestNamespace } from '../cluster/identities.ts';
import { selfSignedCertificate } from '../cluster/self-signed.ts';
import { cluster, describeOnNode, kubectl, plainWorkload, useNode, webPodsInSync } from './support.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-webhook-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** The certificate cert-manager would issue for the webhook's Service name. */
function serviceCertificate(): { cert: string; key: string } {
  const cert = path.join(dir, 'tls.crt');
  const key = path.join(dir, 'tls.key');
  const name = 'config-sync-webhook.config-sync-system.svc';
  selfSignedCertificate({ cert, key }, name, `DNS:${name}`);
  return { cert, key };
}

describeOnNode('deploy/webhook in the cluster', () => {
  useNode();

  it('injects the sidecar into a real Pod of a labelled namespace, which runs and reports InSync', async () => {
    const { cert, key } = serviceCertificate();
    await kubectl('apply', '-k', path.join(root, 'deploy/webhook'));
    await kubectl(
      '-n',
      'config-sync-system',
      'create',
      'secret',
      'tls',
      'config-sync-webhook-tls',
      `--cert=${cert}`,
      `--key=${key}`,
    );
    const caBundle = fs.readFileSync(cert).toString('base64');
    const patch = [0, 1].map((i) => ({
      op: 'add',
      path: `/webhooks/${i}/clientConfig/caBundle`,
      value: caBundle,
    }));
    await kubectl(
      'patch',
      'mutatingwebhookconfiguration',
      'config-sync-inject',
      '--type',
      'json',
      '-p',
      JSON.stringify(patch),
    );
    await kubectl(
      '-n',
      'config-sync-system',
      'rollout',
      'status',
      'deployment/config-sync-webhook',
      '--timeout=120s',
    );

    const admin = adminKubeConfig(cluster().plane);
    const ns = await createTestNamespace(admin, 'e2e-inject');
    await kubectl(
      'label',
      'namespace',
      ns,
      'config-sync.io/inject=enabled',
      'pod-security.kubernetes.io/enforce=restricted',
    );
    await kubectl('apply', '-k', path.join(root, 'deploy/sidecar/rbac'), '-n', ns);
    await kubectl('apply', '-n', ns, '-f', path.join(root, 'deploy/sidecar/example/configmap.yaml'));
    fs.writeFileSync(path.join(dir, 'web.json'), JSON.stringify(plainWorkload()));
    await kubectl('apply', '-n', ns, '-f', path.join(dir, 'web.json'));

    const [pod] = await webPodsInSync(admin, ns, 1);
    expect(pod?.spec?.initContainers?.map((c) => c.name)).toContain('config-sync');
    const core = admin.makeApiClient(CoreV1Api);
    const events = await core.listNamespacedEvent({ namespace: ns });
    expect(events.items.some((e) => e.reason === 'Drifted' || e.reason === 'Healed')).toBe(false);

    // Its metrics port, as the chart's ServiceMonitor scrapes it: the injection counted by one
    // of the replicas.
    const webhooks = await core.listNamespacedPod({
      namespace: 'config-sync-system',
      labelSelector: 'app.kubernetes.io/name=config-sync-webhook',
    });
    let injected = 0;
    for (const w of webhooks.items) {
      const text = await (
        await fetch(`http://${w.status?.podIP}:9464/metrics`, { signal: AbortSignal.timeout(5000) })
      ).text();
      injected += sample(text, 'config_sync_webhook_admissions_total', { decision: 'injected' }) ?? 0;
    }
    expect(injected).toBeGreaterThanOrEqual(1);
  });
});
