// `config-sync status`, the fleet view, against the real API server: the Pods of a Deployment
// with the agent's condition and annotations on them (written as the agents write them), read
// with nothing but `list pods`. And the CLI as a kubectl plugin (`kubectl config-sync ...`),
// through the project's own kubectl.
import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { createKubeClient } from '../../src/kube/client.ts';
import { resolveScope } from '../../src/kube/scope.ts';
import { gatherScopeFacts } from '../../src/kube/scope-facts.ts';
import { createServiceAccountIdentity } from '../cluster/identities.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  bin,
  cli,
  createApp,
  SECRET_VALUE,
  updateConfig,
  writeMount,
} from './support-app.ts';

const ns = useNamespace('status');
const other = useNamespace('status-other');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'status-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

const asAdmin = () => ({
  PATH: process.env.PATH ?? '',
  HOME: tmp,
  KUBECONFIG: controlPlane().adminKubeconfig,
});

/** config-sync's own client, as the cluster admin: it sends the merge patches the agent sends. */
async function adminClient() {
  const facts = await gatherScopeFacts(
    { kubeconfig: { value: controlPlane().adminKubeconfig, source: 'test' } },
    {},
  );
  return createKubeClient(resolveScope(facts, 'operator'));
}

/** Writes the agent's condition on a Pod as the agent does (pods/status, strategic merge). */
async function condition(name: string, status: 'True' | 'False', reason: string, sinceSeconds: number) {
  const at = new Date(Date.now() - sinceSeconds * 1000).toISOString();
  await (await adminClient()).patch(
    { resource: 'pods', namespace: ns.name, name, subresource: 'status' },
    {
      status: {
        conditions: [
          {
            type: 'config-sync.io/InSync',
            status,
            reason,
            message: `app:/etc/app: ${reason}`,
            lastTransitionTime: at,
          },
        ],
      },
    },
    'strategic',
  );
}

/** The admin kubeconfig with its user's credentials replaced by `token`. */
function tokenKubeconfig(name: string, token: string): string {
  const config = parse(fs.readFileSync(controlPlane().adminKubeconfig, 'utf8')) as {
    users: { name: string; user: Record<string, unknown> }[];
  };
  for (const u of config.users) u.user = { token };
  const file = path.join(tmp, `${name}.kubeconfig`);
  fs.writeFileSync(file, stringify(config));
  return file;
}

// What `npm install -g` makes: `kubectl-config_sync` on the PATH (package.json "bin"), run by a
// Node 24 `node` (the launcher's #!/usr/bin/env node).
const plugins = path.join(tmp, 'plugins');
const kubectl = (...args: string[]) =>
  spawnSync(controlPlane().kubectl, args, {
    encoding: 'utf8',
    env: {
      PATH: [plugins, path.dirname(process.execPath), process.env.PATH ?? ''].join(':'),
      HOME: tmp,
      KUBECONFIG: controlPlane().adminKubeconfig,
    },
  });
beforeAll(() => {
  fs.mkdirSync(plugins);
  fs.symlinkSync(bin, path.join(plugins, 'kubectl-config_sync'));
});

let pods: AppPod[] = [];
beforeAll(async () => {
  pods = await createApp(ns.admin, ns.name, 2);
  const [a, b] = pods as [AppPod, AppPod];
  await (await adminClient()).patch(
    { resource: 'pods', namespace: ns.name, name: a.name },
    {
      metadata: {
        annotations: {
          'config-sync.io/last-config-sync': new Date(Date.now() - 60_000).toISOString(),
          'config-sync.io/matched-versions': 'ConfigMap/web-config@41',
        },
      },
    },
    'merge',
  );
  await condition(a.name, 'True', 'InSync', 600);
  await condition(b.name, 'False', 'SubPathStale', 240);
});

describe('config-sync status', () => {
  it('lists every Pod that runs the agent, a line per workload, and exits 1 on drift', async () => {
    const run = await cli(['status', '-n', ns.name], asAdmin());
    expect(run.stderr).toBe('');
    expect(run.status).toBe(1);
    const [a, b] = pods as [AppPod, AppPod];
    expect(run.stdout).toMatch(
      new RegExp(`${a.name}\\s+Deployment/web\\s+InSync\\s+InSync\\s+-\\s+\\d+s ago`),
    );
    expect(run.stdout).toMatch(
      new RegExp(`${b.name}\\s+Deployment/web\\s+Drifted\\s+SubPathStale\\s+4m\\s+-`),
    );
    expect(run.stdout).toContain('web: 1/2 drifted (SubPathStale) since 4m');
  });

  it('-o json and -o wide: the versions and the message; never a value', async () => {
    const json = await cli(['status', '-n', ns.name, '-o', 'json'], asAdmin());
    const parsed = JSON.parse(json.stdout) as { pods: { state: string }[]; workloads: { drifted: number }[] };
    expect(parsed.pods.map((p) => p.state).sort()).toEqual(['Drifted', 'InSync']);
    expect(parsed.workloads).toEqual([
      expect.objectContaining({ workload: 'Deployment/web', pods: 2, drifted: 1 }),
    ]);
    const wide = await cli(['status', '-n', ns.name, '-o', 'wide'], asAdmin());
    expect(wide.stdout).toContain('ConfigMap/web-config@41');
    expect(wide.stdout).toContain('app:/etc/app: SubPathStale');
    for (const out of [json.stdout, wide.stdout]) expect(out).not.toContain(SECRET_VALUE);
  });

  it('-l selects; -A looks in every namespace; in sync everywhere is exit 0', async () => {
    const none = await cli(['status', '-n', ns.name, '-l', 'app=nothing'], asAdmin());
    expect(none.status).toBe(0);
    expect(none.stdout).toBe('no Pod runs the config-sync agent here\n');
    const all = await cli(['status', '-A'], asAdmin());
    expect(all.stdout).toContain(`${ns.name}/web: 1/2 drifted (SubPathStale)`);
    await condition((pods[1] as AppPod).name, 'True', 'InSync', 1);
    const healed = await cli(['status', '-n', ns.name], asAdmin());
    expect(healed.status).toBe(0);
    expect(healed.stdout).toContain('web: 2/2 in sync');
  });

  it('needs nothing but list pods', async () => {
    const lister = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'pod-lister',
      rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }],
    });
    const run = await cli(
      ['status', '--kubeconfig', tokenKubeconfig('lister', lister.token), '-n', ns.name],
      {
        PATH: '',
        HOME: tmp,
      },
    );
    expect(run.stderr).toBe('');
    expect(run.stdout).toContain('web: ');
  });

  it('an identity that may not list Pods: the refusal names the missing permission, exit 3', async () => {
    const nobody = await createServiceAccountIdentity(other.admin, { namespace: other.name, name: 'nobody' });
    const file = tokenKubeconfig('nobody', nobody.token);
    const run = await cli(['status', '--kubeconfig', file, '-n', other.name], { PATH: '', HOME: tmp });
    expect(run.status).toBe(3);
    expect(run.stderr).toContain(`${nobody.username} may not list pods in namespace "${other.name}"`);
    expect(run.stderr).toContain(`Role and RoleBinding in namespace "${other.name}"`);
  });

  it('a namespace that does not exist: named as such, exit 2, not "no Pod runs the agent here"', async () => {
    const run = await cli(['status', '-n', 'no-such-ns'], asAdmin());
    expect(run.stdout).toBe('');
    expect(run.stderr).toContain(
      `error CS_CONFIG_NAMESPACE_ABSENT: namespace "no-such-ns" (from --namespace) does not exist on ${controlPlane().server}`,
    );
    expect(run.status).toBe(2);
  });

  it('no namespace anywhere and no -A: a usage error, never the default namespace', async () => {
    const admin = parse(fs.readFileSync(controlPlane().adminKubeconfig, 'utf8')) as {
      contexts: { context: Record<string, unknown> }[];
    };
    for (const c of admin.contexts) delete c.context.namespace;
    const file = path.join(tmp, 'no-namespace.kubeconfig');
    fs.writeFileSync(file, stringify(admin));
    const run = await cli(['status', '--kubeconfig', file], { PATH: '', HOME: tmp });
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('pass -n NAMESPACE, -A for every namespace');
  });
});

describe('after a real drift, with real agents', () => {
  const drift = useNamespace('status-drift');
  const agents: AgentProcess[] = [];
  afterAll(async () => {
    await Promise.all(agents.splice(0).map((a) => a.stop()));
  });

  it('status -A shows the drifted Pod and the one in sync, and exits 1', async () => {
    const [a, b] = (await createApp(drift.admin, drift.name, 2)) as [AppPod, AppPod];
    // alert-only: the drift stays, so status has something to show.
    for (const p of [a, b]) agents.push(AgentProcess.start(p, ['--grace', '1s', '--on-drift', 'alert-only']));
    await Promise.all(agents.map((x) => x.waitFor((l) => l.state === 'InSync', 'InSync')));
    // The API changes; kubelet delivers it to the first Pod only.
    await updateConfig(drift.admin, drift.name, { 'app.yaml': 'level: debug\n' });
    writeMount(a.mountRoot, { 'app.yaml': 'level: debug\n' });
    const [agentB] = agents.slice(-1) as [AgentProcess];
    await agentB.waitFor((l) => l.state === 'Drifted', 'Drifted', 30_000);
    // As the user runs it: kubectl config-sync status -A.
    const run = await waitFor(
      async () => {
        const r = kubectl('config-sync', 'status', '-A', '-o', 'wide');
        return r.stdout.includes(`${drift.name}/web: 1/2 drifted (ContentDrift)`) ? r : undefined;
      },
      { what: 'status showing the drift', timeoutMs: 30_000 },
    );
    expect(run.status).toBe(1);
    expect(run.stdout).toMatch(new RegExp(`${drift.name}\\s+${a.name}\\s+Deployment/web\\s+InSync`));
    expect(run.stdout).toMatch(
      new RegExp(`${drift.name}\\s+${b.name}\\s+Deployment/web\\s+Drifted\\s+ContentDrift`),
    );
    expect(run.stdout).not.toContain('level: debug');
  });
});

describe('kubectl config-sync', () => {
  it('kubectl finds the plugin', () => {
    const list = kubectl('plugin', 'list');
    expect(list.stdout).toContain(path.join(plugins, 'kubectl-config_sync'));
  });

  it('kubectl config-sync version', () => {
    const run = kubectl('config-sync', 'version');
    expect(run.status).toBe(0);
    expect(run.stdout).toMatch(/^config-sync \S+/);
  });

  it('kubectl config-sync doctor and status take -n and --kubeconfig as kubectl does', () => {
    const doctor = kubectl(
      'config-sync',
      'doctor',
      '--kubeconfig',
      controlPlane().adminKubeconfig,
      '-n',
      ns.name,
    );
    expect(doctor.stdout).toContain(`namespace "${ns.name}"`);
    expect(doctor.stdout).toContain('--namespace');
    const status = kubectl('config-sync', 'status', '-n', ns.name);
    expect(status.stdout).toContain('web: 2/2 in sync');
  });
});
