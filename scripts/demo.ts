// `npm run demo`: config-sync's main job on an embedded control plane, narrated.
//
// Where the machine can run a real node (root on Linux), the story runs there, nothing simulated
// (scripts/demo-node.ts); CONFIG_SYNC_NODE=0 asks for this file's simulated one anyway.
// Otherwise, as here: a real kube-apiserver, etcd and kube-controller-manager run on 127.0.0.1
// (test/cluster). There is no kubelet, so Pods stay Pending and kubelet's volume updates are simulated with its own
// AtomicWriter algorithm (test/cluster/kubelet-volume.ts). Everything else is real: the agents
// are the shipped CLI, running as the ServiceAccount of deploy/sidecar/rbac with a token bound
// to their Pod, and every change goes through the API.
//
// The story: (1) control plane; (2) the example app, two replicas, a volume and a subPath file;
// (3) one agent per Pod, in sync; (4) a ConfigMap change kubelet propagates: Propagating, then
// InSync with the propagation time; (5) a change kubelet never propagates (subPath); (6) what
// `heal --dry-run` says; (7) the agents heal it with exactly one restart; (8) the metrics.
import path from 'node:path';
import { AppsV1Api, CoreV1Api, type KubeConfig, type V1Deployment } from '@kubernetes/client-node';
import {
  AgentProcess,
  type AppPod,
  createApp,
  isHealDecision,
  runCli,
  sample,
  templateAnnotations,
  webDeployment,
  writeMount,
} from '../test/cluster/app.ts';
import { resolveAssets } from '../test/cluster/assets.ts';
import { ControlPlane } from '../test/cluster/control-plane.ts';
import { adminKubeConfig } from '../test/cluster/identities.ts';
import { writeSubPathFile } from '../test/cluster/kubelet-volume.ts';
import { nodeUnsupported } from '../test/cluster/node.ts';
import { waitFor } from '../test/cluster/wait.ts';
import { demoOnNode } from './demo-node.ts';

const bold = (s: string) => (process.stdout.isTTY ? `\x1b[1m${s}\x1b[0m` : s);
const say = (s = '') => process.stdout.write(`${s}\n`);
const step = (n: number, s: string) => say(`\n${bold(`[${n}/8] ${s}`)}`);
const detail = (s: string) => say(`      ${s}`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const NAMESPACE = 'demo';
const GRACE = '20s';
const DEBOUNCE = '3s';
const config = { 'app.yaml': 'level: info\n', 'log.yaml': 'format: json\n' };

/** web with its ConfigMap as a volume at /etc/app, and log.yaml also mounted alone by subPath. */
function demoDeployment(): V1Deployment {
  const d = webDeployment(2);
  const app = d.spec?.template.spec?.containers[0];
  app?.volumeMounts?.push({ name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml' });
  return d;
}

async function replaceConfig(admin: KubeConfig, data: Record<string, string>): Promise<void> {
  await admin.makeApiClient(CoreV1Api).replaceNamespacedConfigMap({
    name: 'web-config',
    namespace: NAMESPACE,
    body: { metadata: { name: 'web-config' }, data },
  });
}

/** kubelet, simulated: the volume swap for one Pod. The subPath copy is never touched. */
function kubeletSync(pod: AppPod, data: Record<string, string>): void {
  writeMount(pod.mountRoot, data);
}

async function main(): Promise<void> {
  const noNode = process.env.CONFIG_SYNC_NODE === '0' ? 'CONFIG_SYNC_NODE=0' : nodeUnsupported();
  if (!noNode) return demoOnNode();
  say(bold('config-sync demo'));
  say(`No real node here (${noNode}), so kubelet is simulated:`);
  say('a real kube-apiserver, etcd and controller-manager on 127.0.0.1. No kubelet: Pods stay Pending,');
  say("and kubelet's volume updates are simulated with its own AtomicWriter algorithm.");

  step(1, 'Control plane');
  detail('building it on the first run takes several minutes (Go, from the module proxy); then seconds');
  const t0 = Date.now();
  const plane = await ControlPlane.start({ assets: resolveAssets() });
  const agents: AgentProcess[] = [];
  try {
    detail(`ready in ${seconds(Date.now() - t0)}: ${plane.info.server}`);
    const admin = adminKubeConfig(plane.info);
    await admin.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await waitFor(
      async () =>
        (await admin
          .makeApiClient(CoreV1Api)
          .readNamespacedServiceAccount({ name: 'default', namespace: NAMESPACE })) && true,
      { what: 'the namespace default ServiceAccount' },
    );

    step(2, 'The example app');
    detail(
      'kubectl apply -k deploy/sidecar/rbac: ServiceAccount, Role (resourceNames), RoleBinding, own-Pod policy',
    );
    detail('ConfigMap web-config (app.yaml, log.yaml), Secret web-secrets, Deployment web with 2 replicas:');
    detail('  /etc/app       the whole ConfigMap as a volume (kubelet keeps it current)');
    detail('  /etc/log.yaml  log.yaml alone by subPath (kubelet never updates it)');
    const pods = await createApp(plane.info, admin, NAMESPACE, 2, demoDeployment(), config);
    for (const pod of pods) {
      writeSubPathFile(path.join(pod.mountRoot, 'etc/log.yaml'), {
        data: Buffer.from(config['log.yaml']),
        mode: 0o644,
      });
    }
    detail(`Pods ${pods.map((p) => p.name).join(', ')}: Pending, mounts written as kubelet would`);

    step(3, 'One config-sync agent per Pod');
    detail(
      `config-sync agent --grace ${GRACE} --debounce ${DEBOUNCE}, as system:serviceaccount:${NAMESPACE}:config-sync-agent`,
    );
    for (const pod of pods) agents.push(AgentProcess.start(pod, ['--grace', GRACE, '--debounce', DEBOUNCE]));
    for (const [i, a] of agents.entries()) {
      await a.waitFor((l) => l.state === 'InSync' && l.target === 'app:/etc/app', 'the first verdict');
      detail(`${pods[i]?.name}: every target InSync`);
    }
    const condition = await waitFor(
      async () => {
        const pod = await admin
          .makeApiClient(CoreV1Api)
          .readNamespacedPod({ name: pods[0]?.name ?? '', namespace: NAMESPACE });
        return pod.status?.conditions?.find((c) => c.type === 'config-sync.io/InSync' && c.status === 'True');
      },
      { what: 'the InSync condition' },
    );
    detail(`condition config-sync.io/InSync=${condition.status} (${condition.reason}) on ${pods[0]?.name}`);

    step(4, 'A change kubelet propagates');
    detail('kubectl edit configmap web-config: app.yaml level: info -> level: debug');
    const changed = { ...config, 'app.yaml': 'level: debug\n' };
    await replaceConfig(admin, changed);
    for (const a of agents) await a.waitFor((l) => l.state === 'Propagating', 'Propagating');
    detail('agents: Propagating (the files differ, but younger than the grace window: not drift)');
    const delay = 1500;
    const at = Date.now();
    await waitFor(() => (Date.now() - at >= delay ? true : undefined), {
      what: 'kubelet being kubelet',
      timeoutMs: 5000,
    });
    for (const pod of pods) kubeletSync(pod, changed);
    detail(`kubelet (simulated) swaps ..data on both Pods after ${seconds(delay)}`);
    for (const [i, a] of agents.entries()) {
      const line = await a.waitFor((l) => l.msg === 'propagated', 'the propagation time');
      detail(
        `${pods[i]?.name}: InSync again; propagation measured ${Number(line.propagationSeconds).toFixed(2)} s`,
      );
    }
    detail('no restart: this is how it should work');

    step(5, 'A change kubelet never propagates');
    detail('kubectl edit configmap web-config: log.yaml format: json -> format: text');
    const changedAgain = { ...changed, 'log.yaml': 'format: text\n' };
    await replaceConfig(admin, changedAgain);
    for (const pod of pods) kubeletSync(pod, changedAgain);
    detail('kubelet updates /etc/app on both Pods, but /etc/log.yaml is a subPath copy: it stays old');

    step(6, 'What would heal do? (kubectl exec ... -- config-sync heal --dry-run)');
    const dry = await runCli(['heal', '--dry-run', '--debounce', '0s'], pods[0]?.env ?? {});
    for (const line of dry.stdout.trimEnd().split('\n')) detail(`| ${line}`);
    detail(`exit code ${dry.status}: drift found, nothing changed`);

    step(7, `The agents heal it, after the ${DEBOUNCE} debounce`);
    for (const [i, a] of agents.entries()) {
      const line = await a.waitFor(isHealDecision, 'a heal decision');
      const told =
        line.msg === 'restarted workload'
          ? 'restarted Deployment web'
          : line.decision === 'deduped'
            ? 'deduped: a sibling already restarted Deployment web'
            : 'not restarting: this Pod is already being deleted by the rollout';
      detail(`${pods[i]?.name}: ${told}`);
    }
    const annotations = await templateAnnotations(admin, NAMESPACE);
    detail(
      `Deployment web template: kubectl.kubernetes.io/restartedAt=${annotations['kubectl.kubernetes.io/restartedAt']}`,
    );
    detail(
      `                         config-sync.io/config-hash=${annotations['config-sync.io/config-hash']}`,
    );
    const rs = await waitFor(
      async () => {
        const list = await admin
          .makeApiClient(AppsV1Api)
          .listNamespacedReplicaSet({ namespace: NAMESPACE, labelSelector: 'app=web' });
        return list.items.length >= 2 ? list.items : undefined;
      },
      { what: 'the new ReplicaSet' },
    );
    detail(`controller-manager rolled out a new ReplicaSet: ${rs.map((r) => r.metadata?.name).join(', ')}`);
    const events = await admin.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: NAMESPACE });
    const reasons = events.items
      .filter((e) => e.source?.component === 'config-sync')
      .map((e) => `${e.reason} (${e.involvedObject.name})`);
    detail(`Events: ${reasons.join(', ')}`);

    step(8, 'Metrics (curl <pod>:9464/metrics)');
    let restarts = 0;
    for (const [i, a] of agents.entries()) {
      const text = await a.metrics();
      restarts += sample(text, 'config_sync_heal_total', { action: 'restart', result: 'ok' }) ?? 0;
      detail(`${pods[i]?.name}:`);
      for (const line of text.split('\n')) {
        if (
          /^(config_hash_mismatch_total|config_sync_(in_sync|heal_total|propagation_seconds_(count|sum)|api_requests_total))/.test(
            line,
          )
        ) {
          detail(`  ${line}`);
        }
      }
    }
    say();
    say(bold(`Exactly ${restarts} restart for 2 agents that saw the same drift. Done.`));
    if (restarts !== 1) process.exitCode = 1;
  } finally {
    await Promise.all(agents.map((a) => a.stop()));
    await plane.stop();
  }
}

await main();
