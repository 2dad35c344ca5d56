import type { V1Namespace, V1PodList } from '@kubernetes/client-node';
import {
  configFileSetting,
  defaulted,
  podSettings,
  resolveSettings,
  type SettingDef,
  scopeFlags,
  scopeSettings,
} from '../../config/settings.ts';
import { badOutputFormat, ConfigSyncError, EXIT } from '../../errors.ts';
import { statusJson, statusText } from '../../fleet/format.ts';
import { missedInjection, notInjectedRow, podRow, runsAgent, workloadRows } from '../../fleet/rows.ts';
import { createKubeClient } from '../../kube/client.ts';
import { namespaceAbsentError, namespacePresence } from '../../kube/namespace-presence.ts';
import { resolveScope } from '../../kube/scope.ts';
import { gatherScopeFacts } from '../../kube/scope-facts.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
  configFileSetting,
  ...scopeSettings,
  {
    name: 'all-namespaces',
    short: 'A',
    type: 'boolean',
    description: 'every namespace (needs list pods cluster-wide)',
  },
  {
    name: 'selector',
    short: 'l',
    type: 'string',
    valueName: 'selector',
    description: 'only Pods with these labels, as kubectl -l',
  },
  {
    name: 'output',
    short: 'o',
    type: 'string',
    valueName: 'text|wide|json',
    default: 'text',
    description: 'output format (wide: the matched versions and the message too)',
  },
  ...podSettings.filter((d) => d.name === 'self-container'),
];

export const statusCommand: Command = {
  name: 'status',
  summary: 'the fleet view: every Pod that runs the agent, in sync or drifted and why, from the API alone',
  usage: `config-sync status [-n ns | -A] [-l selector] [-o text|wide|json] [flags]\n\nFlags:\n${flagHelp(defs)}\n\nNeeds only "list pods" in the namespaces asked for ("get namespaces" too, to find Pods that asked for the sidecar and missed it). Prints hashes, reasons and versions, never a value.\nExit: 0 nothing drifted, 1 a Pod drifted or missed its sidecar (NotInjected), 2 usage or configuration error, 3 API or permission error.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('status', defs, args, env);
    const output = defaulted(settings, 'output').value;
    if (!['text', 'wide', 'json'].includes(output)) throw badOutputFormat(output, ['text', 'wide', 'json']);
    const all = settings.boolean('all-namespaces');
    const scope = resolveScope(await gatherScopeFacts(scopeFlags(settings), env), 'operator');
    const namespace = scope.namespace?.value;
    if (!all && !namespace) {
      throw new ConfigSyncError('CS_CONFIG_NO_NAMESPACE', 'status: no namespace to look in', {
        hint: 'pass -n NAMESPACE, -A for every namespace, or set a namespace in the kubeconfig context',
      });
    }
    const selector = settings.string('selector')?.value;
    const client = createKubeClient(scope);
    const list = await client.get<V1PodList>(
      all || namespace === undefined ? { resource: 'pods' } : { resource: 'pods', namespace },
      selector ? { labelSelector: selector } : undefined,
    );
    // No Pods in a namespace that does not exist is a typo, not an empty namespace.
    if (!all && namespace && list.items.length === 0) {
      if ((await namespacePresence(client, namespace)) === 'absent') throw namespaceAbsentError(scope);
    }
    const agent = defaulted(settings, 'self-container').value;
    // The namespaces' labels, for Pods that asked for the sidecar and have none (the webhook
    // was down when they were made); a namespace the identity may not read tells nothing.
    const labels = new Map<string, Readonly<Record<string, string>> | undefined>();
    for (const ns of new Set(
      list.items.filter((p) => !runsAgent(p, agent)).map((p) => p.metadata?.namespace ?? ''),
    ))
      labels.set(
        ns,
        await client
          .get<V1Namespace>({ resource: 'namespaces', name: ns })
          .then((n) => n.metadata?.labels ?? {})
          .catch(() => undefined),
      );
    const pods = list.items.flatMap((p) =>
      runsAgent(p, agent)
        ? [podRow(p, agent)]
        : missedInjection(p, labels.get(p.metadata?.namespace ?? ''), agent)
          ? [notInjectedRow(p)]
          : [],
    );
    const workloads = workloadRows(pods);
    const now = Date.now();
    io.stdout.write(
      output === 'json'
        ? statusJson(pods, workloads)
        : statusText(pods, workloads, now, { allNamespaces: all, wide: output === 'wide' }),
    );
    return pods.some((p) => p.state === 'Drifted' || p.state === 'NotInjected') ? EXIT.drift : EXIT.ok;
  },
};
