// Which drifted targets only a source that says "never restart for me" would restart the
// workload for (config-sync.io/restart=never on a ConfigMap or Secret: verify/source.ts). A
// platform team owns a ConfigMap mounted everywhere, but not the workloads that mount it: its
// drift is still found and reported, and the planner restarts for it only when some other drift
// calls for the restart anyway. Pure.
import type { SourceRef, Target } from '../discover/targets.ts';
import { expectVolume, type SourceLookup } from '../verify/expected.ts';
import { refKey } from '../verify/source.ts';
import { targetId, type Verdict } from '../verify/verdict.ts';

/**
 * Steps, per drifted verdict:
 *  (1) the sources behind the drift: an env target's one source; for a volume, the source each
 *      differing or missing file is expected from (a projected volume merges several); a file
 *      that no source expects, or a drift without files, puts every source of the target
 *      behind it;
 *  (2) the target is held when every source behind its drift says never; it maps to their
 *      lines (the planner's reasons).
 */
export function neverRestartTargets(
  targets: readonly Target[],
  verdicts: readonly Verdict[],
  lookup: SourceLookup,
): ReadonlyMap<string, readonly string[]> {
  const held = new Map<string, readonly string[]>();
  const byId = new Map(targets.map((t) => [targetId(t), t]));
  for (const verdict of verdicts) {
    const target = byId.get(verdict.target);
    if (!target || (verdict.state !== 'Drifted' && verdict.state !== 'Missing')) continue;
    // (1)
    const behind = sourcesBehind(target, verdict, lookup);
    // (2)
    const lines = behind.map((ref) => {
      const state = lookup(ref);
      return state?.state === 'present' ? state.snapshot.neverRestart : undefined;
    });
    if (lines.length > 0 && lines.every((l) => l !== undefined))
      held.set(verdict.target, [...new Set(lines as string[])]);
  }
  return held;
}

function sourcesBehind(target: Target, verdict: Verdict, lookup: SourceLookup): SourceRef[] {
  if (target.type === 'env') return [target.ref];
  const all = target.sources.map((s) => s.ref);
  if (verdict.mismatches.length === 0) return all;
  const files = expectVolume(target, lookup).files;
  const refs = new Map<string, SourceRef>();
  for (const m of verdict.mismatches) {
    const file = m.kind === 'unexpected' ? undefined : files.get(m.path);
    if (!file) return all;
    refs.set(refKey(file.source), file.source);
  }
  return [...refs.values()];
}
