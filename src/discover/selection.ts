// Which of a Pod's targets are checked, as its workload's annotations say (the sidecar and the
// node agent alike; config/pod-annotations.ts reads them): volumes, ConfigMaps and Secrets it
// names are left out, and so are Secrets read as environment variables where it says so. Pure.
// Every target left out is named, with the annotation that left it out, for doctor, `heal
// --dry-run` and the agent's start-up log.
import { POD_SETTING } from '../kube/annotations.ts';
import { type EnvTarget, type Target, targetSources } from './targets.ts';

/** One entry of config-sync.io/ignore: a volume of the Pod, or a ConfigMap or Secret by name. */
export interface IgnoreEntry {
  readonly kind: 'volume' | 'ConfigMap' | 'Secret';
  readonly name: string;
}

export interface TargetSelection {
  readonly ignore: readonly IgnoreEntry[];
  /** A Secret read as environment variables: checked (restart, the default) or not (ignore). */
  readonly secretEnv: 'restart' | 'ignore';
}

/** Every target checked, as the agent's flags alone select them. */
export const SELECT_ALL: TargetSelection = { ignore: [], secretEnv: 'restart' };

export interface Selected {
  readonly targets: readonly Target[];
  /** A line for each target left out, naming the annotation that left it out. */
  readonly excluded: readonly string[];
  /** Ignore entries that name nothing the served containers read: a typo, most likely. */
  readonly unmatched: readonly string[];
}

/** How an entry is written in the annotation: `volume/cache`, `configmap/flags`, `secret/tls`. */
export function ignoreEntryText(entry: IgnoreEntry): string {
  return `${entry.kind.toLowerCase()}/${entry.name}`;
}

function where(target: Target): string {
  return target.type === 'volume'
    ? `container ${target.container}: volume ${target.volume} at ${target.mountPath}`
    : `container ${target.container}: env from ${target.ref.kind} ${target.ref.name}`;
}

/**
 * Steps, per target:
 *  (1) a volume the annotation names by its volume name: left out;
 *  (2) a target that reads a ConfigMap or Secret the annotation names: left out whole. A
 *      projected volume that merges a named source with others is left out too: its files are
 *      one directory under one `..data`, and checking the others' files alone would see the
 *      named source's files as unexpected;
 *  (3) environment variables from a Secret, where secret-env is `ignore`: left out;
 * then (4) the entries that matched no target are returned, to be told.
 */
export function selectTargets(targets: readonly Target[], selection: TargetSelection): Selected {
  const kept: Target[] = [];
  const excluded: string[] = [];
  const used = new Set<IgnoreEntry>();
  const named = (kind: IgnoreEntry['kind'], name: string) =>
    selection.ignore.find((e) => e.kind === kind && e.name === name);
  for (const target of targets) {
    // (1)
    const volume = target.type === 'volume' ? named('volume', target.volume) : undefined;
    if (volume) {
      used.add(volume);
      excluded.push(`${where(target)}: not checked, ${POD_SETTING.ignore} names ${ignoreEntryText(volume)}`);
      continue;
    }
    // (2)
    const sources = targetSources(target)
      .map((ref) => named(ref.kind, ref.name))
      .filter((e): e is IgnoreEntry => e !== undefined);
    if (sources.length > 0) {
      for (const e of sources) used.add(e);
      const names = sources.map(ignoreEntryText).join(', ');
      const whole =
        target.type === 'volume' && target.sources.length > sources.length
          ? ' (the volume projects other sources too; a volume is checked whole or not at all)'
          : '';
      excluded.push(`${where(target)}: not checked, ${POD_SETTING.ignore} names ${names}${whole}`);
      continue;
    }
    // (3)
    if (isSecretEnv(target) && selection.secretEnv === 'ignore') {
      excluded.push(`${where(target)}: not checked, ${POD_SETTING.secretEnv} is ignore`);
      continue;
    }
    kept.push(target);
  }
  // (4)
  const unmatched = selection.ignore
    .filter((e) => !used.has(e))
    .map(
      (e) =>
        `${POD_SETTING.ignore} names ${ignoreEntryText(e)}, which no checked container ${e.kind === 'volume' ? 'mounts' : 'reads'}: check the name`,
    );
  return { targets: kept, excluded, unmatched };
}

function isSecretEnv(target: Target): target is EnvTarget {
  return target.type === 'env' && target.ref.kind === 'Secret';
}
