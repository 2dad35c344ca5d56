import { parseArgs } from 'node:util';
import { parse as parseYaml } from 'yaml';
import { badFlag, ConfigSyncError } from '../errors.ts';
import { FILE_LIMITS, readRegularFile } from '../kube/regular-file.ts';
import type { Sourced } from '../kube/scope.ts';
import { DEFAULT_SERVICE_ACCOUNT_DIR, type ScopeFlags } from '../kube/scope-facts.ts';

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
    ({ values } = parseArgs({
      args: joinDashValues(args, defs),
      options,
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw badFlag(command, (error as Error).message, error);
  }

  const file = loadConfigFile(command, defs, (values.config as string | undefined) ?? env.CONFIG_SYNC_CONFIG);
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
    const fromFile = file?.values[d.name];
    if (file && fromFile !== undefined) {
      resolved[d.name] = { value: fromFile, source: `config file ${file.path}` };
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

/**
 * `--grace -5s` -> `--grace=-5s`. parseArgs takes a value that starts with a dash for a flag of
 * its own and answers "argument is ambiguous"; joined, the value reaches the setting's own
 * check, which says what is wrong with it. A following word that is one of the command's flags
 * is left alone, so a forgotten value is still reported as missing.
 */
function joinDashValues(args: readonly string[], defs: readonly SettingDef[]): string[] {
  const takesValue = new Set(defs.filter((d) => d.type !== 'boolean').map((d) => `--${d.name}`));
  const flags = new Set(defs.flatMap((d) => [`--${d.name}`, ...(d.short ? [`-${d.short}`] : [])]));
  const out: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i] as string;
    const next = args[i + 1];
    const nextFlag = next?.split('=')[0] ?? '';
    if (
      takesValue.has(arg) &&
      next?.startsWith('-') &&
      next !== '-' &&
      !flags.has(nextFlag) &&
      next !== '--'
    ) {
      out.push(`${arg}=${next}`);
      i++;
    } else out.push(arg);
  }
  return out;
}

/**
 * The optional config file (`--config`, CONFIG_SYNC_CONFIG): YAML or JSON, a map from setting
 * name (the long flag without dashes) to its value. An unreadable file, an unknown name or a
 * value of the wrong type is an error that names the file and the key: a setting that silently
 * does nothing is worse than none.
 */
function loadConfigFile(
  command: string,
  defs: readonly SettingDef[],
  file: string | undefined,
): { path: string; values: Record<string, SettingValue> } | undefined {
  if (!file || !defs.some((d) => d.name === 'config')) return undefined;
  const fail = (what: string, cause?: unknown) =>
    new ConfigSyncError('CS_CONFIG_FILE', `config file ${file}: ${what}`, {
      hint: 'write a YAML map of setting names to values, e.g. "grace: 2m" (names as the long flags, without dashes)',
      details: { path: file },
      cause,
    });
  let raw: unknown;
  try {
    raw = parseYaml(readRegularFile(file, FILE_LIMITS.config).toString('utf8'));
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    throw fail(e.code === 'ENOENT' ? 'no such file' : e.message, error);
  }
  if (raw === null || raw === undefined) return { path: file, values: {} };
  if (typeof raw !== 'object' || Array.isArray(raw)) throw fail('is not a map of settings');
  const values: Record<string, SettingValue> = {};
  for (const [key, value] of Object.entries(raw as Record<string, unknown>)) {
    const def = defs.find((d) => d.name === key);
    if (!def || key === 'config') {
      throw fail(
        `unknown setting "${key}" for ${command} (known: ${defs
          .map((d) => d.name)
          .filter((n) => n !== 'config')
          .join(', ')})`,
      );
    }
    if (def.type === 'boolean' && typeof value === 'boolean') values[key] = value;
    else if (def.type === 'list' && Array.isArray(value) && value.every((v) => typeof v === 'string'))
      values[key] = value;
    else if (def.type === 'string' && (typeof value === 'string' || typeof value === 'number'))
      values[key] = String(value);
    else throw fail(`"${key}" must be ${def.type === 'list' ? 'a list of strings' : `a ${def.type}`}`);
  }
  return { path: file, values };
}

/** A setting the command defines with a default: its value (a missing one is a bug in the definitions). */
export function defaulted(settings: Settings, name: string): Sourced<string> {
  const setting = settings.string(name);
  if (!setting) throw new Error(`setting ${name} has no value and no default`);
  return setting;
}

/** The `--config` setting, for commands that read a config file. */
export const configFileSetting: SettingDef = {
  name: 'config',
  env: 'CONFIG_SYNC_CONFIG',
  type: 'string',
  valueName: 'file',
  description: 'a YAML file of settings (flag > environment > this file > default)',
};

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
    default: DEFAULT_SERVICE_ACCOUNT_DIR,
    description: 'where the in-cluster token, ca.crt and namespace are',
  },
];

/** The settings that name the agent's Pod and what in it to serve (agent, check, heal, doctor). */
export const podSettings: readonly SettingDef[] = [
  {
    name: 'pod',
    env: 'POD_NAME',
    type: 'string',
    valueName: 'name',
    description: 'its own Pod (downward API), whose mounts are the targets',
  },
  {
    name: 'container',
    env: 'CONFIG_SYNC_CONTAINERS',
    type: 'list',
    valueName: 'name',
    description: 'only these app containers (repeatable; default all but the agent)',
  },
  {
    name: 'self-container',
    env: 'CONFIG_SYNC_SELF_CONTAINER',
    type: 'string',
    valueName: 'name',
    default: 'config-sync',
    description: "the agent's own container, never a target",
  },
  {
    name: 'watch',
    env: 'CONFIG_SYNC_WATCH',
    type: 'list',
    valueName: 'PATH=kind/NAME',
    description: 'an explicit target, e.g. /etc/app=configmap/app-config (repeatable)',
  },
];

export const outputSetting: SettingDef = {
  name: 'output',
  short: 'o',
  type: 'string',
  valueName: 'text|json',
  default: 'text',
  description: 'output format',
};

/** The scope-related settings as src/kube/scope-facts.ts takes them. */
export function scopeFlags(settings: Settings): ScopeFlags {
  return {
    kubeconfig: settings.string('kubeconfig'),
    context: settings.string('context'),
    namespace: settings.string('namespace'),
    serviceAccountDir: settings.string('service-account-dir')?.value,
  };
}
