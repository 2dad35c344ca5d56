// How check and heal print verdicts and plans. Pure. Paths, reasons and short hash prefixes only.
import type { Plan } from '../heal/planner.ts';
import type { Verdict } from '../verify/verdict.ts';

export type Overall = 'in-sync' | 'propagating' | 'drift' | 'unknown';

export function overall(verdicts: readonly Verdict[]): Overall {
  if (verdicts.some((v) => v.state === 'Drifted' || v.state === 'Missing')) return 'drift';
  if (verdicts.some((v) => v.state === 'Unknown')) return 'unknown';
  if (verdicts.some((v) => v.state === 'Propagating')) return 'propagating';
  return 'in-sync';
}

/** The one line `check` prints. */
export function checkLine(verdicts: readonly Verdict[]): string {
  const state = overall(verdicts);
  const notOk = verdicts.filter((v) => v.state !== 'InSync');
  const first = notOk.find((v) => v.state === 'Drifted' || v.state === 'Missing') ?? notOk[0];
  const more = notOk.length > 1 ? ` (+${notOk.length - 1} more)` : '';
  if (state === 'in-sync' || !first)
    return `in sync: ${verdicts.length} ${verdicts.length === 1 ? 'target matches' : 'targets match'} the API`;
  const label = state === 'drift' ? 'drift' : state;
  return `${label}: ${first.target} ${first.reason}: ${first.message}${more}`;
}

/** What the Pod's annotations changed and left out, and what in them could not be read. */
export interface PlanSelection {
  readonly selection: readonly string[];
  readonly annotationProblems: readonly string[];
}

export function planText(
  plan: Plan,
  verdicts: readonly Verdict[],
  selected: PlanSelection = { selection: [], annotationProblems: [] },
): string {
  const head =
    plan.decision === 'restart'
      ? `plan: restart ${plan.workload?.kind} ${plan.workload?.name}`
      : plan.decision === 'deduped'
        ? `plan: nothing to do, ${plan.workload?.kind} ${plan.workload?.name} ${plan.rollingOut ? 'is rolling out a newer pod template, which replaces this pod' : 'was already restarted for this config'}`
        : plan.decision === 'alert'
          ? `plan: alert (${plan.alert}), no restart`
          : 'plan: nothing to do';
  const lines = [head, '', 'Why:', ...plan.reasons.map((r) => `  ${r}`), '', 'Targets:'];
  for (const v of verdicts) lines.push(`  ${v.state.padEnd(11)} ${v.target}  ${v.reason}`);
  if (selected.selection.length || selected.annotationProblems.length) {
    lines.push('', "The Pod's annotations:");
    for (const s of selected.selection) lines.push(`  ${s}`);
    for (const p of selected.annotationProblems) lines.push(`  invalid: ${p}`);
  }
  lines.push('', `config hash: ${plan.configHash}`);
  return `${lines.join('\n')}\n`;
}

export function planJson(
  plan: Plan,
  verdicts: readonly Verdict[],
  extra: Record<string, unknown> = {},
): string {
  return `${JSON.stringify({ ...plan, verdicts, ...extra }, null, 2)}\n`;
}
