import { resolveSettings, type SettingDef } from '../../config/settings.ts';
import { sidecarResourceSettings, sidecarResources } from '../../config/sidecar-resources.ts';
import { sidecarAgentEnv, sidecarSettings } from '../../config/sidecar-settings.ts';
import { EXIT } from '../../errors.ts';
import { checkImageReference } from '../../inject/image-ref.ts';
import { DEFAULT_SIDECAR } from '../../inject/sidecar.ts';
import { createLogger } from '../../log.ts';
import { startHttpServer } from '../../metrics/server.ts';
import { createWebhookMetrics } from '../../metrics/webhook-metrics.ts';
import { startWebhook } from '../../webhook/server.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
  {
    name: 'listen',
    env: 'CONFIG_SYNC_WEBHOOK_LISTEN',
    type: 'string',
    valueName: 'host:port',
    default: ':8443',
    description: 'HTTPS address',
  },
  {
    name: 'metrics-listen',
    env: 'CONFIG_SYNC_WEBHOOK_METRICS_LISTEN',
    type: 'string',
    valueName: 'host:port',
    description: 'plain HTTP address for /metrics and /healthz (deploy/webhook: :9464); unset: none',
  },
  {
    name: 'tls-cert-file',
    env: 'CONFIG_SYNC_TLS_CERT_FILE',
    type: 'string',
    valueName: 'file',
    default: '/etc/config-sync/tls/tls.crt',
    description: 'PEM certificate (reloaded when it changes)',
  },
  {
    name: 'tls-key-file',
    env: 'CONFIG_SYNC_TLS_KEY_FILE',
    type: 'string',
    valueName: 'file',
    default: '/etc/config-sync/tls/tls.key',
    description: 'PEM private key',
  },
  {
    name: 'image',
    env: 'CONFIG_SYNC_IMAGE',
    type: 'string',
    valueName: 'ref',
    default: DEFAULT_SIDECAR.image,
    description: 'the config-sync image to inject',
  },
  ...sidecarSettings,
  ...sidecarResourceSettings,
];

export const webhookCommand: Command = {
  name: 'webhook',
  summary:
    'serve a mutating admission webhook that injects the sidecar into Pods of labelled namespaces or workloads',
  usage: `config-sync webhook [flags]\n\nFlags:\n${flagHelp(defs)}\n\nManifests: deploy/webhook. Stops on SIGTERM or SIGINT.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('webhook', defs, args, env);
    const image = checkImageReference('webhook', settings.string('image')?.value ?? DEFAULT_SIDECAR.image);
    const agentEnv = sidecarAgentEnv('webhook', settings);
    const resources = sidecarResources('webhook', settings);
    const log = createLogger('info', { role: 'webhook' }, io.stdout);
    const controller = new AbortController();
    process.once('SIGTERM', () => controller.abort());
    process.once('SIGINT', () => controller.abort());
    const metricsListen = settings.string('metrics-listen')?.value;
    const metrics = metricsListen ? createWebhookMetrics() : undefined;
    const server = await startWebhook(
      {
        listen: settings.string('listen')?.value ?? ':8443',
        certFile: settings.string('tls-cert-file')?.value ?? '',
        keyFile: settings.string('tls-key-file')?.value ?? '',
        sidecar: { ...DEFAULT_SIDECAR, image, agentEnv, resources },
        certPollMs: 2000,
        ...(metrics ? { metrics } : {}),
      },
      log,
      controller.signal,
    );
    // /metrics and /healthz on a plain port, started once the HTTPS server listens (its health
    // is that server's); an address that cannot be had stops both, with the error.
    let http: { address: string; closed: Promise<void> } | undefined;
    if (metricsListen && metrics) {
      const always = { live: () => true, ready: () => true };
      http = await startHttpServer(metricsListen, metrics, always, controller.signal).catch(async (error) => {
        controller.abort();
        await server.closed;
        throw error;
      });
    }
    log.info({ address: server.address, ...(http ? { metrics: http.address } : {}) }, 'listening');
    await Promise.all([server.closed, http?.closed]);
    log.info('stopped');
    return EXIT.ok;
  },
};
