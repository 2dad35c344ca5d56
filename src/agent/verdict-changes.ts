// Which verdicts of a pass are news: a target's state or reason differs from the last one told.
// Those are logged (drift as a warning) and drift becomes a Drifted Event, except a missing
// source, which is for alerting (its Event would repeat the same complaint on every Pod).
// Pure: the agent keeps the map and performs the lines and Events.
import type { Verdict } from '../verify/verdict.ts';

export interface VerdictNews {
  readonly verdict: Verdict;
  readonly level: 'info' | 'warn';
  /** A Drifted Event's message, where this news gets one. */
  readonly event?: string;
}

export function verdictNews(
  lastTold: ReadonlyMap<string, string>,
  verdicts: readonly Verdict[],
): { news: VerdictNews[]; told: Map<string, string> } {
  const told = new Map(lastTold);
  const news: VerdictNews[] = [];
  for (const v of verdicts) {
    const key = `${v.state}:${v.reason}`;
    if (told.get(v.target) === key) continue;
    told.set(v.target, key);
    const drift = v.state === 'Drifted' || v.state === 'Missing';
    news.push({
      verdict: v,
      level: drift ? 'warn' : 'info',
      ...(drift && v.reason !== 'SourceMissing' ? { event: `${v.target}: ${v.message}` } : {}),
    });
  }
  return { news, told };
}
