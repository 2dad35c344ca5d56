// Env targets start from what the app container saw when it started: kubelet resolves env vars
// once, and no other container can read them. The agent records the keyed fingerprint of each
// env target's keys on its Pod once (annotation config-sync.io/env-baseline), so a restarted
// agent keeps the same baseline instead of taking a new one from values the app never got.
import { ANNOTATION } from '../kube/annotations.ts';

/**
 * The fingerprints of this pass to record: those of env targets with no baseline yet (the pass
 * leaves out any taken from a version the app container did not get). Empty: nothing to write.
 */
export function baselinesToRecord(
  envDigests: Readonly<Record<string, string>>,
  baselines: Readonly<Record<string, string>>,
): Record<string, string> {
  return Object.fromEntries(Object.entries(envDigests).filter(([id]) => baselines[id] === undefined));
}

/**
 * The env-baseline annotation: `{"kid": <key id>, "baselines": {target id: fingerprint}}`.
 * Baselines made under another key (another Pod's, or this process's own when the state
 * directory is missing) or in the old unkeyed format cannot be compared, so they are re-taken.
 */
export function readEnvBaselines(
  raw: string | undefined,
  kid: string,
): { baselines: Record<string, string>; note?: string } {
  if (!raw) return { baselines: {} };
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.envBaseline} is not JSON; env targets are re-baselined`,
    };
  }
  const record = parsed as { kid?: unknown; baselines?: unknown } | null;
  if (record?.kid !== kid || typeof record.baselines !== 'object' || record.baselines === null) {
    return {
      baselines: {},
      note: `annotation ${ANNOTATION.envBaseline} was made under another fingerprint key; env targets are re-baselined`,
    };
  }
  return { baselines: record.baselines as Record<string, string> };
}

/** The annotation's value for `baselines` under the key `kid`. */
export function writeEnvBaselines(baselines: Readonly<Record<string, string>>, kid: string): string {
  return JSON.stringify({ kid, baselines });
}
