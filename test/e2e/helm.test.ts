// The Helm chart on the real node: `helm install` with the chart's own certificates runs the
// webhook in a Pod, the agent's identity for an app namespace comes from the chart's values, the
// webhook injects the sidecar (with the chart's sidecar defaults) into a plain workload, the Pod
// runs InSync, and `kubectl config-sync status`, run through kubectl's plugin mechanism, says so;
// and the chart's node agent (a release of its own) serves a plain Pod of an opted-in namespace.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { bin, root } from '../cluster/app.ts';
import { buildTool } from '../cluster/assets.ts';
import { adminKubeConfig, createTestNamespace } from '../cluster/identities.ts';
import { NODE_BASE } from '../cluster/node.ts';
import { cluster, describeOnNode, kubectl, plainWorkload, useNode, webPodsInSync } from './support.ts';

const run = promisify(execFile);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'e2e-helm-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
let helmBin = '';

beforeAll(async () => {
  helmBin = await buildTool('helm');
}, 900_000);

function env(): NodeJS.ProcessEnv {
  fs.mkdirSync(path.join(dir, 'plugins'), { recursive: true });
  const plugin = path.join(dir, 'plugins', 'kubectl-config_sync');
  if (!fs.existsSync(plugin)) fs.symlinkSync(bin, plugin);
  return {
    PATH: [path.join(dir, 'plugins'), path.dirname(process.execPath), process.env.PATH ?? ''].join(':'),
    HOME: dir,
    KUBECONFIG: cluster().plane.adminKubeconfig,
    HELM_CACHE_HOME: path.join(dir, 'cache'),
    HELM_CONFIG_HOME: path.join(dir, 'config'),
    HELM_DATA_HOME: path.join(dir, 'data'),
  };
}

describeOnNode('the Helm chart on a real node', () => {
  useNode();

  it('installs the webhook, which injects the sidecar into a real Pod that runs InSync; kubectl config-sync status says so', async () => {
    const admin = adminKubeConfig(cluster().plane);
    const system = await createTestNamespace(admin, 'e2e-helm-system');
    const app = await createTestNamespace(admin, 'e2e-helm-app');
    for (const ns of [system, app])
      await kubectl('label', 'namespace', ns, 'pod-security.kubernetes.io/enforce=restricted', '--overwrite');
    const install = await run(
      helmBin,
      [
        'install',
        'config-sync',
        path.join(root, 'deploy/helm/config-sync'),
        '-n',
        system,
        '--set',
        'webhook.replicas=1',
        '--set',
        'sidecar.grace=2m',
        '--set',
        `agent.namespaces[0].namespace=${app}`,
        '--set',
        'agent.namespaces[0].configMaps[0]=web-config',
        '--set',
        'agent.namespaces[0].workload.kind=Deployment',
        '--set',
        'agent.namespaces[0].workload.name=web',
        '--wait',
        '--timeout',
        '180s',
      ],
      { encoding: 'utf8', env: env() },
    );
    expect(install.stderr).toBe('');

    await kubectl('label', 'namespace', app, 'config-sync.io/inject=enabled');
    await kubectl('apply', '-n', app, '-f', path.join(root, 'deploy/sidecar/example/configmap.yaml'));
    fs.writeFileSync(path.join(dir, 'web.json'), JSON.stringify(plainWorkload()));
    await kubectl('apply', '-n', app, '-f', path.join(dir, 'web.json'));

    const [pod] = await webPodsInSync(admin, app, 1);
    const sidecar = pod?.spec?.initContainers?.find((c) => c.name === 'config-sync');
    expect(sidecar?.env).toEqual(expect.arrayContaining([{ name: 'CONFIG_SYNC_GRACE', value: '2m' }]));

    const status = await run(cluster().plane.kubectl, ['config-sync', 'status', '-n', app], {
      encoding: 'utf8',
      env: env(),
    });
    expect(status.stdout).toContain('web: 1/1 in sync');

    // The node agent from the chart, as a release of its own in a namespace Pod Security lets
    // mount hostPaths (privileged), serving a Pod of another namespace opted in by its label.
    const nodeSystem = await createTestNamespace(admin, 'e2e-helm-node');
    const served = await createTestNamespace(admin, 'e2e-helm-served');
    await kubectl(
      'label',
      'namespace',
      nodeSystem,
      'pod-security.kubernetes.io/enforce=privileged',
      '--overwrite',
    );
    await kubectl('label', 'namespace', served, 'config-sync.io/node-agent=enabled');
    const nodeInstall = await run(
      helmBin,
      [
        'install',
        'config-sync-node',
        path.join(root, 'deploy/helm/config-sync'),
        '-n',
        nodeSystem,
        ...['webhook.enabled=false', 'admissionPolicies.enabled=false', 'nodeAgent.enabled=true']
          .concat([
            `nodeAgent.namespaces[0]=${served}`,
            `nodeAgent.kubeletRoot=${path.join(NODE_BASE, 'kubelet')}`,
          ])
          .concat([`nodeAgent.stateDir=${path.join(NODE_BASE, 'config-sync-state')}`])
          .flatMap((v) => ['--set', v]),
        '--wait',
        '--timeout',
        '180s',
      ],
      { encoding: 'utf8', env: env() },
    );
    expect(nodeInstall.stderr).toBe('');
    await kubectl('apply', '-n', served, '-f', path.join(root, 'deploy/sidecar/example/configmap.yaml'));
    const plain = plainWorkload();
    plain.spec.template.spec.serviceAccountName = 'default';
    fs.writeFileSync(path.join(dir, 'served.json'), JSON.stringify(plain));
    await kubectl('apply', '-n', served, '-f', path.join(dir, 'served.json'));
    const [servedPod] = await webPodsInSync(admin, served, 1);
    expect(servedPod?.spec?.initContainers ?? []).toEqual([]);
    await run(helmBin, ['uninstall', 'config-sync-node', '-n', nodeSystem, '--wait'], {
      encoding: 'utf8',
      env: env(),
    });

    await run(helmBin, ['uninstall', 'config-sync', '-n', system, '--wait'], {
      encoding: 'utf8',
      env: env(),
    });
    expect(
      await kubectl(
        'get',
        'mutatingwebhookconfiguration',
        '-l',
        'app.kubernetes.io/instance=config-sync',
        '-o',
        'name',
      ),
    ).toBe('');
  });
});
