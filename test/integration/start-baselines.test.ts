// An agent that starts again after its app (its own crash, an OOM kill) must know what the app
// holds for the targets kubelet never updates. The app keeps the subPath file and the env vars of
// its own start; a restarted agent's subPath mount shows the current file instead. Before the
// start baselines, such an agent assumed the app held a version from before every change since
// its start, so a change to a key the app does not even read restarted the workload. Each agent
// here is a separate process against the real API server; the app's start is set on the Pod's
// status as kubelet reports it.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterEach, describe, expect, it } from 'vitest';
import { writeSubPathFile } from '../cluster/kubelet-volume.ts';
import { waitFor } from '../cluster/wait.ts';
import { useNamespace } from './support.ts';
import {
  AgentProcess,
  type AppPod,
  appStartedAt,
  createApp,
  templateAnnotations,
  updateConfig,
  webDeployment,
  writeMount,
} from './support-app.ts';

const running: AgentProcess[] = [];
afterEach(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
});

const SUBPATH = 'app:/etc/log.yaml';
const ENV = 'app:env:ConfigMap/web-config';
const ARGS = ['--grace', '10m', '--debounce', '1s'];

describe('an agent that starts again after its app', () => {
  const ns = useNamespace('start-baselines');

  it('keeps still for a change to another key, and restarts once for the key the app holds', async () => {
    // The app reads log.yaml twice over: as a subPath file and as an env var; app.yaml comes
    // through the whole volume, which kubelet updates.
    const deployment = webDeployment(1);
    const app = deployment.spec?.template.spec?.containers[0];
    if (!app) throw new Error('deployment template without a container');
    app.volumeMounts = [
      { name: 'config', mountPath: '/etc/app' },
      { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml' },
    ];
    app.env = [{ name: 'LOG', valueFrom: { configMapKeyRef: { name: 'web-config', key: 'log.yaml' } } }];
    const data = { 'app.yaml': 'level: info\n', 'log.yaml': 'format: json\n' };
    const [pod] = (await createApp(ns.admin, ns.name, 1, deployment, data)) as [AppPod];
    writeSubPathFile(`${pod.mountRoot}/etc/log.yaml`, { data: Buffer.from(data['log.yaml']), mode: 0o644 });

    // The native sidecar order: the agent first, its app a moment later. The agent reads its Pod
    // again until the app shows its start, then records what the app got, tied to that start.
    const first = AgentProcess.start(pod, ARGS);
    running.push(first);
    await first.waitFor((l) => l.target === SUBPATH && l.state === 'InSync', 'the subPath target InSync');
    const appStart = new Date(Math.floor(Date.now() / 1000) * 1000);
    appStartedAt(ns.name, pod.name, appStart);
    const core = ns.admin.makeApiClient(CoreV1Api);
    const recorded = await waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name: pod.name, namespace: ns.name });
        const raw = p.metadata?.annotations?.['config-sync.io/start-baselines'];
        const parsed = raw ? JSON.parse(raw) : undefined;
        return parsed?.baselines?.[SUBPATH]?.startedAt && parsed.baselines[ENV]?.startedAt
          ? parsed
          : undefined;
      },
      { what: 'both baselines recorded with the app start', timeoutMs: 20_000 },
    );
    expect(recorded.baselines[SUBPATH].startedAt).toBe(appStart.toISOString());
    expect(recorded.baselines[ENV].startedAt).toBe(appStart.toISOString());
    await first.stop();
    // The next agent starts well after the app (past container-view.ts's slack of 2 s), and the
    // change below comes after the app's start: the app cannot hold it.
    await waitFor(() => (Date.now() > appStart.getTime() + 3000 ? true : undefined), {
      what: 'three seconds past the app start',
    });

    // While no agent runs, only app.yaml changes; kubelet updates the volume. The restarted
    // agent's own subPath mount is made again from the current ConfigMap: the same log.yaml.
    const next = { ...data, 'app.yaml': 'level: debug\n' };
    const version = await updateConfig(ns.admin, ns.name, next);
    writeMount(pod.mountRoot, next);
    const restartsBefore = (await templateAnnotations(ns.admin, ns.name))[
      'kubectl.kubernetes.io/restartedAt'
    ];

    const second = AgentProcess.start(pod, ARGS);
    running.push(second);
    // The second agent's first pass is decided and done once it records a match of the new
    // version on the Pod (the first agent never saw that version); an InSync verdict sets no
    // deadline, so no later pass decides otherwise without a change.
    await waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name: pod.name, namespace: ns.name });
        const matched = p.metadata?.annotations?.['config-sync.io/matched-versions'] ?? '';
        return matched.split(',').includes(`ConfigMap/web-config@${version}`) ? true : undefined;
      },
      {
        what: "the second agent's match of the new version on the Pod",
        onTimeout: () => second.raw.slice(-15).join('\n'),
      },
    );
    const verdicts = second.lines.filter((l) => l.target === SUBPATH || l.target === ENV);
    expect(verdicts.map((l) => `${l.target} ${l.state}`).sort()).toEqual([
      `${SUBPATH} InSync`,
      `${ENV} InSync`,
    ]);
    expect(second.lines.filter((l) => l.msg === 'restarted workload')).toEqual([]);
    expect((await templateAnnotations(ns.admin, ns.name))['kubectl.kubernetes.io/restartedAt']).toBe(
      restartsBefore,
    );

    // Now log.yaml itself changes: the app still holds format: json, whatever the agent's copy
    // will show. One restart, for the subPath file and the env var.
    await updateConfig(ns.admin, ns.name, { ...next, 'log.yaml': 'format: text\n' });
    await second.waitFor((l) => l.msg === 'restarted workload', 'the restart');
    const reasons = new Set(second.lines.filter((l) => l.state === 'Drifted').map((l) => l.reason));
    expect([...reasons].sort()).toEqual(['EnvStale', 'SubPathStale']);
    expect((await templateAnnotations(ns.admin, ns.name))['kubectl.kubernetes.io/restartedAt']).toBeDefined();
  });
});
