// Turns the agent's own Pod spec into the targets it must keep honest: every ConfigMap and Secret
// the app containers see, as files (volumes, projected volumes, subPath mounts) or as environment
// variables. Pure: the Pod is read at the edge.
import type { V1Container, V1KeyToPath, V1Pod, V1Volume } from '@kubernetes/client-node';
import { byCodeUnit } from '../kube/names.ts';

// The source kinds live with the other kind tables, in kube/ (the ground floor); re-exported
// here because targets are where most code meets them.
import type { SourceKind, SourceRef } from '../kube/resources.ts';

export type { SourceKind, SourceRef } from '../kube/resources.ts';

export interface KeyToPath {
  readonly key: string;
  readonly path: string;
  readonly mode?: number;
}

/** One ConfigMap or Secret as projected into a volume (a projected volume has several). */
export interface VolumeSource {
  readonly ref: SourceRef;
  readonly items?: readonly KeyToPath[];
  readonly optional: boolean;
  readonly defaultMode: number;
}

export interface VolumeTarget {
  readonly type: 'volume';
  readonly container: string;
  readonly volume: string;
  readonly mountPath: string;
  /** Set for a subPath mount: a plain file kubelet never updates. */
  readonly subPath?: string;
  /**
   * The mount's index in its container's volumeMounts: kubelet binds a subPath mount at
   * `volume-subpaths/<volume>/<container>/<index>` under the Pod's directory (node-pods.ts).
   */
  readonly mountIndex?: number;
  readonly sources: readonly VolumeSource[];
}

/** Environment from a ConfigMap or Secret: fixed at container start, never updated. */
export interface EnvTarget {
  readonly type: 'env';
  readonly container: string;
  readonly ref: SourceRef;
  /** The referenced keys, or `all` for envFrom. */
  readonly keys: readonly string[] | 'all';
  readonly optional: boolean;
}

export type Target = VolumeTarget | EnvTarget;

export interface DiscoverOptions {
  /** The agent's own container, never a target. */
  readonly self: string;
  /** Only these containers (--container); all but self when empty. */
  readonly containers?: readonly string[];
}

export interface Discovery {
  readonly targets: readonly Target[];
  /** Things seen but not followed, for doctor and the start-up log. */
  readonly notes: readonly string[];
}

/** kubelet's default file mode for ConfigMap, Secret and projected volumes (0644). */
export const DEFAULT_VOLUME_MODE = 0o644;

function items(list: readonly V1KeyToPath[] | undefined): { items?: KeyToPath[] } {
  if (!list || list.length === 0) return {};
  return {
    items: list.map((i) => ({ key: i.key, path: i.path, ...(i.mode === undefined ? {} : { mode: i.mode }) })),
  };
}

/**
 * The ServiceAccount admission plugin adds a projected volume `kube-api-access-<random>` to every
 * Pod: the token, the `kube-root-ca.crt` ConfigMap and the namespace. kubelet keeps it current
 * and the app never asked for it, so it is not configuration to keep honest (seen on the test
 * control plane: without this, every agent would need read access to kube-root-ca.crt).
 */
function isServiceAccountVolume(volume: V1Volume): boolean {
  return (
    volume.name.startsWith('kube-api-access-') &&
    (volume.projected?.sources ?? []).some((s) => s.serviceAccountToken !== undefined)
  );
}

/** The ConfigMap/Secret sources of a volume, or none for other volume types. */
export function volumeSources(volume: V1Volume, notes: string[]): VolumeSource[] {
  if (volume.configMap) {
    const cm = volume.configMap;
    return [
      {
        ref: { kind: 'ConfigMap', name: cm.name ?? '' },
        ...items(cm.items),
        optional: cm.optional ?? false,
        defaultMode: cm.defaultMode ?? DEFAULT_VOLUME_MODE,
      },
    ];
  }
  if (volume.secret) {
    const s = volume.secret;
    return [
      {
        ref: { kind: 'Secret', name: s.secretName ?? '' },
        ...items(s.items),
        optional: s.optional ?? false,
        defaultMode: s.defaultMode ?? DEFAULT_VOLUME_MODE,
      },
    ];
  }
  if (volume.projected && isServiceAccountVolume(volume)) {
    notes.push(
      `volume ${volume.name}: the service-account token volume the API server adds to every Pod; not a target`,
    );
    return [];
  }
  if (volume.projected) {
    const defaultMode = volume.projected.defaultMode ?? DEFAULT_VOLUME_MODE;
    const out: VolumeSource[] = [];
    for (const source of volume.projected.sources ?? []) {
      if (source.configMap) {
        out.push({
          ref: { kind: 'ConfigMap', name: source.configMap.name ?? '' },
          ...items(source.configMap.items),
          optional: source.configMap.optional ?? false,
          defaultMode,
        });
      } else if (source.secret) {
        out.push({
          ref: { kind: 'Secret', name: source.secret.name ?? '' },
          ...items(source.secret.items),
          optional: source.secret.optional ?? false,
          defaultMode,
        });
      }
    }
    if (out.length === 0) notes.push(`volume ${volume.name}: projected, with no ConfigMap or Secret source`);
    return out;
  }
  return [];
}

function envTargets(container: V1Container): EnvTarget[] {
  const out: EnvTarget[] = [];
  const add = (
    kind: SourceKind,
    name: string | undefined,
    key: string | 'all',
    optional: boolean | undefined,
  ) => {
    if (!name) return;
    const existing = out.find((t) => t.ref.kind === kind && t.ref.name === name);
    if (existing && existing.keys !== 'all' && key !== 'all') {
      (existing.keys as string[]).push(key);
      return;
    }
    if (existing && key === 'all') {
      out.splice(out.indexOf(existing), 1, { ...existing, keys: 'all' });
      return;
    }
    if (existing) return;
    out.push({
      type: 'env',
      container: container.name,
      ref: { kind, name },
      keys: key === 'all' ? 'all' : [key],
      optional: optional ?? false,
    });
  };
  for (const env of container.env ?? []) {
    const cm = env.valueFrom?.configMapKeyRef;
    if (cm) add('ConfigMap', cm.name, cm.key, cm.optional);
    const s = env.valueFrom?.secretKeyRef;
    if (s) add('Secret', s.name, s.key, s.optional);
  }
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) add('ConfigMap', from.configMapRef.name, 'all', from.configMapRef.optional);
    if (from.secretRef) add('Secret', from.secretRef.name, 'all', from.secretRef.optional);
  }
  return out;
}

/**
 * Steps:
 *  (1) the served containers: regular containers and native sidecars (init containers with
 *      restartPolicy Always), minus the agent itself, narrowed by --container;
 *  (2) for each volumeMount of a ConfigMap, Secret or projected volume, a volume target (a
 *      subPath mount keeps its subPath; subPathExpr cannot be resolved here and is noted);
 *  (3) for each env/envFrom reference, an env target.
 */
export function discoverTargets(pod: V1Pod, options: DiscoverOptions): Discovery {
  const notes: string[] = [];
  const spec = pod.spec;
  if (!spec) return { targets: [], notes: ['the Pod has no spec'] };
  // (1)
  const sidecars = (spec.initContainers ?? []).filter((c) => c.restartPolicy === 'Always');
  const served = [...spec.containers, ...sidecars].filter(
    (c) => c.name !== options.self && (!options.containers?.length || options.containers.includes(c.name)),
  );
  for (const wanted of options.containers ?? []) {
    if (!served.some((c) => c.name === wanted))
      notes.push(`container ${wanted} (from --container) is not in the Pod`);
  }
  const volumes = new Map((spec.volumes ?? []).map((v) => [v.name, v]));
  const targets: Target[] = [];
  for (const container of served) {
    // (2)
    for (const [mountIndex, mount] of (container.volumeMounts ?? []).entries()) {
      const volume = volumes.get(mount.name);
      if (!volume) continue;
      const sources = volumeSources(volume, notes);
      if (sources.length === 0) continue;
      if (mount.subPathExpr) {
        notes.push(
          `${container.name}: ${mount.mountPath} uses subPathExpr, which the agent cannot expand; not checked`,
        );
        continue;
      }
      targets.push({
        type: 'volume',
        container: container.name,
        volume: volume.name,
        mountPath: mount.mountPath,
        ...(mount.subPath ? { subPath: mount.subPath, mountIndex } : {}),
        sources,
      });
    }
    // (3)
    targets.push(...envTargets(container));
  }
  return { targets, notes };
}

/** Every distinct ConfigMap and Secret the targets reference, sorted. */
/** The ConfigMaps and Secrets one target reads. */
export function targetSources(target: Target): SourceRef[] {
  return target.type === 'volume' ? target.sources.map((s) => s.ref) : [target.ref];
}

export function referencedSources(targets: readonly Target[]): SourceRef[] {
  const seen = new Map<string, SourceRef>();
  for (const t of targets) {
    for (const ref of targetSources(t)) seen.set(`${ref.kind}/${ref.name}`, ref);
  }
  return [...seen.values()].sort((a, b) => byCodeUnit(`${a.kind}/${a.name}`, `${b.kind}/${b.name}`));
}
