// The bench's table: its rows, how figures are formatted, and the rows measured against a goal.

export interface Row {
  readonly what: string;
  readonly ours: string;
  readonly baseline: string;
  readonly relation: string;
  readonly target: string;
  readonly ok: boolean;
}
export const rows: Row[] = [];
export const fmt = (n: number, digits = 1) => n.toFixed(digits);

/**
 * Resident memory in MiB: all of it, and the anonymous part (heap, V8's code, stacks), which a
 * process or container has alone. The rest is mapped files, the Node binary's pages above all,
 * shared through the page cache by every process of the binary; in a cgroup it is charged to
 * whichever container read a page first, so of two containers of the same image on a node, the
 * one started second is not charged for the pages the first already touched.
 */
export interface Resident {
  readonly total: number;
  readonly anonymous: number;
}

/** A memory goal row's cells: ours beside the baseline, each with its anonymous part; goal bare + 15 MiB. */
export function memoryGoal(
  ours: Resident,
  bare: Resident,
  bareName: string,
  oursDetail = '',
): Omit<Row, 'what'> {
  return {
    ours: `${fmt(ours.total)} MiB (${oursDetail}anonymous ${fmt(ours.anonymous)})`,
    baseline: `${bareName} ${fmt(bare.total)} MiB (${fmt(bare.anonymous)})`,
    relation: `${signed(ours.total - bare.total)} MiB (anonymous ${signed(ours.anonymous - bare.anonymous)})`,
    target: '<= bare + 15 MiB (issue 13)',
    ok: ours.total - bare.total <= 15,
  };
}
export const signed = (n: number, digits = 1) => `${n >= 0 ? '+' : ''}${fmt(n, digits)}`;
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
export const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.ceil((p / 100) * xs.length) - 1)] as number;
export const log = (line: string) => process.stderr.write(`[bench] ${line}\n`);

/**
 * How paired latency samples compare (ours[i] and baseline[i] are one event seen by both): the
 * difference of the two p99s, and the median of each event's difference, what the agent itself
 * adds, which the machine's noise moves far less than the difference of two p99s (a host's
 * stall of a few ms lands in one of the two, or in neither).
 */
export function latencyRelation(ours: number[], baseline: number[]): string {
  const overAtP99 = percentile(ours, 99) - percentile(baseline, 99);
  const pairedMedian = median(ours.map((x, i) => x - (baseline[i] as number)));
  return `${signed(overAtP99)} ms at p99, ${signed(pairedMedian)} ms paired median`;
}

/**
 * A latency row: p50 / p99 of the agent's samples beside the baseline's, the difference at p99
 * and the paired median, and the target, either an absolute p99 (`maxMs`) or one over the
 * baseline's (`overBaselineMs`).
 */
export function latencyRow(
  what: string,
  ours: number[],
  baseline: { name: string; samples: number[] },
  target: { maxMs: number } | { overBaselineMs: number; why: string },
): Row {
  const both = (xs: number[]) => `${fmt(percentile(xs, 50))} / ${fmt(percentile(xs, 99))} ms`;
  const over = percentile(ours, 99) - percentile(baseline.samples, 99);
  return {
    what: `${what}, p50 / p99`,
    ours: both(ours),
    baseline: `${baseline.name} ${both(baseline.samples)}`,
    relation: latencyRelation(ours, baseline.samples),
    ...('maxMs' in target
      ? { target: `p99 <= ${target.maxMs} ms`, ok: percentile(ours, 99) <= target.maxMs }
      : {
          target: `p99 <= raw + ${target.overBaselineMs} ms (${target.why})`,
          ok: over <= target.overBaselineMs,
        }),
  };
}

/** A reported (no target) row of a per-change figure of the agent and its baseline, in ms. */
export function perChangeRow(
  what: string,
  figures: { readonly agent: number; readonly raw: number },
  baselineName: string,
  target = '(report)',
): Row {
  return {
    what,
    ours: `${fmt(figures.agent, 2)} ms`,
    baseline: `${baselineName} ${fmt(figures.raw, 2)} ms`,
    relation: `${signed(figures.agent - figures.raw, 2)} ms`,
    target,
    ok: true,
  };
}

/** The rows as a Markdown table, each column as wide as its widest cell. */
export function formatTable(all: readonly Row[]): string {
  const header = ['measure', 'config-sync', 'baseline (same run)', 'difference', 'target', ''];
  const table = [
    header,
    ...all.map((r) => [r.what, r.ours, r.baseline, r.relation, r.target, r.ok ? 'ok' : 'MISSED']),
  ];
  const widths = header.map((_, i) => Math.max(...table.map((r) => (r[i] as string).length)));
  return table.map((r) => `| ${r.map((c, i) => c.padEnd(widths[i] as number)).join(' | ')} |\n`).join('');
}
