import type { Logger } from 'pino';
import { type AgentHandle, startAgent } from '../../agent/agent.ts';
import { openRuntime, type Runtime } from '../../agent/runtime.ts';
import { durationSetting, targetSettings } from '../../agent/settings.ts';
import { ConfigSyncError, EXIT } from '../../errors.ts';
import { createLogger, type LogLevel } from '../../log.ts';
import { createMetrics } from '../../metrics/metrics.ts';
import { parseListen, startHttpServer } from '../../metrics/server.ts';
import type { CliIO } from '../io.ts';
import { flagHelp, resolveSettings, type SettingDef } from '../settings.ts';
import { versionInfo } from '../version.ts';
import type { Command } from './command.ts';

export const agentSettings: readonly SettingDef[] = [
  ...targetSettings,
  {
    name: 'listen',
    env: 'CONFIG_SYNC_LISTEN',
    type: 'string',
    valueName: 'host:port',
    default: ':9464',
    description: '/metrics, /healthz, /readyz',
  },
  {
    name: 'resync',
    env: 'CONFIG_SYNC_RESYNC',
    type: 'string',
    valueName: 'duration',
    default: '60s',
    description: 'a full compare at least this often, whatever the watches say',
  },
  {
    name: 'poll',
    env: 'CONFIG_SYNC_POLL',
    type: 'string',
    valueName: 'duration',
    default: '2s',
    description: 'stat check of the mounts (inotify fallback)',
  },
  {
    name: 'heartbeat',
    env: 'CONFIG_SYNC_HEARTBEAT',
    type: 'string',
    valueName: 'duration',
    default: '15m',
    description: 'rewrite the InSync condition at least this often',
  },
  {
    name: 'log-level',
    env: 'CONFIG_SYNC_LOG_LEVEL',
    type: 'string',
    valueName: 'level',
    default: 'info',
    description: 'debug, info, warn or error',
  },
];

/** After SIGTERM the process is gone within 5 s, whatever the API server does. */
const STOP_DEADLINE_MS = 4_500;

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run beside the app: watch the mounts and the API, heal drift once, export metrics',
  usage: `config-sync agent [flags]\n\nFlags:\n${flagHelp(agentSettings)}\n\nStops on SIGTERM or SIGINT: watches closed, logs flushed, exit 0.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('agent', agentSettings, args, env);
    const level = settings.string('log-level')?.value ?? 'info';
    if (!['debug', 'info', 'warn', 'error'].includes(level)) {
      throw new ConfigSyncError(
        'CS_USAGE_BAD_FLAG',
        'usage',
        `agent: --log-level ${level} is not debug, info, warn or error`,
        {
          hint: 'use --log-level info (default)',
        },
      );
    }
    const listen = settings.string('listen')?.value ?? ':9464';
    parseListen(listen);
    const duration = (name: string) => durationSetting('agent', settings, name);
    const options = {
      resyncMs: duration('resync'),
      pollMs: duration('poll'),
      heartbeatMs: duration('heartbeat'),
    };
    // Signals first: a SIGTERM while the runtime opens (a slow or stalled API server) must stop
    // the process too, not wait for the request to time out.
    const controller = new AbortController();
    let log: Logger | undefined;
    const stop = (sig: string) => {
      log?.info({ signal: sig }, 'stopping');
      controller.abort();
      // The backstop of the 5 s promise: everything in flight is aborted by now, so this fires
      // only if something ignored the abort. unref(): it never keeps a clean stop waiting.
      setTimeout(() => {
        log?.error({ signal: sig }, 'still running 4.5 s after the stop signal: exiting');
        process.exit(EXIT.ok);
      }, STOP_DEADLINE_MS).unref();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));

    // Listen before anything else: an address that cannot be had (in use, not on this machine)
    // is a configuration error that ends the process at once (exit 2), before any request, not
    // an agent left running with no health or metrics endpoint.
    let rt: Runtime | undefined;
    let agent: AgentHandle | undefined;
    const metrics = createMetrics(() => rt?.client.requests ?? {});
    const http = await startHttpServer(
      listen,
      metrics,
      { ready: () => agent?.ready() ?? false, live: () => agent?.live() ?? true },
      controller.signal,
    );
    try {
      rt = await openRuntime('agent', settings, env, controller.signal);
    } catch (error) {
      const stopping = controller.signal.aborted;
      controller.abort();
      await http.closed;
      if (stopping) return EXIT.ok;
      throw error;
    }
    log = createLogger(
      level as LogLevel,
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
    for (const w of rt.warnings) log.warn(w);

    log.info({ address: http.address }, 'listening');
    agent = startAgent({ rt, log, metrics, options }, controller.signal);
    await Promise.all([agent.done, http.closed]);
    log.info('stopped');
    return EXIT.ok;
  },
};
