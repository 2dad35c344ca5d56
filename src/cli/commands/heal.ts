import { runOnce } from '../../agent/oneshot.ts';
import { openRuntime, type Runtime } from '../../agent/runtime.ts';
import { agentConfig } from '../../config/agent-config.ts';
import { targetSettings } from '../../config/agent-settings.ts';
import { outputSetting, resolveSettings, type SettingDef } from '../../config/settings.ts';
import { EXIT } from '../../errors.ts';
import { emitEvent, restartWorkload } from '../../heal/executor.ts';
import { type HealReport, planReport, restartReport } from '../../heal/report.ts';
import { flagHelp } from '../flag-help.ts';
import type { CliIO } from '../io.ts';
import { parseOutputFormat } from '../output-format.ts';
import { overall, planJson, planText } from '../plan-format.ts';
import type { Command } from './command.ts';

const defs: readonly SettingDef[] = [
  ...targetSettings,
  { name: 'dry-run', type: 'boolean', description: 'print the plan and why; change nothing' },
  outputSetting,
];

// A 409 means the workload changed between read and patch (a sibling restarted it, a deploy
// rolled): re-read and decide again, a bounded number of times.
const MAX_ATTEMPTS = 3;

/**
 * What heal did, as an Event on the Pod it ran for (the agent's own reports, heal/report.ts), so
 * a restart by hand is as visible in `kubectl describe pod` as the agent's. An Event that cannot
 * be written (an operator without `create events`) is a warning, not a failure: the restart
 * happened.
 */
async function tellOnPod(rt: Runtime, report: HealReport, io: CliIO): Promise<void> {
  const name = rt.pod?.metadata?.name;
  if (!report.event || !name) return;
  try {
    await emitEvent(
      rt.client,
      { name, namespace: rt.namespace, uid: rt.pod?.metadata?.uid ?? '' },
      report.event.reason,
      `${report.event.message} (by config-sync heal)`,
      report.event.type,
      new Date(),
    );
  } catch (error) {
    io.stderr.write(
      `warning: could not record the ${report.event.reason} Event: ${(error as Error).message}\n`,
    );
  }
}

export const healCommand: Command = {
  name: 'heal',
  summary: 'decide what to do about drift and why (--dry-run), or do it once: at most one restart',
  usage: `config-sync heal [--dry-run] [-o text|json] [flags]\n\nFlags:\n${flagHelp(defs)}\n\nExit: 0 nothing left to do (in sync, restarted, or a sibling restarted), 1 drift not healed (or --dry-run found drift, or the restart waits for a paused Deployment's resume), 2 usage or configuration error, 3 API or permission error.`,
  async run(args: readonly string[], io: CliIO, env: NodeJS.ProcessEnv = process.env): Promise<number> {
    const settings = resolveSettings('heal', defs, args, env);
    const format = parseOutputFormat(settings.string('output')?.value);
    const rt = await openRuntime(agentConfig('heal', settings), env);
    for (const w of rt.config.warnings) io.stderr.write(`warning: ${w}\n`);
    const selected = { selection: rt.selection, annotationProblems: rt.annotationProblems };
    for (let attempt = 1; ; attempt += 1) {
      const { verdicts, plan } = await runOnce(rt, Date.now());
      const drift = overall(verdicts) === 'drift';
      if (settings.boolean('dry-run') || plan.decision !== 'restart') {
        io.stdout.write(
          format === 'json'
            ? planJson(plan, verdicts, { dryRun: settings.boolean('dry-run'), ...selected })
            : planText(plan, verdicts, selected),
        );
        if (settings.boolean('dry-run')) return drift ? EXIT.drift : EXIT.ok;
        const report = planReport(plan, false);
        if (report) await tellOnPod(rt, report, io);
        return plan.decision === 'alert' ? EXIT.drift : EXIT.ok;
      }
      const outcome = await restartWorkload(rt.client, rt.namespace, plan, new Date());
      if (outcome === 'restarted') {
        await tellOnPod(rt, restartReport(plan, { type: 'restarted' }, false), io);
        // A paused Deployment's restart is recorded, and heals nothing until it is resumed.
        const done = plan.paused
          ? `recorded the restart of ${plan.workload?.kind} ${plan.workload?.name} with config ${plan.configHash}; ${plan.paused}`
          : `restarted ${plan.workload?.kind} ${plan.workload?.name} with config ${plan.configHash}`;
        io.stdout.write(
          format === 'json'
            ? planJson(plan, verdicts, { result: plan.paused ? 'paused' : 'restarted', ...selected })
            : `${planText(plan, verdicts, selected)}${done}\n`,
        );
        return plan.paused ? EXIT.drift : EXIT.ok;
      }
      if (attempt >= MAX_ATTEMPTS) {
        io.stderr.write(
          `error CS_HEAL_CONFLICT: ${plan.workload?.kind} ${plan.workload?.name} kept changing during ${MAX_ATTEMPTS} attempts; nothing was restarted\nhint: run heal again; if it persists, something else rewrites the workload continuously\n`,
        );
        return EXIT.api;
      }
    }
  },
};
