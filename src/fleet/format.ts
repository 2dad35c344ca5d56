// `config-sync status` output: a table of Pods as kubectl prints one, then one line per workload;
// `-o wide` adds which agent checks each Pod (its sidecar, or the node agent), the matched versions
// and the condition's message; `-o json` is both lists.
import { age, type PodRow, type WorkloadRow, workloadLine } from './rows.ts';

function table(rows: readonly (readonly string[])[]): string {
  const widths = (rows[0] ?? []).map((_, i) => Math.max(...rows.map((r) => (r[i] ?? '').length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i] ?? 0))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

export function statusText(
  pods: readonly PodRow[],
  workloads: readonly WorkloadRow[],
  now: number,
  options: { readonly allNamespaces: boolean; readonly wide: boolean },
): string {
  if (pods.length === 0) return 'no Pod runs the config-sync agent here\n';
  const header = [
    ...(options.allNamespaces ? ['NAMESPACE'] : []),
    'POD',
    'WORKLOAD',
    'STATE',
    'REASON',
    'SINCE',
    'LAST SYNC',
    ...(options.wide ? ['AGENT', 'MATCHED VERSIONS', 'MESSAGE'] : []),
  ];
  const rows = pods.map((p) => [
    ...(options.allNamespaces ? [p.namespace] : []),
    p.pod,
    p.workload,
    p.state,
    p.reason || '-',
    p.driftedSince === undefined ? '-' : age(now - p.driftedSince),
    p.lastSync === undefined ? '-' : `${age(now - p.lastSync)} ago`,
    ...(options.wide ? [p.agent, p.matchedVersions || '-', p.message || '-'] : []),
  ]);
  const lines = workloads.map((w) => workloadLine(w, now, options.allNamespaces));
  return `${table([header, ...rows])}\n\n${lines.join('\n')}\n`;
}

export function statusJson(pods: readonly PodRow[], workloads: readonly WorkloadRow[]): string {
  const iso = (ms: number | undefined) => (ms === undefined ? undefined : new Date(ms).toISOString());
  return `${JSON.stringify(
    {
      pods: pods.map((p) => ({ ...p, driftedSince: iso(p.driftedSince), lastSync: iso(p.lastSync) })),
      workloads: workloads.map((w) => ({ ...w, driftedSince: iso(w.driftedSince) })),
    },
    null,
    2,
  )}\n`;
}
