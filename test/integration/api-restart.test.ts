// The API server killed and restarted, for real: a control plane of this file's own (the shared
// one serves every other file), its kube-apiserver SIGKILLed and started again on the same port,
// certificates and etcd. The agent must treat its copy as no evidence while its watch is down,
// relist as soon as the API answers, and not restart a workload whose files kubelet brought up
// to date with a change made the moment the API came back.
import { CoreV1Api } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ApiProxy } from '../cluster/api-proxy.ts';
import {
  AgentProcess,
  type AppPod,
  createApp,
  templateAnnotations,
  updateConfig,
  writeMount,
} from '../cluster/app.ts';
import { resolveAssets } from '../cluster/assets.ts';
import { ControlPlane } from '../cluster/control-plane.ts';
import { adminKubeConfig, createTestNamespace } from '../cluster/identities.ts';
import { waitFor } from '../cluster/wait.ts';

let plane: ControlPlane;
const running: AgentProcess[] = [];

beforeAll(async () => {
  plane = await ControlPlane.start({ assets: resolveAssets() });
}, 120_000);

afterAll(async () => {
  await Promise.all(running.splice(0).map((a) => a.stop()));
  await plane?.stop();
});

describe('kube-apiserver killed and restarted', () => {
  it('Unknown while it is down, InSync soon after it is back, no restart', { timeout: 180_000 }, async () => {
    const admin = adminKubeConfig(plane.info);
    const namespace = await createTestNamespace(admin, 'api-restart');
    const [pod] = (await createApp(plane.info, admin, namespace, 1)) as [AppPod];
    // The grace is how long this test's stand-in for kubelet has between the API change and its
    // write of the files: past it the files really are stale, and Drifted (then a restart) is
    // the right verdict. 2 s left too little on a loaded CI machine: CI at eb7869a failed here
    // with no log to say why, and a 2.5 s pause between the two, tried by hand, gives exactly
    // that failure. What the test guards (no verdict from the copy while the watch is down, a
    // relist within one backoff step) does not depend on the grace.
    const agent = AgentProcess.start(pod, ['--grace', '5s']);
    running.push(agent);
    await agent.waitFor((l) => l.state === 'InSync', 'InSync');

    const mark = agent.lines.length;
    await plane.restartApiserver(async () => {
      const down = await agent.waitFor(
        (l) => agent.lines.indexOf(l) >= mark && l.state === 'Unknown',
        'Unknown while the API server is down',
      );
      expect(String(down.msg)).toMatch(/API watch not live/);
    });
    const backAt = Date.now();
    // A change the moment the API is back, delivered by kubelet at once.
    const version = await updateConfig(admin, namespace, { 'app.yaml': 'level: debug\n' });
    writeMount(pod.mountRoot, { 'app.yaml': 'level: debug\n' });

    // The API server answers requests before its /readyz does, so the agent may be InSync again
    // before restartApiserver returns; what counts is that it verifies the new version. The
    // matched-versions annotation is written by the agent only on a verified match.
    await waitFor(
      async () => {
        const p = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name: pod.name, namespace });
        return (
          p.metadata?.annotations?.['config-sync.io/matched-versions'] === `ConfigMap/web-config@${version}`
        );
      },
      { what: 'the new version verified after the restart', timeoutMs: 30_000 },
    );
    // Blind for at most one backoff step (8 s at most, randomized below that), not 30 s.
    expect(Date.now() - backAt).toBeLessThan(20_000);
    // On failure, the agent's whole log is what explains the accusation.
    const accused = agent.lines.filter((l) => l.state === 'Drifted' || l.msg === 'restarted workload');
    expect(accused, agent.raw.join('\n')).toEqual([]);
    expect(await templateAnnotations(admin, namespace)).not.toHaveProperty(['config-sync.io/config-hash']);
  });

  // The same restart behind an L7 hop (a Node HTTP/2 proxy): each of the hop's upstream
  // connections dies with the API server, and it resets every stream on them (NO_ERROR, before
  // any answer for the requests made while the server is down). Before requests reset so ended,
  // the agent's loop froze on the first one and never checked the version made after the restart.
  it('behind a hop that resets its streams: the new version is verified once it is back', {
    timeout: 180_000,
  }, async () => {
    const admin = adminKubeConfig(plane.info);
    const namespace = await createTestNamespace(admin, 'api-restart-hop');
    const [pod] = (await createApp(plane.info, admin, namespace, 1)) as [AppPod];
    const proxy = await ApiProxy.start(plane.info);
    try {
      const agent = AgentProcess.start({ ...pod, env: { ...pod.env, ...proxy.env } }, [
        '--grace',
        '5s',
        '--resync',
        '1h',
      ]);
      running.push(agent);
      await agent.waitFor((l) => l.state === 'InSync', 'InSync');
      const mark = agent.lines.length;
      await plane.restartApiserver(async () => {
        await agent.waitFor(
          (l) => agent.lines.indexOf(l) >= mark && l.state === 'Unknown',
          'Unknown while the API server behind the hop is down',
        );
      });
      expect(proxy.resetRequests().length).toBeGreaterThan(0);
      const version = await updateConfig(admin, namespace, { 'app.yaml': 'level: debug\n' });
      writeMount(pod.mountRoot, { 'app.yaml': 'level: debug\n' });
      await waitFor(
        async () => {
          const p = await admin.makeApiClient(CoreV1Api).readNamespacedPod({ name: pod.name, namespace });
          return (
            p.metadata?.annotations?.['config-sync.io/matched-versions'] === `ConfigMap/web-config@${version}`
          );
        },
        { what: 'the new version verified through the hop after the restart', timeoutMs: 30_000 },
      );
      const accused = agent.lines.filter((l) => l.state === 'Drifted' || l.msg === 'restarted workload');
      expect(accused, agent.raw.join('\n')).toEqual([]);
      expect(await agent.stop()).toBe(0);
    } finally {
      await proxy.stop();
    }
  });
});
