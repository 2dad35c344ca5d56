import { startAgent } from '../../agent/agent.ts';
import { openRuntime } from '../../agent/runtime.ts';
import { parseDuration, targetSettings } from '../../agent/settings.ts';
import { ConfigSyncError, EXIT } from '../../errors.ts';
import { createLogger, type LogLevel } from '../../log.ts';
import { createMetrics } from '../../metrics/metrics.ts';
import { startHttpServer } from '../../metrics/server.ts';
import type { CliIO } from '../io.ts';
import { flagHelp, resolveSettings, type SettingDef } from '../settings.ts';
import { versionInfo } from '../version.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
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

export const agentCommand: Command = {
  name: 'agent',
  summary: 'run beside the app: watch the mounts and the API, heal drift once, export metrics',
  usage: `config-sync agent [flags]\n\nFlags:\n${flagHelp(defs)}\n\nStops on SIGTERM or SIGINT: watches closed, logs flushed, exit 0.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('agent', defs, args, env);
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
    const duration = (name: string) => parseDuration('agent', name, settings.string(name)?.value ?? '');
    const options = {
      resyncMs: duration('resync'),
      pollMs: duration('poll'),
      heartbeatMs: duration('heartbeat'),
    };
    const rt = await openRuntime('agent', settings, env);
    const log = createLogger(
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

    const controller = new AbortController();
    const stop = (sig: string) => {
      log.info({ signal: sig }, 'stopping');
      controller.abort();
    };
    process.once('SIGTERM', () => stop('SIGTERM'));
    process.once('SIGINT', () => stop('SIGINT'));

    const metrics = createMetrics(() => rt.client.requests);
    const agent = startAgent({ rt, log, metrics, options }, controller.signal);
    const http = await startHttpServer(
      settings.string('listen')?.value ?? ':9464',
      metrics,
      agent,
      controller.signal,
    );
    log.info({ address: http.address }, 'listening');
    await Promise.all([agent.done, http.closed]);
    log.info('stopped');
    return EXIT.ok;
  },
};
