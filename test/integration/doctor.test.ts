// `config-sync doctor` against the real API server, run as a person runs it (the built CLI in a
// child process), in each of the scope issue's motivating scenarios. Each must give a one-line
// diagnosis on the first line of output and the right exit code.

import { spawn, spawnSync } from 'node:child_process';
import { generateKeyPairSync, sign } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type V1PolicyRule } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { bin, pauseWeb } from '../cluster/app.ts';
import { writeKubeconfig } from '../cluster/control-plane.ts';
import { createServiceAccountIdentity, type Identity } from '../cluster/identities.ts';
import { layInClusterDir } from '../cluster/in-cluster.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';
import { apiServerProxy, CLUSTER_NAME, clusterNameGuardModule } from './support-proxy.ts';

const ns = useNamespace('doctor');
const SECRET_VALUE = 'hunter2-never-print-me';

/** The least-privilege Role for the agent of Deployment web, written out by hand. */
function agentRules(podName: string): V1PolicyRule[] {
  void podName; // pods cannot be pinned by name: they change with every rollout
  return [
    { apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] },
    { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
    { apiGroups: [''], resources: ['events'], verbs: ['create'] },
    { apiGroups: ['config-sync.io'], resources: ['agents'], verbs: ['restricted'] },
    {
      apiGroups: [''],
      resources: ['configmaps'],
      verbs: ['get', 'list', 'watch'],
      resourceNames: ['app-config'],
    },
    { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'], resourceNames: ['db'] },
    { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] },
    { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'], resourceNames: ['web'] },
  ];
}

let pod: { name: string; uid: string };
let agent: Identity;
let tmp: string;

beforeAll(async () => {
  tmp = tempDir('doctor-');
  const core = ns.admin.makeApiClient(CoreV1Api);
  await core.createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'app-config' }, data: { 'app.yaml': 'level: info\n' } },
  });
  await core.createNamespacedSecret({
    namespace: ns.name,
    body: { metadata: { name: 'db' }, data: { password: Buffer.from(SECRET_VALUE).toString('base64') } },
  });
  await core.createNamespacedServiceAccount({ namespace: ns.name, body: { metadata: { name: 'agent' } } });
  const labels = { app: 'web' };
  await ns.admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name: 'web' },
      spec: {
        replicas: 1,
        selector: { matchLabels: labels },
        template: {
          metadata: { labels },
          spec: {
            serviceAccountName: 'agent',
            volumes: [{ name: 'config', configMap: { name: 'app-config' } }],
            containers: [
              {
                name: 'app',
                image: 'config-sync.invalid/app:never-pulled',
                volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
                env: [{ name: 'DB_PASSWORD', valueFrom: { secretKeyRef: { name: 'db', key: 'password' } } }],
              },
              {
                name: 'config-sync',
                image: 'config-sync.invalid/agent:never-pulled',
                volumeMounts: [{ name: 'config', mountPath: '/etc/app', readOnly: true }],
              },
            ],
          },
        },
      },
    },
  });
  pod = await waitFor(
    async () => {
      const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: 'app=web' });
      const p = list.items[0];
      return p?.metadata?.name && p.metadata.uid ? { name: p.metadata.name, uid: p.metadata.uid } : undefined;
    },
    { what: 'the pod of Deployment web' },
  );
  agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'agent',
    existingServiceAccount: true,
    rules: agentRules(pod.name),
    bindToPod: pod,
  });
});

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  first: string;
}

function doctor(args: string[], env: Record<string, string>): Run {
  const home = fs.mkdtempSync(path.join(tmp, 'home-'));
  const res = spawnSync(process.execPath, [bin, 'doctor', ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: home, ...env },
  });
  const out = {
    status: res.status,
    stdout: res.stdout,
    stderr: res.stderr,
    first: res.stdout.split('\n')[0] ?? '',
  };
  // No scenario may print a Secret value, whatever it reports.
  expect(`${out.stdout}${out.stderr}`).not.toContain(SECRET_VALUE);
  return out;
}

/** Environment of a process in the agent's pod: in-cluster files, downward-API variables. */
function inPod(
  token: string,
  over: { podNamespace?: string; saNamespace?: string } = {},
): Record<string, string> {
  const root = fs.mkdtempSync(path.join(tmp, 'pod-'));
  const layout = layInClusterDir(root, controlPlane(), { token, namespace: over.saNamespace ?? ns.name });
  return {
    ...layout.env,
    CONFIG_SYNC_SERVICE_ACCOUNT_DIR: layout.serviceAccountDir,
    POD_NAMESPACE: over.podNamespace ?? ns.name,
    POD_NAME: pod.name,
  };
}

function kubeconfigWith(token: string, namespace: string | undefined): string {
  const file = path.join(fs.mkdtempSync(path.join(tmp, 'kc-')), 'config');
  writeKubeconfig(file, {
    server: controlPlane().server,
    caPem: controlPlane().caPem,
    token,
    user: 'agent',
    namespace,
  });
  return file;
}

describe('doctor in a well-configured pod', () => {
  it('says ok on the first line and shows scope, identity, targets and every permission', () => {
    const run = doctor([], inPod(agent.token));
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    expect(run.first).toBe(
      `ok: config-sync can work in namespace "${ns.name}" as ${agent.username} (14 permissions checked)`,
    );
    expect(run.stdout).toContain(`namespace    ${ns.name}   from POD_NAMESPACE`);
    expect(run.stdout).toContain(`extra   authentication.kubernetes.io/pod-name=${pod.name}`);
    expect(run.stdout).toMatch(/owner ReplicaSet web-[a-z0-9]+ -> Deployment web/);
    expect(run.stdout).toContain('ConfigMap app-config, Secret db');
    expect(run.stdout).toContain('server  v1.36.3');
    expect(run.stdout).not.toContain('MISSING');
  });

  it('-o json carries the same verdict for scripts', () => {
    const run = doctor(['-o', 'json'], inPod(agent.token));
    const report = JSON.parse(run.stdout) as {
      ok: boolean;
      access: { allowed: boolean }[];
      scope: { namespace: unknown };
      serverVersion: string;
      notes: string[];
    };
    expect(report.ok).toBe(true);
    expect(report.access.every((a) => a.allowed)).toBe(true);
    expect(report.scope.namespace).toEqual({ value: ns.name, source: 'POD_NAMESPACE' });
    // The test server is new enough for all of config-sync: its version is read, and nothing is said of it.
    expect(report.serverVersion).toMatch(/^v1\.36\./);
    expect(report.notes.filter((n) => /Kubernetes|vMAJOR/.test(n))).toEqual([]);
  });

  it('notes, before any drift, that a restart of a paused Deployment waits for its resume', async () => {
    const pause = (paused: boolean) => pauseWeb(ns.admin, ns.name, paused);
    const note =
      'note: drift would not be healed by a restart now: Deployment web is paused: a restart rolls out only when it is resumed (kubectl rollout resume deployment/web)';
    expect(doctor([], inPod(agent.token)).stdout).not.toContain(note);
    await pause(true);
    try {
      const run = doctor([], inPod(agent.token));
      // A note, not a problem: everything config-sync needs is still there.
      expect(run.status).toBe(0);
      expect(run.stdout).toContain(note);
    } finally {
      await pause(false);
    }
  });
});

describe('doctor behind a proxy', () => {
  // The proxy runs in this process: the CLI is run without blocking it (spawnSync would).
  async function doctorThroughProxy(args: string[], env: Record<string, string>): Promise<Run> {
    const home = fs.mkdtempSync(path.join(tmp, 'home-'));
    const child = spawn(process.execPath, [bin, 'doctor', ...args], {
      env: { PATH: process.env.PATH ?? '', HOME: home, ...env },
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (c: string) => {
      stdout += c;
    });
    child.stderr.setEncoding('utf8').on('data', (c: string) => {
      stderr += c;
    });
    const status = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(`${stdout}${stderr}`).not.toContain(SECRET_VALUE);
    return { status, stdout, stderr, first: stdout.split('\n')[0] ?? '' };
  }

  it('in a Pod with HTTPS_PROXY: goes through it to the Service, and shows where it came from, never the password', async () => {
    const proxy = await apiServerProxy();
    try {
      const env = {
        ...inPod(agent.token),
        KUBERNETES_SERVICE_HOST: CLUSTER_NAME,
        HTTPS_PROXY: `http://ops:pa55word@127.0.0.1:${proxy.port}`,
        NO_PROXY: '10.0.0.0/8',
        NODE_OPTIONS: `--require ${clusterNameGuardModule(tmp)}`,
      };
      const run = await doctorThroughProxy([], env);
      expect(run.status).toBe(0);
      expect(run.first).toMatch(/^ok: /);
      expect(run.stdout).toContain(`proxy        http://ops@127.0.0.1:${proxy.port}   from HTTPS_PROXY`);
      expect(proxy.tunnels.length).toBeGreaterThanOrEqual(1);
      expect(new Set(proxy.tunnels)).toEqual(new Set([`${CLUSTER_NAME}:${controlPlane().port}`]));
      const json = await doctorThroughProxy(['-o', 'json'], env);
      expect((JSON.parse(json.stdout) as { scope: { proxy: unknown } }).scope.proxy).toEqual({
        shown: `http://ops@127.0.0.1:${proxy.port}`,
        source: 'HTTPS_PROXY',
      });
      expect(`${run.stdout}${run.stderr}${json.stdout}${json.stderr}`).not.toContain('pa55word');
    } finally {
      proxy.close();
    }
  });

  it('says why a proxy that is set is not used', () => {
    const run = doctor([], { ...inPod(agent.token), HTTPS_PROXY: 'http://127.0.0.1:9' });
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(
      `proxy        none: HTTPS_PROXY is set, but ${controlPlane().host} is a loopback address, never proxied: straight to the server`,
    );
  });

  it('a proxy that refuses: exit 3, the proxy, its source and the fix on the first line', async () => {
    const proxy = await apiServerProxy('403 Forbidden');
    try {
      const run = await doctorThroughProxy([], {
        ...inPod(agent.token),
        KUBERNETES_SERVICE_HOST: CLUSTER_NAME,
        HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
        NODE_OPTIONS: `--require ${clusterNameGuardModule(tmp)}`,
      });
      expect(run.status).toBe(3);
      expect(`${run.stdout}${run.stderr}`).toContain(
        `the proxy http://127.0.0.1:${proxy.port} (from HTTPS_PROXY)`,
      );
      expect(`${run.stdout}${run.stderr}`).toContain('403 Forbidden');
      expect(`${run.stdout}${run.stderr}`).toContain(`add ${CLUSTER_NAME} to NO_PROXY`);
    } finally {
      proxy.close();
    }
  });
});

describe('the motivating scenarios', () => {
  it('S1: Role and RoleBinding in namespace A, agent in B: the refusal and the fix, which works', async () => {
    const other = await ns.admin
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { generateName: 'doctor-a-' } } });
    const a = other.metadata?.name ?? '';
    try {
      const misplaced = await createServiceAccountIdentity(ns.admin, {
        namespace: ns.name,
        name: 'agent-s1',
        rules: agentRules(pod.name),
        roleNamespace: a,
      });
      const env = inPod(misplaced.token);
      const run = doctor(['--fix'], env);
      expect(run.status).toBe(3);
      // Nothing in its own namespace is allowed, not even reading its Pod: its sources are unknown.
      expect(run.first).toBe(
        `problem: ${misplaced.username} may not get pods "${pod.name}" in namespace "${ns.name}" (and 4 more)`,
      );
      expect(run.stdout).toContain(`grant it with a Role and RoleBinding in namespace "${ns.name}"`);
      expect(run.stdout).toContain(`could not read Pod ${pod.name} (forbidden)`);

      // --fix prints the whole Role; applied, the next run can read the Pod and learns what else
      // is needed (the Deployment inferred from the ReplicaSet name); applied again, ok.
      const applyFix = (stdout: string) => {
        const yaml = stdout.slice(stdout.indexOf('---\n'));
        expect(yaml).toContain(`namespace: ${ns.name}`);
        const apply = spawnSync(
          controlPlane().kubectl,
          ['--kubeconfig', controlPlane().adminKubeconfig, 'apply', '-f', '-'],
          {
            input: yaml,
            encoding: 'utf8',
          },
        );
        expect(apply.stderr).toBe('');
      };
      applyFix(run.stdout);
      const second = doctor(['--fix'], env);
      expect(second.first).toBe(
        `problem: ${misplaced.username} may not get configmaps "app-config" in namespace "${ns.name}" (and 8 more)`,
      );
      expect(second.stdout).toMatch(
        /owner ReplicaSet web-\w+ -> Deployment web \(inferred from the ReplicaSet name\)/,
      );
      expect(second.first).toBe(
        `problem: ${misplaced.username} may not get configmaps "app-config" in namespace "${ns.name}" (and 8 more)`,
      );
      applyFix(second.stdout);
      const third = doctor([], env);
      expect(third.first).toMatch(/^ok: /);
      expect(third.status).toBe(0);
    } finally {
      await ns.admin.makeApiClient(CoreV1Api).deleteNamespace({ name: a });
    }
  });

  it('S2: the kubeconfig context points at another namespace than the one given: reported', () => {
    const kubeconfig = kubeconfigWith(agent.token, 'somewhere-else');
    const run = doctor(['--kubeconfig', kubeconfig, '--namespace', ns.name, '--pod', pod.name], {});
    expect(run.status).toBe(0);
    expect(run.stdout).toContain(
      `! namespace "${ns.name}" from --namespace differs from "somewhere-else" from kubeconfig context "agent"`,
    );
  });

  it('a kubeconfig exec plugin that takes its time: doctor says it is waiting for it, then goes on', () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'exec-slow-'));
    const plugin = path.join(dir, 'plugin.sh');
    const credential = JSON.stringify({
      apiVersion: 'client.authentication.k8s.io/v1',
      kind: 'ExecCredential',
      status: { token: agent.token },
    });
    fs.writeFileSync(plugin, `#!/bin/sh\nsleep 4\necho '${credential}'\n`, { mode: 0o755 });
    const kubeconfig = kubeconfigWith(agent.token, ns.name);
    const config = JSON.parse(fs.readFileSync(kubeconfig, 'utf8')) as { users: { user: unknown }[] };
    for (const u of config.users)
      u.user = { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin } };
    fs.writeFileSync(kubeconfig, JSON.stringify(config));
    const run = doctor(['--kubeconfig', kubeconfig, '--pod', pod.name], {});
    expect(run.stderr).toBe(
      `config-sync: waiting for the credential plugin "${plugin}" of kubeconfig user "agent" (3 s so far; stopped after 30 s); if it needs a login, run it yourself first\n`,
    );
    expect(run.status).toBe(0);
    expect(run.first).toContain(`ok: config-sync can work in namespace "${ns.name}" as ${agent.username}`);
    expect(run.stdout).not.toContain(agent.token);
  });

  it('S3: POD_NAMESPACE disagrees with the service-account namespace file', () => {
    const run = doctor([], inPod(agent.token, { podNamespace: 'team-b' }));
    expect(run.status).toBe(2);
    expect(run.first).toMatch(
      /^problem: the pod's own namespace is ambiguous: namespace "team-b" from POD_NAMESPACE differs from "doctor-\w+" from .*\/namespace \[\+\d+ more problems?\]$/,
    );
  });

  it('S4: no namespace from any source', () => {
    const run = doctor(['--kubeconfig', kubeconfigWith(agent.token, undefined)], {});
    expect(run.status).toBe(2);
    expect(run.first).toMatch(/^problem: no namespace from any source/);
    expect(run.stdout).toContain('never assumes "default"');
  });

  it('a namespace that does not exist: the one problem, named, exit 2', () => {
    const kubeconfig = controlPlane().adminKubeconfig;
    const run = doctor(['--kubeconfig', kubeconfig, '-n', 'no-such-ns'], {});
    expect(run.status).toBe(2);
    expect(run.first).toBe(
      `problem: namespace "no-such-ns" (from --namespace) does not exist on ${controlPlane().server}`,
    );
    expect(run.stdout).toContain('kubectl get namespaces');
    expect(run.stdout).not.toContain('MISSING');
  });

  it('S5: no kubeconfig and no service account: an error, and nothing dials localhost:8080', async () => {
    const connections: number[] = [];
    const trap = net.createServer((socket) => {
      connections.push(Date.now());
      socket.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      trap.once('error', reject);
      trap.listen(8080, '127.0.0.1', resolve);
    });
    try {
      const run = doctor([], {});
      expect(run.status).toBe(2);
      expect(run.first).toMatch(
        /^problem: no Kubernetes API configured: no --kubeconfig, no KUBECONFIG, not in a pod/,
      );
      expect(run.stdout).toContain('never falls back to http://localhost:8080');
      expect(connections).toEqual([]);
    } finally {
      await new Promise((resolve) => trap.close(resolve));
    }
  });

  it('S7: a revoked token (its bound Pod deleted): 401 explained with the identity and the token file', async () => {
    const doomed = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'agent',
      existingServiceAccount: true,
      boundPodName: 'doomed',
    });
    const env = inPod(doomed.token);
    expect(doctor([], env).first).not.toContain('401');
    await ns.admin
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ name: 'doomed', namespace: ns.name, gracePeriodSeconds: 0 });
    // The API server caches token reviews for a few seconds, so the revocation reaches different
    // requests at slightly different moments: wait until the very first request is refused.
    const expected = `problem: the API server at ${controlPlane().server} rejected the credentials (401) for create selfsubjectreviews.authentication.k8s.io`;
    const run = await waitFor(
      () => {
        const r = doctor([], env);
        return r.first === expected ? r : undefined;
      },
      { what: 'the bound token to be rejected', timeoutMs: 30_000, intervalMs: 500 },
    );
    expect(run.status).toBe(3);
    expect(run.stdout).toContain(`the token in ${env.CONFIG_SYNC_SERVICE_ACCOUNT_DIR}/token was rejected`);
    expect(run.stdout).toContain('bound Pod was deleted');
  });

  it('S8: a token for another audience is rejected and explained', async () => {
    const foreign = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'agent',
      existingServiceAccount: true,
      audiences: ['https://vault.example'],
    });
    const run = doctor([], inPod(foreign.token));
    expect(run.status).toBe(3);
    expect(run.first).toContain('rejected the credentials (401)');
    expect(run.stdout).toContain('issued for another audience or issuer');
  });

  it('S8: a token from another issuer is rejected and explained', () => {
    const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
    const b64 = (o: object) => Buffer.from(JSON.stringify(o)).toString('base64url');
    const now = Math.floor(Date.now() / 1000);
    const unsigned = `${b64({ alg: 'RS256', typ: 'JWT' })}.${b64({
      iss: 'https://issuer.elsewhere.example',
      sub: `system:serviceaccount:${ns.name}:agent`,
      aud: [controlPlane().serviceAccountIssuer],
      iat: now,
      exp: now + 600,
    })}`;
    const jwt = `${unsigned}.${sign('RSA-SHA256', Buffer.from(unsigned), privateKey).toString('base64url')}`;
    const run = doctor([], inPod(jwt));
    expect(run.status).toBe(3);
    expect(run.first).toContain('rejected the credentials (401)');
    expect(run.stdout).toContain('issued for another audience or issuer');
  });
});
