import type { Logger } from 'pino';
import { type AgentHandle, startAgent } from '../../agent/agent.ts';
import { openRuntime, type Runtime } from '../../agent/runtime.ts';
import { agentConfig, loopConfig } from '../../config/agent-config.ts';
import { agentSettings } from '../../config/agent-settings.ts';
import { resolveSettings } from '../../config/settings.ts';
import { EXIT } from '../../errors.ts';
import { createLogger } from '../../log.ts';
import { createMetrics } from '../../metrics/metrics.ts';
import { startHttpServer } from '../../metrics/server.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import { stopOnSignals } from '../stop-signals.ts';
import { versionInfo } from '../version.ts';
import type { Command } from './command.ts';

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run beside the app: watch the mounts and the API, heal drift once, export metrics',
  usage: `config-sync agent [flags]\n\nFlags:\n${flagHelp(agentSettings)}\n\nStops on SIGTERM or SIGINT: watches closed, logs flushed, exit 0.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('agent', agentSettings, args, env);
    const loop = loopConfig(settings);
    const config = agentConfig('agent', settings);
    // Signals first: a SIGTERM while the runtime opens (a slow or stalled API server) must stop
    // the process too, not wait for the request to time out.
    const controller = new AbortController();
    let log: Logger | undefined;
    const signals = stopOnSignals(controller, () => log);

    // Listen before anything else: an address that cannot be had (in use, not on this machine)
    // is a configuration error that ends the process at once (exit 2), before any request, not
    // an agent left running with no health or metrics endpoint.
    let rt: Runtime | undefined;
    let agent: AgentHandle | undefined;
    const metrics = createMetrics(() => rt?.client.requests ?? {});
    const http = await startHttpServer(
      loop.listen,
      metrics,
      { ready: () => agent?.ready() ?? false, live: () => agent?.live() ?? true },
      controller.signal,
    );
    try {
      rt = await openRuntime(config, env, controller.signal);
    } catch (error) {
      const stopping = controller.signal.aborted;
      controller.abort();
      await http.closed;
      signals.stopped();
      if (stopping) return EXIT.ok;
      throw error;
    }
    log = createLogger(
      loop.logLevel,
      { namespace: rt.namespace, pod: rt.pod?.metadata?.name ?? '' },
      io.stdout,
    );
    const scope = rt.scope;
    log.info(
      {
        version: versionInfo().version,
        cluster: { server: scope.cluster.value.server, from: scope.cluster.source },
        namespace: scope.namespace,
        credentials: { kind: scope.credentials.value.kind, from: scope.credentials.source },
        ...(scope.proxy ? { proxy: { url: scope.proxy.shown, from: scope.proxy.source } } : {}),
        targets: rt.targets.map((t) =>
          t.type === 'volume'
            ? { container: t.container, mountPath: t.mountPath, subPath: t.subPath }
            : { container: t.container, env: `${t.ref.kind}/${t.ref.name}` },
        ),
        sources: rt.sources.map((s) => `${s.kind}/${s.name}`),
        settings: settings.all(),
      },
      'starting',
    );
    for (const d of scope.disagreements) log.warn({ chosen: d.chosen, other: d.other }, d.message);
    for (const n of rt.notes) log.info(n);
    for (const line of rt.selection) log.info({ selection: true }, line);
    for (const w of rt.config.warnings) log.warn(w);

    log.info({ address: http.address }, 'listening');
    agent = startAgent({ rt, log, metrics, options: loop }, controller.signal);
    await Promise.all([agent.done, http.closed]);
    signals.stopped();
    log.info('stopped');
    return EXIT.ok;
  },
};
