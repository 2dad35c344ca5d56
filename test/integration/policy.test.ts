// The policy gate before a restart, against a real OPA server (built from the Go module proxy,
// test/cluster/build-tool.sh) running the example policies of deploy/policy, and the built-in
// policies. The example policies are tested with `opa test` too.
//
// The OPA server here loads every example policy but the restart window, whose answer depends on
// the day and hour the test runs; `opa test` covers that one with fixed times.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTool } from '../cluster/assets.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  cli,
  createApp,
  root,
  sample,
  updateConfig,
  webDeployment,
} from './support-app.ts';

const policies = path.join(root, 'deploy/policy');
let opa = '';
let server: ChildProcess | undefined;
let policyUrl = '';
const running: AgentProcess[] = [];
/** OPA servers a test starts for itself: stopped at the end whatever happened. */
const extraServers: ChildProcess[] = [];

/** OPA serving these example policies on 127.0.0.1:port (nothing waits for it here). */
function opaServer(port: number, files: readonly string[]): ChildProcess {
  return spawn(
    opa,
    [
      'run',
      '--server',
      '--addr',
      `127.0.0.1:${port}`,
      '--log-level',
      'error',
      ...files.map((f) => path.join(policies, f)),
    ],
    { stdio: 'ignore' },
  );
}

/** Until OPA on that port answers its health check. */
async function opaUp(port: number, what: string): Promise<void> {
  await waitFor(
    async () => (await fetch(`http://127.0.0.1:${port}/health`).catch(() => undefined))?.ok || undefined,
    { what },
  );
}

beforeAll(async () => {
  opa = await buildTool('opa');
  const port = await freeLoopbackPort();
  server = opaServer(port, ['decision.rego', 'frozen.rego', 'max-restarts.rego']);
  await opaUp(port, 'the OPA server');
  policyUrl = `http://127.0.0.1:${port}/v1/data/configsync/restart`;
}, 900_000);

afterAll(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  server?.kill('SIGTERM');
  for (const s of extraServers) s.kill('SIGTERM');
});

async function events(admin: KubeConfig, namespace: string) {
  return (await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace })).items;
}

describe('the example policies (deploy/policy)', () => {
  it('pass opa test and opa check --strict', () => {
    const test = spawnSync(opa, ['test', policies], { encoding: 'utf8' });
    expect(test.status).toBe(0);
    expect(test.stdout).toMatch(/^PASS: \d+\/\d+$/m);
    expect(spawnSync(opa, ['check', '--strict', policies], { encoding: 'utf8' }).status).toBe(0);
  });
});

describe('the agent asks OPA before it restarts', () => {
  const allowed = useNamespace('policy-allowed');
  const frozen = useNamespace('policy-frozen');

  it('allowed: one restart, and the plan says who allowed it', async () => {
    const [pod] = (await createApp(allowed.admin, allowed.name, 1)) as [AppPod];
    const agent = AgentProcess.start(pod, ['--grace', '1s', '--policy-url', policyUrl]);
    running.push(agent);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(allowed.admin, allowed.name, { 'app.yaml': 'level: debug\n' });
    const restarted = await agent.waitFor((l) => l.msg === 'restarted workload', 'the restart', 60_000);
    expect(restarted.reasons).toContain(`policy ${policyUrl}: allowed: no policy refuses it`);
  });

  it('a frozen workload: no restart, a PolicyDenied alert (Event, metric, condition), and heal --dry-run says why', async () => {
    const deployment = webDeployment(1);
    deployment.metadata = { ...deployment.metadata, labels: { 'config-sync.io/frozen': 'true' } };
    const [pod] = (await createApp(frozen.admin, frozen.name, 1, deployment)) as [AppPod];
    const agent = AgentProcess.start(pod, ['--grace', '1s', '--policy-url', policyUrl]);
    running.push(agent);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(frozen.admin, frozen.name, { 'app.yaml': 'level: debug\n' });
    const denied = await agent.waitFor((l) => l.alert === 'PolicyDenied', 'PolicyDenied', 60_000);
    const why = `policy ${policyUrl}: denied: Deployment web is frozen (label config-sync.io/frozen=true)`;
    expect(denied.reasons).toContain(why);
    expect(agent.lines.some((l) => l.msg === 'restarted workload')).toBe(false);
    expect(
      sample(await agent.metrics(), 'config_sync_heal_total', { action: 'alert', result: 'PolicyDenied' }),
    ).toBe(1);
    const event = await waitFor(
      async () => (await events(frozen.admin, frozen.name)).find((e) => e.reason === 'PolicyDenied'),
      { what: 'the PolicyDenied Event' },
    );
    expect(event.message).toContain(why);
    const condition = await waitFor(
      async () => {
        const p = await frozen.admin
          .makeApiClient(CoreV1Api)
          .readNamespacedPod({ name: pod.name, namespace: frozen.name });
        const c = p.status?.conditions?.find((x) => x.type === 'config-sync.io/InSync');
        return c?.status === 'False' && c.message?.includes('frozen') ? c : undefined;
      },
      { what: 'the condition naming the refusal' },
    );
    expect(condition.message).toContain(why);
    const template = (
      await frozen.admin
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ name: 'web', namespace: frozen.name })
    ).spec?.template.metadata?.annotations;
    expect(template?.['config-sync.io/config-hash']).toBeUndefined();

    const dry = await cli(['heal', '--dry-run', '--grace', '0s', '--policy-url', policyUrl], pod.env);
    expect(dry.status).toBe(1);
    expect(dry.stdout).toContain('plan: alert (PolicyDenied), no restart');
    expect(dry.stdout).toContain(why);
  });
});

describe('a policy server down when the drift comes', () => {
  const ns = useNamespace('policy-later');

  it('is asked again after a backoff, not at the next --resync, and its answer then restarts', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const port = await freeLoopbackPort();
    const url = `http://127.0.0.1:${port}/v1/data/configsync/restart`;
    // A resync far beyond the test's waits: only the retry can bring the restart.
    const agent = AgentProcess.start(pod, ['--grace', '1s', '--resync', '1h', '--policy-url', url]);
    running.push(agent);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
    const undecided = await agent.waitFor((l) => l.alert === 'PolicyDenied', 'PolicyDenied', 60_000);
    expect(undecided.reasons).toContain(
      `policy ${url} could not decide (ECONNREFUSED); --policy-failure closed: no restart`,
    );
    await agent.waitFor((l) => l.msg === 'the heal failed: trying again', 'the retry to come');

    const late = opaServer(port, ['decision.rego', 'frozen.rego']);
    extraServers.push(late);
    const restarted = await agent.waitFor(
      (l) => l.msg === 'restarted workload',
      'the restart once OPA answers',
      60_000,
    );
    expect(restarted.reasons).toContain(`policy ${url}: allowed: no policy refuses it`);
  }, 120_000);
});

describe('when the policy cannot decide, and the built-in policies', () => {
  const ns = useNamespace('policy-builtin');
  let pod: AppPod;
  beforeAll(async () => {
    [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
  });
  const dryRun = async (...args: string[]) => cli(['heal', '--dry-run', '--grace', '0s', ...args], pod.env);

  it('no policy: the plan restarts', async () => {
    expect((await dryRun()).stdout).toContain('plan: restart Deployment web');
  });

  it('OPA unreachable, --policy-failure closed (the default): no restart, and the plan says why', async () => {
    const dead = `http://127.0.0.1:${await freeLoopbackPort()}/v1/data/configsync/restart`;
    const closed = await dryRun('--policy-url', dead);
    expect(closed.stdout).toContain('plan: alert (PolicyDenied), no restart');
    expect(closed.stdout).toContain(
      `policy ${dead} could not decide (ECONNREFUSED); --policy-failure closed: no restart`,
    );
    const open = await dryRun('--policy-url', dead, '--policy-failure', 'open');
    expect(open.stdout).toContain('plan: restart Deployment web');
    expect(open.stdout).toContain('--policy-failure open: restarting anyway');
  });

  it('OPA stopped: fail closed', async () => {
    const port = await freeLoopbackPort();
    const stopped = opaServer(port, ['decision.rego', 'frozen.rego']);
    extraServers.push(stopped);
    const url = `http://127.0.0.1:${port}/v1/data/configsync/restart`;
    await opaUp(port, 'the second OPA server');
    expect((await dryRun('--policy-url', url)).stdout).toContain('plan: restart Deployment web');
    const exited = new Promise((resolve) => stopped.once('exit', resolve));
    stopped.kill('SIGTERM');
    await exited;
    const run = await dryRun('--policy-url', url);
    expect(run.stdout).toContain('plan: alert (PolicyDenied), no restart');
    expect(run.stdout).toContain('--policy-failure closed: no restart');
  });

  it('a policy path OPA has no decision at: malformed, so closed', async () => {
    const run = await dryRun('--policy-url', policyUrl.replace('configsync/restart', 'nothing/here'));
    expect(run.stdout).toContain('the answer has no result (is the policy loaded at that path?)');
    expect(run.stdout).toContain('plan: alert (PolicyDenied)');
  });

  it('--restart-window: outside it, no restart until it opens', async () => {
    // A window on a day that is not today, so the test does not depend on when it runs.
    const days = ['Sun', 'Mon', 'Tue', 'Wed', 'Thu', 'Fri', 'Sat'];
    const other = days[(new Date().getUTCDay() + 3) % 7] as string;
    const run = await dryRun('--restart-window', `${other} 10:00-11:00 UTC`);
    expect(run.stdout).toContain('plan: alert (PolicyDenied), no restart');
    expect(run.stdout).toContain(`policy: outside the restart window ${other} 10:00-11:00 UTC; it opens `);
  });

  it('--only-when-settled: not while the Deployment is not available (no kubelet runs its Pods here)', async () => {
    const run = await dryRun('--only-when-settled');
    expect(run.stdout).toContain('plan: alert (PolicyDenied), no restart');
    expect(run.stdout).toContain('policy: the workload is not settled (0/1 available');
  });

  it('bad settings: a clear error naming the value, exit 2', async () => {
    const window = await dryRun('--restart-window', 'weekdays 9-5');
    expect(window.status).toBe(2);
    expect(window.stderr).toContain('--restart-window "weekdays 9-5"');
    const url = await dryRun('--policy-url', 'http://127.0.0.1:8181/v0/policies');
    expect(url.status).toBe(2);
    expect(url.stderr).toContain('is not an OPA Data API URL');
  });
});
