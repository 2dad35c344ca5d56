// Formats a DoctorReport for a person (text) or a script (json). Pure. The first line is always a
// one-line verdict, so `config-sync doctor | head -1` is a diagnosis.
import { stringify } from 'yaml';
import type { SettingValue } from '../config/settings.ts';
import { roleAndBinding, subjectFor } from '../kube/permissions.ts';
import type { Sourced } from '../kube/scope.ts';
import type { CheckedNeed, DoctorReport } from './checks.ts';

export function summaryLine(report: DoctorReport): string {
  const [first, ...rest] = report.problems;
  if (first) {
    const more = rest.length ? ` [+${rest.length} more problem${rest.length > 1 ? 's' : ''}]` : '';
    return `problem: ${first.message}${more}`;
  }
  const ns = report.scope?.namespace?.value;
  const checks = report.access.length;
  return `ok: config-sync can work in namespace "${ns}" as ${report.identity?.username} (${checks} permission${checks === 1 ? '' : 's'} checked)`;
}

/**
 * When something is missing: the Role and RoleBinding that grant everything the agent needs here,
 * allowed or not, as YAML. The whole Role rather than the missing rules: applying it again after
 * a later run (which may see more, once the Pod is readable) replaces it with the complete set
 * instead of dropping what an earlier fix granted.
 */
export function fixYaml(report: DoctorReport): string {
  const ns = report.scope?.namespace?.value;
  if (!report.access.some((a) => !a.allowed) || !ns || !report.identity) return '';
  const subject = subjectFor(report.identity.username);
  const name = `config-sync-${subject.name.replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);
  return roleAndBinding(name, ns, report.access, subject)
    .map((doc) => `---\n${stringify(doc)}`)
    .join('');
}

function needText(n: CheckedNeed): string {
  const resource = n.subresource ? `${n.resource}/${n.subresource}` : n.resource;
  const group = n.group ? `.${n.group}` : '';
  return `${n.verb} ${resource}${group}${n.name ? ` "${n.name}"` : ''}`;
}

export function formatText(
  report: DoctorReport,
  settings: Record<string, Sourced<SettingValue>>,
  fix: boolean,
): string {
  const out: string[] = [summaryLine(report), ''];
  const scope = report.scope;
  if (scope) {
    out.push('Scope');
    out.push(`  cluster      ${scope.cluster.value.server}   from ${scope.cluster.source}`);
    out.push(
      `  namespace    ${scope.namespace ? `${scope.namespace.value}   from ${scope.namespace.source}` : '(none from any source)'}`,
    );
    const c = scope.credentials.value;
    out.push(
      `  credentials  ${c.kind}${c.tokenFile ? ` ${c.tokenFile}` : ''}   from ${scope.credentials.source}`,
    );
    if (scope.proxy) out.push(`  proxy        ${scope.proxy.shown}   from ${scope.proxy.source}`);
    else if (scope.proxyBypassed) out.push(`  proxy        none: ${scope.proxyBypassed}`);
    for (const d of scope.disagreements) out.push(`  ! ${d.message}`);
    out.push('');
  }
  if (report.identity) {
    out.push('Identity (as the API server sees it)');
    out.push(`  user    ${report.identity.username}`);
    out.push(`  groups  ${report.identity.groups.join(', ')}`);
    for (const [k, v] of Object.entries(report.identity.extra)) out.push(`  extra   ${k}=${v.join(',')}`);
    if (report.serverVersion) out.push(`  server  ${report.serverVersion}`);
    out.push('');
  }
  if (report.pod || report.sources.length || report.notes.length) {
    const owner = report.ownerChain.length ? `, owner ${report.ownerChain.join(' -> ')}` : '';
    out.push(`Targets${report.pod ? ` (Pod ${report.pod.value} from ${report.pod.source}${owner})` : ''}`);
    out.push(
      `  ${report.sources.map((s) => `${s.kind} ${s.name}`).join(', ') || '(no ConfigMap or Secret referenced)'}`,
    );
    for (const n of report.notes) out.push(`  note: ${n}`);
    for (const line of report.selection ?? []) out.push(`  annotation: ${line}`);
    out.push('');
  }
  if (report.access.length) {
    out.push('Permissions');
    const width = Math.max(...report.access.map((a) => needText(a).length));
    for (const a of report.access) {
      out.push(`  ${a.allowed ? 'ok     ' : 'MISSING'}  ${needText(a).padEnd(width)}  ${a.why}`);
    }
    out.push('');
  }
  if (report.problems.length) {
    out.push('Problems');
    for (const p of report.problems) {
      out.push(`  ${p.code}: ${p.message}`);
      if (p.hint) out.push(`    hint: ${p.hint}`);
    }
    out.push('');
  }
  out.push('Settings');
  for (const [name, s] of Object.entries(settings)) {
    out.push(`  ${name} = ${Array.isArray(s.value) ? s.value.join(',') : String(s.value)}   (${s.source})`);
  }
  const yaml = fix ? fixYaml(report) : '';
  if (yaml) out.push('', '# Everything the agent needs here; apply with kubectl apply -f -', yaml.trimEnd());
  return `${out.join('\n')}\n`;
}

export function formatJson(
  report: DoctorReport,
  settings: Record<string, Sourced<SettingValue>>,
  fix: boolean,
): string {
  const yaml = fix ? fixYaml(report) : undefined;
  return `${JSON.stringify(
    {
      summary: summaryLine(report),
      ok: report.problems.length === 0,
      ...report,
      settings,
      ...(yaml ? { fix: yaml } : {}),
    },
    null,
    2,
  )}\n`;
}
