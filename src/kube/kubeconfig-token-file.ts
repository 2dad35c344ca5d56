// A kubeconfig user's `tokenFile`: the key kubectl reads (client-go's AuthInfo.TokenFile), which
// client-node drops when it parses a kubeconfig (it knows only a `token-file` spelling), so a
// user with nothing but a tokenFile looked like a user with no credentials. Read from the raw
// file here, resolved against the kubeconfig's directory as kubectl resolves relative paths.
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';

/** User name -> absolute tokenFile path, for the users of one kubeconfig file that set one. */
export function tokenFiles(kubeconfigFile: string): Map<string, string> {
  const out = new Map<string, string>();
  let raw: unknown;
  try {
    raw = parseYaml(fs.readFileSync(kubeconfigFile, 'utf8'));
  } catch {
    return out;
  }
  const users = (raw as { users?: unknown } | null)?.users;
  if (!Array.isArray(users)) return out;
  for (const entry of users) {
    const name = (entry as { name?: unknown } | null)?.name;
    const file = (entry as { user?: { tokenFile?: unknown } } | null)?.user?.tokenFile;
    if (typeof name === 'string' && typeof file === 'string' && file !== '' && !out.has(name)) {
      out.set(name, path.resolve(path.dirname(kubeconfigFile), file));
    }
  }
  return out;
}
