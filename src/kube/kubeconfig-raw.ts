import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { FILE_LIMITS, readRegularFile } from './regular-file.ts';

/** The extension name client-go reserves for an exec plugin's per-cluster settings. */
export const EXEC_EXTENSION = 'client.authentication.k8s.io/exec';

/** One kubeconfig file's users and clusters, by name, as written (the first entry of a name). */
export interface RawKubeconfig {
  readonly users: ReadonlyMap<string, unknown>;
  readonly clusters: ReadonlyMap<string, unknown>;
}

/**
 * The named lists of one kubeconfig's text. Text that is not YAML, or lists that are not lists,
 * read as empty: client-node has parsed and validated the same file before this is asked.
 */
export function parseRawKubeconfig(text: string): RawKubeconfig {
  let raw: unknown;
  try {
    raw = parseYaml(text);
  } catch {
    raw = undefined;
  }
  const named = (list: unknown, key: 'user' | 'cluster') => {
    const out = new Map<string, unknown>();
    if (!Array.isArray(list)) return out;
    for (const entry of list) {
      const name = (entry as { name?: unknown } | null)?.name;
      if (typeof name === 'string' && !out.has(name)) out.set(name, (entry as Record<string, unknown>)[key]);
    }
    return out;
  };
  const doc = (raw ?? {}) as { users?: unknown; clusters?: unknown };
  return { users: named(doc.users, 'user'), clusters: named(doc.clusters, 'cluster') };
}

function readRawKubeconfig(file: string): RawKubeconfig {
  let text = '';
  try {
    text = readRegularFile(file, FILE_LIMITS.config).toString('utf8');
  } catch {
    // client-node read it a moment ago; a file gone since has nothing to add
  }
  return parseRawKubeconfig(text);
}

/** The tokenFile of `user`, an entry of `kubeconfigFile`, resolved against its directory, if it sets one. */
function tokenFileOfUser(kubeconfigFile: string, user: unknown): string | undefined {
  const file = (user as { tokenFile?: unknown } | null | undefined)?.tokenFile;
  return typeof file === 'string' && file !== ''
    ? path.resolve(path.dirname(kubeconfigFile), file)
    : undefined;
}

/** User name -> absolute tokenFile path, for the users of one kubeconfig file that set one. */
export function tokenFiles(kubeconfigFile: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const [name, user] of readRawKubeconfig(kubeconfigFile).users) {
    const file = tokenFileOfUser(kubeconfigFile, user);
    if (file !== undefined) out.set(name, file);
  }
  return out;
}

/** The first file of `files` that defines `name` in its `kind` list, and that entry. */
function firstDefinition(
  files: readonly string[],
  kind: keyof RawKubeconfig,
  name: string,
): { file: string; entry: unknown } | undefined {
  for (const file of files) {
    const entries = readRawKubeconfig(file)[kind];
    if (entries.has(name)) return { file, entry: entries.get(name) };
  }
  return undefined;
}

/** The tokenFile of `user`, absolute, from the first file that defines that user, if it sets one. */
export function tokenFileOf(files: readonly string[], user: string): string | undefined {
  const found = firstDefinition(files, 'users', user);
  return found && tokenFileOfUser(found.file, found.entry);
}

/**
 * A cluster's exec extension as written: the `extension` value of its `extensions` entry named
 * EXEC_EXTENSION (any YAML value; client-go passes it on as JSON without looking inside).
 */
export function execExtensionOfCluster(cluster: unknown): unknown {
  const extensions = (cluster as { extensions?: unknown } | null | undefined)?.extensions;
  if (!Array.isArray(extensions)) return undefined;
  const entry = extensions.find((e) => (e as { name?: unknown } | null)?.name === EXEC_EXTENSION) as
    | { extension?: unknown }
    | undefined;
  return entry?.extension ?? undefined;
}

/** The exec extension of `cluster` in the first file that defines that cluster, if it has one. */
export function execExtensionOf(files: readonly string[], cluster: string): unknown {
  return execExtensionOfCluster(firstDefinition(files, 'clusters', cluster)?.entry);
}
