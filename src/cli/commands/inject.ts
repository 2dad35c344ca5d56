import fs from 'node:fs';
import { defaulted, resolveSettings, type SettingDef } from '../../config/settings.ts';
import { sidecarResourceSettings, sidecarResources } from '../../config/sidecar-resources.ts';
import { sidecarAgentEnv, sidecarSettings } from '../../config/sidecar-settings.ts';
import { ConfigSyncError, EXIT } from '../../errors.ts';
import { injectManifests } from '../../inject/inject.ts';
import { DEFAULT_SIDECAR } from '../../inject/sidecar.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
  {
    name: 'filename',
    short: 'f',
    type: 'string',
    valueName: 'file',
    default: '-',
    description: 'manifests to read; - for stdin',
  },
  {
    name: 'image',
    env: 'CONFIG_SYNC_IMAGE',
    type: 'string',
    valueName: 'ref',
    default: DEFAULT_SIDECAR.image,
    description: 'the config-sync image',
  },
  {
    name: 'service-account',
    env: 'CONFIG_SYNC_SERVICE_ACCOUNT',
    type: 'string',
    valueName: 'name',
    default: DEFAULT_SIDECAR.serviceAccount,
    description: 'the ServiceAccount the Pods run as (bound to the Role of deploy/sidecar/rbac)',
  },
  ...sidecarSettings,
  ...sidecarResourceSettings,
];

/** Reads stdin to the end (the CLI's only use of it). */
async function readStdin(): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of process.stdin) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export const injectCommand: Command = {
  name: 'inject',
  summary:
    'add the config-sync sidecar to the Pods of Deployments, StatefulSets, DaemonSets, Argo Rollouts and Pods in YAML manifests',
  usage: `config-sync inject [-f file] [flags] > out.yaml\n\nFlags:\n${flagHelp(defs)}\n\nWrites the manifests to stdout, the sidecar added; unrelated documents keep their bytes, and injecting twice changes nothing. Notes go to stderr.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('inject', defs, args, env);
    const agentEnv = sidecarAgentEnv('inject', settings);
    const resources = sidecarResources('inject', settings);
    const file = defaulted(settings, 'filename').value;
    let source: string;
    try {
      source = file === '-' ? await readStdin() : fs.readFileSync(file, 'utf8');
    } catch (error) {
      throw new ConfigSyncError(
        'CS_USAGE_BAD_FLAG',
        `inject: cannot read ${file}: ${(error as NodeJS.ErrnoException).code}`,
        {
          hint: 'pass -f with a readable manifest file, or pipe the manifests in (-f -)',
          cause: error,
        },
      );
    }
    const result = injectManifests(source, file === '-' ? 'stdin' : file, {
      image: defaulted(settings, 'image').value,
      serviceAccount: defaulted(settings, 'service-account').value,
      agentEnv,
      resources,
    });
    io.stdout.write(result.output);
    for (const n of result.notes) io.stderr.write(`note: ${n}\n`);
    if (result.injected.length > 0) io.stderr.write(`injected: ${result.injected.join(', ')}\n`);
    return EXIT.ok;
  },
};
