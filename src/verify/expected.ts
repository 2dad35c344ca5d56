// What a target should look like on disk, computed from the API's view of its sources with
// kubelet's projection rules (pkg/volume/configmap, secret, projected MakePayload): every key at
// its own path, or only `items` at their paths; a missing item key fails the mount unless the
// source is optional; projected sources merge in order, a later one winning at the same path.
// Pure, and on digests only.
import { createHash } from 'node:crypto';
import type { EnvTarget, SourceRef, VolumeTarget } from '../discover/targets.ts';
import { byCodeUnit } from '../kube/names.ts';
import { type KeyDigest, refKey, type SourceState } from './source.ts';

export interface ExpectedFile {
  readonly digest: KeyDigest;
  readonly mode: number;
  readonly source: SourceRef;
  readonly key: string;
}

/** Why the expected content cannot be known, or would not even mount. */
export type SourceProblem =
  | { readonly type: 'source-missing'; readonly ref: SourceRef }
  | { readonly type: 'key-missing'; readonly ref: SourceRef; readonly key: string }
  | { readonly type: 'unreadable'; readonly ref: SourceRef; readonly reason: string };

export interface Expectation {
  /** Relative path in the volume (or '' for a subPath file) -> what should be there. */
  readonly files: ReadonlyMap<string, ExpectedFile>;
  readonly problems: readonly SourceProblem[];
  /** Newest change time among the sources, for the grace window. */
  readonly changedAt: number | undefined;
  /** Every source never updated since its creation (source.ts): no older version exists. */
  readonly neverChanged?: boolean;
  /** An immutable source: kubelet stops watching it, so it will never propagate a change. */
  readonly immutable: boolean;
}

export type SourceLookup = (ref: SourceRef) => SourceState | undefined;

/**
 * Steps, per source in the volume's order:
 *  (1) unreadable -> a problem (the verdict will be Unknown);
 *  (2) absent -> nothing if optional (kubelet empties it), else source-missing;
 *  (3) present -> each key (or each listed item) at its path and mode, later sources winning;
 *      a listed key that is not there -> nothing if optional, else key-missing.
 * A subPath target then keeps only the file at its subPath.
 */
export function expectVolume(target: VolumeTarget, lookup: SourceLookup): Expectation {
  const files = new Map<string, ExpectedFile>();
  const problems: SourceProblem[] = [];
  let changedAt: number | undefined;
  let immutable = false;
  let neverChanged = true;
  for (const source of target.sources) {
    const state = lookup(source.ref);
    // (1)
    if (!state || state.state === 'unreadable') {
      problems.push({
        type: 'unreadable',
        ref: source.ref,
        reason: state?.state === 'unreadable' ? state.reason : 'not read yet',
      });
      continue;
    }
    // (2)
    if (state.state === 'absent') {
      if (!source.optional) problems.push({ type: 'source-missing', ref: source.ref });
      continue;
    }
    // (3)
    const snap = state.snapshot;
    if (snap.changedAt !== undefined && (changedAt === undefined || snap.changedAt > changedAt))
      changedAt = snap.changedAt;
    immutable ||= snap.immutable;
    neverChanged &&= snap.neverChanged === true;
    const entries = source.items ?? [...snap.keys.keys()].map((key) => ({ key, path: key }));
    for (const item of entries) {
      const digest = snap.keys.get(item.key);
      if (!digest) {
        if (!source.optional) problems.push({ type: 'key-missing', ref: source.ref, key: item.key });
        continue;
      }
      const mode = ('mode' in item && item.mode !== undefined ? item.mode : undefined) ?? source.defaultMode;
      files.set(item.path, { digest, mode, source: source.ref, key: item.key });
    }
  }
  if (target.subPath !== undefined) {
    const file = files.get(target.subPath);
    return { files: new Map(file ? [['', file]] : []), problems, changedAt, immutable, neverChanged };
  }
  return { files, problems, changedAt, immutable, neverChanged };
}

/** The keys an env target reads, with their digests now; problems as for volumes. */
export function expectEnv(
  target: EnvTarget,
  lookup: SourceLookup,
): { digest: string | undefined; expectation: Expectation } {
  const state = lookup(target.ref);
  const problems: SourceProblem[] = [];
  if (!state || state.state === 'unreadable') {
    problems.push({
      type: 'unreadable',
      ref: target.ref,
      reason: state?.state === 'unreadable' ? state.reason : 'not read yet',
    });
    return {
      digest: undefined,
      expectation: { files: new Map(), problems, changedAt: undefined, immutable: false },
    };
  }
  if (state.state === 'absent') {
    if (!target.optional) problems.push({ type: 'source-missing', ref: target.ref });
    return {
      digest: undefined,
      expectation: { files: new Map(), problems, changedAt: undefined, immutable: false },
    };
  }
  const snap = state.snapshot;
  const keys = target.keys === 'all' ? [...snap.keys.keys()].sort() : [...target.keys].sort();
  const parts: string[] = [];
  for (const key of keys) {
    const d = snap.keys.get(key);
    if (!d) {
      if (!target.optional) problems.push({ type: 'key-missing', ref: target.ref, key });
      continue;
    }
    parts.push(`${key}=${d.sha256}`);
  }
  return {
    digest: combinedDigest(parts),
    expectation: {
      files: new Map(),
      problems,
      changedAt: snap.changedAt,
      immutable: snap.immutable,
      neverChanged: snap.neverChanged === true,
    },
  };
}

/** One short digest over ordered parts (env digests before they are keyed, the config version). */
export function combinedDigest(parts: readonly string[]): string {
  // 16 hex characters are plenty to tell versions apart, and the value stays opaque: it is a
  // digest of digests, never of a value.
  return createHash('sha256').update(parts.join('\n')).digest('hex').slice(0, 16);
}

/** The sources in one order for every process, whatever the order given (both digests below). */
function inRefOrder(refs: readonly SourceRef[]): SourceRef[] {
  return [...refs].sort((a, b) => byCodeUnit(refKey(a), refKey(b)));
}

/**
 * Which versions of the sources a restart applies: the `config-sync.io/config-hash` on the pod
 * template, in Events, logs and `heal` output. Made from each source's uid and resourceVersion,
 * never from its content: the template is readable by anyone who can read the workload, and
 * a digest of a Secret's bytes there would let them test guesses of its value. Every replica
 * sees the same versions, so they agree on it (dedupe), and a Pod created by the restart carries
 * it (circuit).
 */
export function configVersion(lookup: SourceLookup, refs: readonly SourceRef[]): string {
  const parts = inRefOrder(refs).map((ref) => {
    const state = lookup(ref);
    return state?.state === 'present'
      ? `${refKey(ref)}:${state.snapshot.uid}:${state.snapshot.resourceVersion}`
      : `${refKey(ref)}:${state?.state ?? 'unknown'}`;
  });
  return combinedDigest(parts);
}

/**
 * The digest of everything the targets expect, by content. Internal only (reload mode: has the
 * config the app loaded changed?), since it is a digest of values; what is shown is
 * configVersion.
 */
export function configHash(lookup: SourceLookup, refs: readonly SourceRef[]): string {
  const parts: string[] = [];
  for (const ref of inRefOrder(refs)) {
    const state = lookup(ref);
    if (state?.state !== 'present') {
      parts.push(`${refKey(ref)}:${state?.state ?? 'unknown'}`);
      continue;
    }
    for (const [key, d] of [...state.snapshot.keys].sort(([a], [b]) => byCodeUnit(a, b))) {
      parts.push(`${refKey(ref)}:${key}=${d.sha256}`);
    }
  }
  return combinedDigest(parts);
}
