// A workload's say over what is checked and what is done about drift (its Pod's annotations),
// and a ConfigMap's "never restart for me", as check, heal, doctor and the agent read them:
// the built CLI in the agent's identity with exactly the shipped Role, against the real API.
// The annotations are set on the Pod as admin, as a Pod inherits them from its template.
import { AppsV1Api, CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  cli,
  createApp,
  reloadEndpoint,
  updateConfig,
  writeMount,
} from './support-app.ts';

const ns = useNamespace('annotations');
let pod: AppPod;
let agent: AgentProcess | undefined;

beforeAll(async () => {
  [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
  // The API changes; the Pod's files do not: drift, once past the grace.
  await updateConfig(ns.admin, ns.name, { 'app.yaml': 'level: debug\n' });
});

afterEach(async () => {
  await agent?.stop();
  agent = undefined;
});

/** Sets the Pod's annotations to exactly these (JSON Patch `add` replaces the map). */
async function annotatePod(annotations: Record<string, string>): Promise<void> {
  await ns.admin.makeApiClient(CoreV1Api).patchNamespacedPod({
    name: pod.name,
    namespace: ns.name,
    body: [{ op: 'add', path: '/metadata/annotations', value: annotations }],
  });
}

async function annotateConfigMap(annotations: Record<string, string>): Promise<void> {
  await ns.admin.makeApiClient(CoreV1Api).patchNamespacedConfigMap({
    name: 'web-config',
    namespace: ns.name,
    body: [{ op: 'add', path: '/metadata/annotations', value: annotations }],
  });
}

async function deploymentVersion(admin: KubeConfig): Promise<string | undefined> {
  const d = await admin
    .makeApiClient(AppsV1Api)
    .readNamespacedDeployment({ name: 'web', namespace: ns.name });
  return d.metadata?.resourceVersion;
}

async function podEvents(reason: string) {
  const list = await ns.admin
    .makeApiClient(CoreV1Api)
    .listNamespacedEvent({ namespace: ns.name, fieldSelector: `involvedObject.name=${pod.name}` });
  return list.items.filter((e) => e.reason === reason);
}

describe('per-workload annotations', () => {
  it('on-drift alert-only on the Pod: heal plans an alert, says which annotation, and restarts nothing', async () => {
    await annotateConfigMap({});
    await annotatePod({ 'config-sync.io/on-drift': 'alert-only' });
    const before = await deploymentVersion(ns.admin);
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], pod.env);
    expect(dry.stderr).toBe('');
    expect(dry.status).toBe(1);
    expect(dry.stdout.split('\n')[0]).toBe('plan: alert (AlertOnly), no restart');
    expect(dry.stdout).toContain('not restarting: config-sync.io/on-drift=alert-only on the Pod');
    expect(dry.stdout).toContain(
      "The Pod's annotations:\n  on-drift alert-only, from config-sync.io/on-drift\n",
    );
    const heal = await cli(['heal', '--grace', '0s'], pod.env);
    expect(heal.status).toBe(1);
    expect(await deploymentVersion(ns.admin)).toBe(before);
  });

  it("grace on the Pod wins over the agent's own; --grace on check's command line wins over it", async () => {
    await annotatePod({ 'config-sync.io/grace': '0s' });
    const check = await cli(['check'], pod.env);
    expect(check.stdout).toMatch(/^drift: app:\/etc\/app ContentDrift: .* past the 0s grace/);
    expect(check.status).toBe(1);
    const operator = await cli(['check', '--grace', '10m'], pod.env);
    expect(operator.stdout).toMatch(/^propagating: app:\/etc\/app Propagating: .* within the 600s window/);
    expect(operator.status).toBe(0);
    const dry = await cli(['heal', '--dry-run', '--grace', '10m'], pod.env);
    expect(dry.stdout).toContain('config-sync.io/grace is set, and --grace on the command line wins over it');
  });

  it('ignore leaving nothing to check: a clear error naming the annotation, and doctor shows it', async () => {
    await annotatePod({ 'config-sync.io/ignore': 'configmap/web-config' });
    const check = await cli(['check'], pod.env);
    expect(check.status).toBe(2);
    expect(check.stderr).toContain('error CS_CONFIG_NO_TARGETS');
    expect(check.stderr).toContain(
      'container app: volume config at /etc/app: not checked, config-sync.io/ignore names configmap/web-config',
    );
    const doctor = await cli(['doctor'], pod.env);
    expect(doctor.stdout).toContain(
      'annotation: container app: volume config at /etc/app: not checked, config-sync.io/ignore names configmap/web-config',
    );
    // What is not checked needs no access: web-config is not among the targets doctor checks.
    expect(doctor.stdout).toContain('(no ConfigMap or Secret referenced)');
  });
});

describe('a ConfigMap that says never restart for it', () => {
  it('drift is reported, never healed: NeverRestart, the Deployment untouched, an Event on the Pod', async () => {
    await annotatePod({});
    await annotateConfigMap({ 'config-sync.io/restart': 'never' });
    const before = await deploymentVersion(ns.admin);
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], pod.env);
    expect(dry.status).toBe(1);
    expect(dry.stdout.split('\n')[0]).toBe('plan: alert (NeverRestart), no restart');
    expect(dry.stdout).toContain(
      'not restarting: ConfigMap/web-config says config-sync.io/restart=never; the drift is reported',
    );
    const heal = await cli(['heal', '--grace', '0s'], pod.env);
    expect(heal.status).toBe(1);
    expect(await deploymentVersion(ns.admin)).toBe(before);
    const [event] = await podEvents('NeverRestart');
    expect(event?.type).toBe('Warning');
    expect(event?.message).toContain('ConfigMap/web-config says config-sync.io/restart=never');
  });

  it('a value there that cannot be read is held to never, and says so', async () => {
    await annotateConfigMap({ 'config-sync.io/restart': 'nope' });
    const dry = await cli(['heal', '--dry-run', '--grace', '0s'], pod.env);
    expect(dry.stdout.split('\n')[0]).toBe('plan: alert (NeverRestart), no restart');
    expect(dry.stdout).toContain(
      'ConfigMap/web-config has config-sync.io/restart="nope", which is not never or allowed: held to never until it is fixed',
    );
  });
});

describe('annotations that cannot be read', () => {
  it('check warns, heal never restarts and says why, doctor names it (exit 2)', async () => {
    await annotateConfigMap({});
    await annotatePod({ 'config-sync.io/grace': 'soon', 'config-sync.io/ingore': 'volume/config' });
    const check = await cli(['check', '--grace', '0s'], pod.env);
    expect(check.stderr).toContain(
      'warning: invalid annotation: config-sync.io/grace="soon" is not a duration; write e.g. 30s, 2m or 1m30s',
    );
    expect(check.stderr).toContain(
      'config-sync.io/ingore="volume/config" is not an annotation config-sync reads',
    );
    expect(check.status).toBe(1);
    const before = await deploymentVersion(ns.admin);
    const heal = await cli(['heal', '--grace', '0s'], pod.env);
    expect(heal.status).toBe(1);
    expect(heal.stdout.split('\n')[0]).toBe('plan: alert (AlertOnly), no restart');
    expect(heal.stdout).toContain("not restarting: this Pod's config-sync annotations cannot be read");
    expect(heal.stdout).toContain('  invalid: config-sync.io/grace="soon" is not a duration');
    expect(await deploymentVersion(ns.admin)).toBe(before);
    const doctor = await cli(['doctor'], pod.env);
    expect(doctor.status).toBe(2);
    expect(doctor.stdout).toContain(
      `CS_CONFIG_BAD_ANNOTATION: Pod ${pod.name}: config-sync.io/grace="soon" is not a duration`,
    );
  });

  it('the agent sends an InvalidAnnotation Event for each, and restarts nothing', async () => {
    const before = await deploymentVersion(ns.admin);
    agent = AgentProcess.start(pod, ['--grace', '0s', '--debounce', '0s']);
    await agent.waitFor((l) => l.msg === 'not restarting: AlertOnly', 'the alert-only decision');
    const events = await waitFor(
      async () => {
        const found = await podEvents('InvalidAnnotation');
        return found.length >= 2 ? found : undefined;
      },
      { what: 'two InvalidAnnotation Events' },
    );
    expect(events.map((e) => e.message).sort()).toEqual([
      'config-sync.io/grace="soon" is not a duration; write e.g. 30s, 2m or 1m30s; until fixed, no restart',
      'config-sync.io/ingore="volume/config" is not an annotation config-sync reads; the annotations config-sync reads on a Pod are config-sync.io/ignore, config-sync.io/on-drift, config-sync.io/grace, config-sync.io/reload-url, config-sync.io/reload-signal, config-sync.io/reload-process, config-sync.io/secret-env; until fixed, no restart',
    ]);
    expect(events.every((e) => e.type === 'Warning')).toBe(true);
    expect(await deploymentVersion(ns.admin)).toBe(before);
  });
});

describe('reload mode from the Pod alone', () => {
  const own = useNamespace('annotations-reload');

  it("the agent, started with no reload flag, reloads the app at the Pod's reload-url once the files match", async () => {
    const [app] = (await createApp(own.admin, own.name, 1)) as [AppPod];
    const { url, posts, close } = await reloadEndpoint();
    try {
      await own.admin.makeApiClient(CoreV1Api).patchNamespacedPod({
        name: app.name,
        namespace: own.name,
        body: [
          {
            op: 'add',
            path: '/metadata/annotations',
            value: { 'config-sync.io/on-drift': 'reload', 'config-sync.io/reload-url': url },
          },
        ],
      });
      agent = AgentProcess.start(app, ['--grace', '30s']);
      await agent.waitFor((l) => l.state === 'InSync', 'InSync');
      expect(
        agent.lines.some(
          (l) =>
            l.msg === 'on-drift reload, from config-sync.io/on-drift, trigger from its reload-* annotations',
        ),
      ).toBe(true);
      const data = { 'app.yaml': 'level: reload\n' };
      await updateConfig(own.admin, own.name, data);
      writeMount(app.mountRoot, data);
      await agent.waitFor((l) => l.msg === 'reloaded the app', 'the reload');
      expect(posts).toHaveLength(1);
      const d = await own.admin
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ name: 'web', namespace: own.name });
      expect(d.spec?.template.metadata?.annotations?.['kubectl.kubernetes.io/restartedAt']).toBeUndefined();
    } finally {
      await agent?.stop();
      agent = undefined;
      await close();
    }
  });
});
