// config-sync inject, end to end: the shipped example without its sidecar, piped through the
// CLI, applied to the real API server in a Pod Security "restricted" namespace.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { CoreV1Api } from '@kubernetes/client-node';
import { beforeAll, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { bin, root } from '../cluster/app.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';

const ns = useNamespace('inject');

function kubectl(args: string[], input?: string) {
  const cp = controlPlane();
  return spawnSync(cp.kubectl, ['--kubeconfig', cp.adminKubeconfig, ...args], {
    encoding: 'utf8',
    ...(input ? { input } : {}),
  });
}

beforeAll(() => {
  const labels = ['enforce', 'warn'].map((mode) => `pod-security.kubernetes.io/${mode}=restricted`);
  expect(kubectl(['label', 'namespace', ns.name, ...labels]).status).toBe(0);
  expect(
    kubectl(['apply', '--server-side', '-n', ns.name, '-k', path.join(root, 'deploy/sidecar/rbac')]).stderr,
  ).toBe('');
});

it('injects the example workload, and the API server admits the result with no warnings', async () => {
  const example = parse(fs.readFileSync(path.join(root, 'deploy/sidecar/example/deployment.yaml'), 'utf8'));
  example.spec.template.spec.initContainers = undefined;
  example.spec.template.spec.serviceAccountName = undefined;
  const configMap = fs.readFileSync(path.join(root, 'deploy/sidecar/example/configmap.yaml'), 'utf8');
  const input = `${configMap}---\n${stringify(example)}`;

  const injected = spawnSync(process.execPath, [bin, 'inject'], { input, encoding: 'utf8' });
  expect(injected.status).toBe(0);
  expect(injected.stderr).toBe('injected: Deployment web\n');
  expect(injected.stdout.startsWith(configMap)).toBe(true);

  const apply = kubectl(['apply', '--server-side', '-n', ns.name, '-f', '-'], injected.stdout);
  expect(apply.stderr).toBe('');
  expect(apply.status).toBe(0);
  const pod = await waitFor(
    async () =>
      (
        await ns.admin
          .makeApiClient(CoreV1Api)
          .listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' })
      ).items[0],
    { what: 'a Pod of the injected Deployment, admitted under restricted' },
  );
  expect(pod.spec?.serviceAccountName).toBe('config-sync-agent');
  expect(pod.spec?.initContainers?.map((c) => [c.name, c.restartPolicy])).toEqual([
    ['config-sync', 'Always'],
  ]);

  // Injecting what was injected changes nothing.
  const again = spawnSync(process.execPath, [bin, 'inject'], { input: injected.stdout, encoding: 'utf8' });
  expect(again.stdout).toBe(injected.stdout);
  expect(again.stderr).toBe('');
});
