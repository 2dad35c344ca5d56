import { podSelection } from '../../config/agent-config.ts';
import {
  configFileSetting,
  outputSetting,
  podSettings,
  resolveSettings,
  type SettingDef,
  scopeFlags,
  scopeSettings,
} from '../../config/settings.ts';
import { parseWatchSpec } from '../../discover/watch-spec.ts';
import { type DoctorReport, type Problem, problemOf, runDoctorChecks } from '../../doctor/checks.ts';
import { formatJson, formatText } from '../../doctor/format.ts';
import { ConfigSyncError, DOMAIN_EXIT, EXIT } from '../../errors.ts';
import { createKubeClient } from '../../kube/client.ts';
import { resolveScope, type Scope } from '../../kube/scope.ts';
import { gatherScopeFacts } from '../../kube/scope-facts.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import { parseOutputFormat } from '../output-format.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
  configFileSetting,
  ...scopeSettings,
  ...podSettings,
  { name: 'fix', type: 'boolean', description: 'print the Role and RoleBinding that grant what is missing' },
  outputSetting,
];

// A configuration problem is the root cause of whatever permission errors follow from it (the
// wrong namespace gives 403s), so it decides the exit code first: the lowest domain exit code
// (usage and config 2, api and permission 3, internal 4) of all the problems.
function exitFor(report: DoctorReport): number {
  if (report.problems.length === 0) return EXIT.ok;
  return Math.min(...report.problems.map((p: Problem) => DOMAIN_EXIT[p.domain]));
}

export const doctorCommand: Command = {
  name: 'doctor',
  summary:
    'show which cluster, namespace and identity are in effect, where each came from, and what is allowed',
  usage: `config-sync doctor [flags]\n\nFlags:\n${flagHelp(defs)}\n\nExit: 0 the agent can work, 2 configuration problem, 3 permission or API problem.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('doctor', defs, args, env);
    const format = parseOutputFormat(settings.string('output')?.value);
    const watched = settings.list('watch').map((w) => parseWatchSpec(w).ref);
    const fix = settings.boolean('fix');
    const pod = podSelection(settings);

    const facts = await gatherScopeFacts(scopeFlags(settings), env);
    let scope: Scope;
    const preflight: Problem[] = [];
    try {
      scope = resolveScope(facts, 'operator');
    } catch (error) {
      if (!(error instanceof ConfigSyncError)) throw error;
      const report: DoctorReport = {
        ownerChain: [],
        sources: [],
        notes: [],
        access: [],
        problems: [problemOf(error)],
      };
      io.stdout.write(
        format === 'json'
          ? formatJson(report, settings.all(), false)
          : formatText(report, settings.all(), false),
      );
      return exitFor(report);
    }
    // What the agent itself would refuse at start-up is a problem here too.
    try {
      resolveScope(facts, 'agent');
    } catch (error) {
      preflight.push(problemOf(error));
    }

    const client = createKubeClient(scope);
    const report = await runDoctorChecks({
      client,
      namespace: scope.namespace,
      pod: pod.name,
      watched,
      preflight,
      selfContainer: pod.selfContainer,
      containers: pod.containers,
    });
    io.stdout.write(
      format === 'json' ? formatJson(report, settings.all(), fix) : formatText(report, settings.all(), fix),
    );
    return exitFor(report);
  },
};
