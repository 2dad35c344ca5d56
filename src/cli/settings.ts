// Command-line settings: each value resolved flag > environment > default, and kept with its
// origin so `doctor` (and the agent's start-up log) can say where every setting came from.
// (A config-file layer, between environment and default, comes with the agent.)
import { parseArgs } from 'node:util';
import { badFlag } from '../errors.ts';
import type { Sourced } from '../kube/scope.ts';

export type SettingType = 'string' | 'boolean' | 'list';
export type SettingValue = string | boolean | string[];

export interface SettingDef {
  /** The long flag, without dashes. */
  readonly name: string;
  readonly short?: string;
  /** The environment variable that stands in for the flag. */
  readonly env?: string;
  readonly type: SettingType;
  readonly default?: string | boolean;
  readonly valueName?: string;
  readonly description: string;
}

export interface Settings {
  get(name: string): Sourced<SettingValue> | undefined;
  string(name: string): Sourced<string> | undefined;
  boolean(name: string): boolean;
  list(name: string): string[];
  /** Every resolved setting with its origin, for doctor. */
  all(): Record<string, Sourced<SettingValue>>;
}

function parseBoolean(command: string, raw: string, origin: string): boolean {
  if (['1', 'true', 'yes'].includes(raw.toLowerCase())) return true;
  if (['0', 'false', 'no', ''].includes(raw.toLowerCase())) return false;
  throw badFlag(command, `${origin}=${raw} is not a boolean (use true or false)`);
}

export function resolveSettings(
  command: string,
  defs: readonly SettingDef[],
  args: readonly string[],
  env: NodeJS.ProcessEnv,
): Settings {
  const options: Record<string, { type: 'string' | 'boolean'; short?: string; multiple?: boolean }> = {};
  for (const d of defs) {
    options[d.name] = {
      type: d.type === 'boolean' ? 'boolean' : 'string',
      ...(d.short ? { short: d.short } : {}),
      ...(d.type === 'list' ? { multiple: true } : {}),
    };
  }
  let values: Record<string, string | boolean | (string | boolean)[] | undefined>;
  try {
    ({ values } = parseArgs({ args: [...args], options, strict: true, allowPositionals: false }));
  } catch (error) {
    throw badFlag(command, (error as Error).message, error);
  }

  const resolved: Record<string, Sourced<SettingValue>> = {};
  for (const d of defs) {
    const flag = values[d.name];
    if (flag !== undefined) {
      resolved[d.name] = { value: flag as SettingValue, source: `--${d.name}` };
      continue;
    }
    const fromEnv = d.env ? env[d.env] : undefined;
    if (d.env && fromEnv !== undefined && fromEnv !== '') {
      const value: SettingValue =
        d.type === 'boolean'
          ? parseBoolean(command, fromEnv, d.env)
          : d.type === 'list'
            ? fromEnv
                .split(',')
                .map((s) => s.trim())
                .filter(Boolean)
            : fromEnv;
      resolved[d.name] = { value, source: d.env };
      continue;
    }
    if (d.default !== undefined) resolved[d.name] = { value: d.default, source: 'default' };
  }

  return {
    get: (name) => resolved[name],
    string: (name) => {
      const s = resolved[name];
      return s && typeof s.value === 'string' ? (s as Sourced<string>) : undefined;
    },
    boolean: (name) => resolved[name]?.value === true,
    list: (name) => {
      const v = resolved[name]?.value;
      return Array.isArray(v) ? v : [];
    },
    all: () => ({ ...resolved }),
  };
}

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

/** The settings that decide cluster, namespace and identity (src/kube/scope.ts). */
export const scopeSettings: readonly SettingDef[] = [
  {
    name: 'kubeconfig',
    type: 'string',
    valueName: 'file',
    description: 'kubeconfig file (else KUBECONFIG, in-cluster, ~/.kube/config)',
  },
  {
    name: 'context',
    env: 'CONFIG_SYNC_CONTEXT',
    type: 'string',
    valueName: 'name',
    description: 'kubeconfig context',
  },
  {
    name: 'namespace',
    short: 'n',
    env: 'CONFIG_SYNC_NAMESPACE',
    type: 'string',
    valueName: 'ns',
    description: 'namespace (else POD_NAMESPACE, the service-account file, the context)',
  },
  {
    name: 'service-account-dir',
    env: 'CONFIG_SYNC_SERVICE_ACCOUNT_DIR',
    type: 'string',
    valueName: 'dir',
    default: '/var/run/secrets/kubernetes.io/serviceaccount',
    description: 'where the in-cluster token, ca.crt and namespace are',
  },
];
