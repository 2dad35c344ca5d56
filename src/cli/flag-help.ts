import type { SettingDef } from '../config/settings.ts';

/** The flags block of a command's --help. */
export function flagHelp(defs: readonly SettingDef[]): string {
  const rows = defs.map((d) => {
    const flag = `${d.short ? `-${d.short}, ` : '    '}--${d.name}${d.type === 'boolean' ? '' : ` ${d.valueName ?? 'value'}`}`;
    const extra = [d.env ? `env ${d.env}` : '', d.default !== undefined ? `default ${String(d.default)}` : '']
      .filter(Boolean)
      .join('; ');
    return { flag, text: `${d.description}${extra ? ` (${extra})` : ''}` };
  });
  const width = Math.max(...rows.map((r) => r.flag.length));
  return rows.map((r) => `  ${r.flag.padEnd(width)}  ${r.text}`).join('\n');
}
