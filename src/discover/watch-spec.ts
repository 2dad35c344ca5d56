// Targets given by hand (`--watch`), for use outside a pod and in tests:
//   configmap/app-config                 (doctor: which objects to check access for)
//   /etc/app=configmap/app-config        (agent: a mount directory and its source)
//   /etc/app/app.yaml=secret/db          (a subPath-style single file)
import { ConfigSyncError } from '../errors.ts';
import { isObjectName } from '../kube/names.ts';
import type { SourceRef } from './targets.ts';

export interface WatchSpec {
  readonly path?: string;
  readonly ref: SourceRef;
}

const KINDS: Record<string, SourceRef['kind']> = {
  configmap: 'ConfigMap',
  cm: 'ConfigMap',
  secret: 'Secret',
};

export function parseWatchSpec(raw: string, origin = '--watch'): WatchSpec {
  const eq = raw.lastIndexOf('=');
  const path = eq >= 0 ? raw.slice(0, eq) : undefined;
  const object = eq >= 0 ? raw.slice(eq + 1) : raw;
  const [kindWord = '', name = '', ...rest] = object.split('/');
  const kind = KINDS[kindWord.toLowerCase()];
  const fail = (why: string) =>
    new ConfigSyncError('CS_USAGE_BAD_WATCH', `${origin} ${raw}: ${why}`, {
      hint: 'write [PATH=]configmap/NAME or [PATH=]secret/NAME, e.g. --watch /etc/app=configmap/app-config',
      details: { value: raw },
    });
  if (!kind) throw fail(`"${kindWord}" is not configmap or secret`);
  if (rest.length > 0 || !isObjectName(name)) throw fail(`"${name}" is not a valid object name`);
  if (path !== undefined && !path.startsWith('/')) throw fail(`the path "${path}" must be absolute`);
  return { ...(path ? { path } : {}), ref: { kind, name } };
}
