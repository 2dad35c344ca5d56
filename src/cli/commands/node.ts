import type { Logger } from 'pino';
import { loadDigestKey } from '../../agent/digest-key.ts';
import { type NodeAgentHandle, startNodeAgent } from '../../agent/node-agent.ts';
import { loopConfig } from '../../config/agent-config.ts';
import { nodeConfig, nodeSettings } from '../../config/node-config.ts';
import { resolveSettings } from '../../config/settings.ts';
import { EXIT } from '../../errors.ts';
import { createKubeClient, type KubeClient } from '../../kube/client.ts';
import { resolveScope } from '../../kube/scope.ts';
import { gatherScopeFacts } from '../../kube/scope-facts.ts';
import { createLogger } from '../../log.ts';
import { createMetrics } from '../../metrics/metrics.ts';
import { createNodeMetrics } from '../../metrics/node-metrics.ts';
import { startHttpServer } from '../../metrics/server.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import { stopOnSignals } from '../stop-signals.ts';
import { versionInfo } from '../version.ts';
import type { Command } from './command.ts';

export const nodeCommand: Command = {
  name: 'node',
  summary: 'run once per node (a DaemonSet): what the agent does, for every opted-in Pod on the node',
  usage: `config-sync node [flags]\n\nServes the Pods bound to --node-name in --namespaces that are opted in (the namespace labelled config-sync.io/node-agent=enabled, or the Pod annotated config-sync.io/node-agent: enabled; a Pod's "disabled" wins), Running, and without a config-sync sidecar of their own. It reads their files in kubelet's directories under --kubelet-root.\n\nFlags:\n${flagHelp(nodeSettings)}\n\nStops on SIGTERM, SIGINT or SIGHUP: watches closed, logs flushed, exit 0.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('node', nodeSettings, args, env);
    const loop = loopConfig(settings);
    const config = nodeConfig(settings);
    const controller = new AbortController();
    let log: Logger | undefined;
    const signals = stopOnSignals(controller, () => log);

    let client: KubeClient | undefined;
    let agent: NodeAgentHandle | undefined;
    const metrics = createNodeMetrics(createMetrics(() => client?.requests ?? {}));
    const http = await startHttpServer(
      loop.listen,
      metrics,
      { ready: () => agent?.ready() ?? false, live: () => agent?.live() ?? true },
      controller.signal,
    );
    // The node agent names the namespace of every request (its Pods'), so no namespace of its
    // own is needed: the scope is resolved as an operator's.
    const scope = resolveScope(await gatherScopeFacts(config.agent.scope, env), 'operator');
    client = createKubeClient(scope, {
      requestTimeoutMs: config.agent.requestTimeoutMs,
      signal: controller.signal,
    });
    log = createLogger(loop.logLevel, { node: config.nodeName }, io.stdout);
    const key = loadDigestKey(config.agent.stateDir);
    log.info(
      {
        version: versionInfo().version,
        namespaces: config.namespaces,
        kubeletRoot: config.kubeletRoot,
        cluster: { server: scope.cluster.value.server, from: scope.cluster.source },
        credentials: { kind: scope.credentials.value.kind, from: scope.credentials.source },
        ...(scope.proxy ? { proxy: { url: scope.proxy.shown, from: scope.proxy.source } } : {}),
        settings: settings.all(),
      },
      'starting',
    );
    if (key.note) log.warn(key.note.replace('mount an emptyDir', 'mount a hostPath'));
    for (const w of config.agent.warnings) log.warn(w);
    log.info({ address: http.address }, 'listening');
    agent = startNodeAgent(
      { base: { scope, client, config, nodeKey: key.key }, log, metrics, options: loop },
      controller.signal,
    );
    await Promise.all([agent.done, http.closed]);
    signals.stopped();
    log.info('stopped');
    return EXIT.ok;
  },
};
