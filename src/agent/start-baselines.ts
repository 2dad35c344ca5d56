// What an app container got when it started, for the targets kubelet never updates: an env
// target's keys (kubelet resolves env vars once, and no other container can read them) and a
// subPath file (a copy made when the container is created). The agent records the keyed
// fingerprint of each on its Pod (annotation config-sync.io/start-baselines), with the start of
// the container it stands for. An agent that starts again later (its own crash, an OOM kill)
// then still knows what the app holds. Without it, a restarted agent can only assume that the
// app holds a version from before every change since the app's start (container-view.ts,
// 'older'), and it restarts the workload for a change to a key the app does not even read.
import { ANNOTATION } from '../kube/annotations.ts';

export interface StartBaseline {
  /** The keyed fingerprint (verify/fingerprint.ts) of what the container got. */
  readonly fp: string;
  /**
   * When the container it stands for started (epoch ms, as its status says). Absent for an env
   * baseline taken before that start was known: the agent's copy stood for the app's then.
   */
  readonly startedAt?: number;
}

export type StartBaselines = Readonly<Record<string, StartBaseline>>;

/**
 * The baseline that says what a container started at `startedAt` holds: one recorded for that
 * very start. Undefined when the start is unknown or the container started again since.
 */
export function heldBaseline(baseline: StartBaseline | undefined, startedAt: number | undefined) {
  return baseline?.startedAt !== undefined && baseline.startedAt === startedAt ? baseline.fp : undefined;
}

/**
 * The candidates of a pass to record: a target with no baseline yet, and one whose baseline
 * stands for an earlier start of its container (or for none) where the candidate names the
 * current start. Empty: nothing to write.
 */
export function baselinesToRecord(
  candidates: StartBaselines,
  baselines: StartBaselines,
): Record<string, StartBaseline> {
  return Object.fromEntries(
    Object.entries(candidates).filter(([id, candidate]) => {
      const stored = baselines[id];
      if (stored === undefined) return true;
      return candidate.startedAt !== undefined && candidate.startedAt !== stored.startedAt;
    }),
  );
}

/**
 * How long after its `reads`-th read of its own Pod (1, 2, ...) the agent reads it again while an
 * app container with an env or subPath target shows no start, so that its baselines can be tied
 * to that start: 2 s, 4 s, 8 s ... (the first read comes 1 s after the agent's start), at most
 * 30 s apart, for 10 reads (about 3 minutes: an app usually runs within seconds of its sidecar).
 * A container not running by then (a long image pull, a crash loop) is read for at each
 * --heartbeat.
 */
export function startsReadDelay(reads: number, heartbeatMs: number): number {
  return reads < 10 ? Math.min(30_000, 1000 * 2 ** reads) : heartbeatMs;
}

interface Recorded {
  kid?: unknown;
  baselines?: unknown;
}

/**
 * The annotation: `{"kid": <key id>, "baselines": {<target id>: {"fp": <fingerprint>,
 * "startedAt": <RFC 3339>}}}`. Baselines made under another key (another Pod's, or this
 * process's own when the state directory is missing) cannot be compared, so they are taken again;
 * so are entries that do not have this shape.
 */
export function readStartBaselines(
  raw: string | undefined,
  kid: string,
): { baselines: Record<string, StartBaseline>; note?: string } {
  if (!raw) return { baselines: {} };
  let parsed: Recorded | null;
  try {
    parsed = JSON.parse(raw) as Recorded | null;
  } catch {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.startBaselines} is not JSON; env and subPath baselines are taken again`,
    };
  }
  if (parsed?.kid !== kid || typeof parsed.baselines !== 'object' || parsed.baselines === null) {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.startBaselines} was made under another fingerprint key; env and subPath baselines are taken again`,
    };
  }
  const baselines: Record<string, StartBaseline> = {};
  for (const [id, entry] of Object.entries(parsed.baselines as Record<string, unknown>)) {
    const { fp, startedAt } = (entry ?? {}) as { fp?: unknown; startedAt?: unknown };
    if (typeof fp !== 'string') continue;
    if (startedAt === undefined) {
      baselines[id] = { fp };
      continue;
    }
    const at = typeof startedAt === 'string' ? Date.parse(startedAt) : Number.NaN;
    if (!Number.isNaN(at)) baselines[id] = { fp, startedAt: at };
  }
  return { baselines };
}

/** The annotation's value for `baselines` under the key `kid`. */
export function writeStartBaselines(baselines: StartBaselines, kid: string): string {
  const entries = Object.entries(baselines).map(([id, b]) => [
    id,
    b.startedAt === undefined ? { fp: b.fp } : { fp: b.fp, startedAt: new Date(b.startedAt).toISOString() },
  ]);
  return JSON.stringify({ kid, baselines: Object.fromEntries(entries) });
}
