// Decides, for one target, whether what is on disk (or in the container's environment) matches
// what the API says, and if not, whether that is still normal propagation or drift. Pure: the
// caller passes the expectation, the observation, the target's memory and the clock.

import { createHash } from 'node:crypto';
import type { Target } from '../discover/targets.ts';
import type { ContainerView } from './container-view.ts';
import type { Expectation } from './expected.ts';
import type { Fingerprint } from './fingerprint.ts';
import { type KeyDigest, refKey } from './source.ts';

export type VerdictState = 'InSync' | 'Propagating' | 'Drifted' | 'Missing' | 'Unknown';

/** Closed set: used as Event reasons, log fields and metric label values. */
export type VerdictReason =
  | 'InSync'
  | 'Propagating'
  | 'ContentDrift'
  | 'FileMissing'
  | 'SubPathStale'
  | 'EnvStale'
  | 'ImmutableStale'
  | 'SourceMissing'
  | 'ApiUnreadable'
  | 'FilesUnreadable'
  | 'ReloadFailed';

export interface Mismatch {
  readonly path: string;
  readonly kind: 'content' | 'missing' | 'unexpected';
  /** Keyed fingerprints only (src/verify/fingerprint.ts). */
  readonly expected?: string;
  readonly observed?: string;
}

export interface Verdict {
  readonly target: string;
  readonly state: VerdictState;
  readonly reason: VerdictReason;
  readonly message: string;
  readonly mismatches: readonly Mismatch[];
  /** When the current mismatch window started (the last API change, or the first sighting). */
  readonly since?: number;
  /** When it stops being Propagating: the caller re-checks then. */
  readonly deadline?: number;
  /**
   * Set on the pass that saw a change to a volume's files land: API change -> files on disk
   * (step 3).
   */
  readonly propagationSeconds?: number;
}

/** What one target remembers between passes. */
export interface TargetMemory {
  readonly mismatchSince?: number;
  readonly lastState?: VerdictState;
  /** For a volume kubelet updates: the content it last matched, and the API change it came with. */
  readonly synced?: { readonly changedAt: number | undefined; readonly content: string };
}

/** The two windows of the verdict, as the settings give them (config/agent-config.ts). */
export interface VerifyWindows {
  /** How long kubelet may take to propagate a change to a volume (default 90 s). */
  readonly graceMs: number;
  /** How long to wait before calling a never-updated target (subPath, env, immutable) drifted. */
  readonly debounceMs: number;
  /**
   * How much longer this agent waits past either window (heal/spread.ts): sibling replicas then
   * decide one after another, not all at once. Not part of the window the messages name.
   */
  readonly spreadMs?: number;
}

export interface VerifyPolicy extends VerifyWindows {
  /** How a digest is shown in a mismatch: keyed, never a plain sha256 prefix. */
  readonly fingerprint: Fingerprint;
}

/** A volume as read from disk: per expected path its digest or `missing`, and unexpected extras. */
export interface VolumeObservation {
  readonly files: ReadonlyMap<string, KeyDigest | 'missing'>;
  readonly extras: readonly string[];
  readonly error?: string;
}

/** An env target: the digest the container started with (its baseline). */
export interface EnvObservation {
  readonly baseline: string | undefined;
}

/** What the app container holds, for a target kubelet never updates (a subPath file, env vars). */
export interface AppHolds {
  /** Whether the agent's copy stands for the app's, or the app's start decides (container-view.ts). */
  readonly view: ContainerView;
  /**
   * The keyed fingerprint recorded for the app container's current start (start-baselines.ts):
   * where there is one, it is what the app holds, whatever the view says.
   */
  readonly baseline?: string;
}

/** A whole volume of a mutable source: what kubelet propagates, so what a propagation time is of. */
function kubeletUpdates(target: Target, expectation: Expectation): boolean {
  return target.type === 'volume' && target.subPath === undefined && !expectation.immutable;
}

/** The expected files as one digest: paths, contents and modes. Computed once per API change. */
function contentKey(expectation: Expectation): string {
  const hash = createHash('sha256');
  for (const [path, file] of expectation.files) hash.update(`${path}\0${file.digest.sha256}\0${file.mode}\n`);
  return hash.digest('hex');
}

export function targetId(target: Target): string {
  return target.type === 'volume'
    ? `${target.container}:${target.mountPath}`
    : `${target.container}:env:${refKey(target.ref)}`;
}

export function compareVolume(
  expectation: Expectation,
  observed: VolumeObservation,
  fingerprint: Fingerprint,
): Mismatch[] {
  const mismatches: Mismatch[] = [];
  for (const [path, want] of expectation.files) {
    const got = observed.files.get(path) ?? 'missing';
    if (got === 'missing') {
      mismatches.push({ path, kind: 'missing', expected: fingerprint(want.digest.sha256) });
    } else if (got.sha256 !== want.digest.sha256) {
      mismatches.push({
        path,
        kind: 'content',
        expected: fingerprint(want.digest.sha256),
        observed: fingerprint(got.sha256),
      });
    }
  }
  for (const extra of observed.extras) mismatches.push({ path: extra, kind: 'unexpected' });
  return mismatches;
}

/**
 * Steps:
 *  (1) sources the API could not give -> Unknown; a source (or listed key) that is gone ->
 *      Missing/SourceMissing: new pods could not even mount it, so this is for alerting only;
 *  (2) files that could not be read -> Unknown; (2b) for a subPath file or env vars: a baseline
 *      recorded for the app container's current start (start-baselines.ts) is what the app
 *      holds, compared with the API's; without one, when the app's container and the agent's did
 *      not start together, the app's start decides (container-view.ts): it started after the
 *      current version -> no mismatch; it started before it while the agent started after it ->
 *      a mismatch, whatever the agent's copy says;
 *  (3) no mismatch -> InSync; the propagation time is measured from the API change when the
 *      previous pass saw it Propagating, or, for a volume kubelet updates, when the files now
 *      match content other than they last matched: the files and the API's event may both
 *      arrive before a pass, and a propagation no pass saw pending is a propagation still;
 *  (4) a mismatch: its window starts at the last API change (so an agent that starts late, or a
 *      one-shot command, still knows how long kubelet has had), else at the first sighting;
 *  (5) the window is the grace period for a volume kubelet updates, the short debounce for what
 *      kubelet never updates (a subPath file, environment variables, an immutable source); the
 *      agent's spread (heal/spread.ts) is added to either;
 *  (6) inside the window -> Propagating; past it -> Drifted (Missing/FileMissing when every
 *      mismatch is a missing file).
 */
export function decide(
  target: Target,
  expectation: Expectation,
  observation: VolumeObservation | EnvObservation,
  memory: TargetMemory,
  now: number,
  policy: VerifyPolicy,
  envDigest?: string,
  app: AppHolds = { view: 'agent-copy' },
): { verdict: Verdict; memory: TargetMemory } {
  const id = targetId(target);
  const done = (v: Omit<Verdict, 'target'>, mismatchSince?: number, synced = memory.synced) => ({
    verdict: { target: id, ...v },
    memory: {
      lastState: v.state,
      ...(mismatchSince === undefined ? {} : { mismatchSince }),
      ...(synced === undefined ? {} : { synced }),
    },
  });

  // (1)
  const unreadable = expectation.problems.find((p) => p.type === 'unreadable');
  if (unreadable) {
    return done({
      state: 'Unknown',
      reason: 'ApiUnreadable',
      message: `${refKey(unreadable.ref)} could not be read from the API (${unreadable.type === 'unreadable' ? unreadable.reason : ''})`,
      mismatches: [],
    });
  }
  const gone = expectation.problems.find((p) => p.type === 'source-missing' || p.type === 'key-missing');
  if (gone) {
    const what = gone.type === 'key-missing' ? `key ${gone.key} of ${refKey(gone.ref)}` : refKey(gone.ref);
    return done({
      state: 'Missing',
      reason: 'SourceMissing',
      message: `${what} is gone from the API; the files keep their last content and new pods could not mount it`,
      mismatches: [],
    });
  }

  // (2)
  let mismatches: Mismatch[];
  if ('baseline' in observation) {
    mismatches =
      observation.baseline === undefined || observation.baseline === envDigest
        ? []
        : [{ path: 'env', kind: 'content', expected: envDigest ?? '-', observed: observation.baseline }];
  } else {
    if (observation.error) {
      return done({
        state: 'Unknown',
        reason: 'FilesUnreadable',
        message: observation.error,
        mismatches: [],
      });
    }
    mismatches = compareVolume(expectation, observation, policy.fingerprint);
  }

  // (2b) For what kubelet never updates, what the app container got at its current start
  // decides: its recorded baseline, else its start against the agent's (container-view.ts).
  if (target.type === 'env' || target.subPath !== undefined) {
    const sha = target.type === 'env' ? undefined : [...expectation.files.values()][0]?.digest.sha256;
    const want = target.type === 'env' ? envDigest : sha === undefined ? undefined : policy.fingerprint(sha);
    const stale = (observed: string): Mismatch[] => [
      { path: target.type === 'env' ? 'env' : '', kind: 'content', expected: want ?? '-', observed },
    ];
    if (app.baseline !== undefined) mismatches = app.baseline === want ? [] : stale(app.baseline);
    else if (app.view === 'current') mismatches = [];
    else if (app.view === 'older' && mismatches.length === 0)
      mismatches = stale('a version from before the app container started');
  }

  // (3)
  if (mismatches.length === 0) {
    let synced = memory.synced;
    let landed = memory.lastState === 'Propagating';
    if (kubeletUpdates(target, expectation) && synced?.changedAt !== expectation.changedAt) {
      const content = contentKey(expectation);
      landed ||= synced !== undefined && synced.content !== content;
      synced = { changedAt: expectation.changedAt, content };
    }
    const measured =
      landed && expectation.changedAt !== undefined
        ? { propagationSeconds: Math.max(0, (now - expectation.changedAt) / 1000) }
        : {};
    return done(
      {
        state: 'InSync',
        reason: 'InSync',
        message: 'files match the API',
        mismatches,
        ...measured,
      },
      undefined,
      synced,
    );
  }

  // (4)
  const since = Math.min(now, expectation.changedAt ?? memory.mismatchSince ?? now);
  // (5)
  const neverUpdated = target.type === 'env' || target.subPath !== undefined || expectation.immutable;
  const windowMs = neverUpdated ? policy.debounceMs : policy.graceMs;
  const deadline = since + windowMs + (policy.spreadMs ?? 0);
  const summary = mismatches
    .slice(0, 3)
    .map(
      (m) =>
        `${m.path || 'the file'} ${m.kind}${m.expected ? ` (want ${m.expected}, have ${m.observed ?? 'none'})` : ''}`,
    )
    .join('; ');
  const more = mismatches.length > 3 ? ` and ${mismatches.length - 3} more` : '';

  // (6)
  if (now < deadline) {
    return done(
      {
        state: 'Propagating',
        reason: 'Propagating',
        message: `differs from the API for ${Math.round((now - since) / 1000)}s, within the ${Math.round(windowMs / 1000)}s window: ${summary}${more}`,
        mismatches,
        since,
        deadline,
      },
      memory.mismatchSince ?? now,
    );
  }
  const reason: VerdictReason =
    target.type === 'env'
      ? 'EnvStale'
      : target.subPath !== undefined
        ? 'SubPathStale'
        : expectation.immutable
          ? 'ImmutableStale'
          : mismatches.every((m) => m.kind === 'missing')
            ? 'FileMissing'
            : 'ContentDrift';
  const why: Record<string, string> = {
    EnvStale: 'environment variables are fixed at container start; only a restart applies the change',
    SubPathStale: 'a subPath mount is never updated by kubelet; only a restart applies the change',
    ImmutableStale:
      'the source is immutable, so kubelet stopped watching it; only a restart applies the change',
    FileMissing: `files are missing ${Math.round((now - since) / 1000)}s after the change`,
    ContentDrift: `files still differ ${Math.round((now - since) / 1000)}s after the change, past the ${Math.round(windowMs / 1000)}s grace`,
  };
  return done(
    {
      state: reason === 'FileMissing' ? 'Missing' : 'Drifted',
      reason,
      message: `${why[reason]}: ${summary}${more}`,
      mismatches,
      since,
    },
    memory.mismatchSince ?? now,
  );
}
