// Whether, and what, to write to the Pod's status after a pass: the InSync condition and, on a
// verified match, last-config-sync with the versions matched. Pure: the agent performs it.
//
// Steps:
//  (1) any target Unknown (the API unreadable) -> no write: the condition keeps what it said;
//  (2) the condition: False with the first drifted target's reason, else True, with reason
//      Propagating while a change is within its window (a readiness gate must not take every
//      replica out during a normal config rollout), else InSync;
//  (3) a verified match (every target InSync) names the source versions it was made on;
//  (4) write on a transition (status or reason changed), on a match of new versions (the API
//      change and kubelet's files can be seen in one pass, without a transition), or when the
//      last write is older than the heartbeat; otherwise nothing. A condition that is True and
//      would only turn from InSync to Propagating is not a transition: a change kubelet
//      delivers within --grace is not news, and the match of its new versions that ends it is
//      written anyway. So a propagated change costs one write per Pod, not two (1,000 writes
//      for a ConfigMap shared by 500 Pods were 2 per Pod); a drift, its heal and a return from
//      drift are still written as they happen.
import type { Verdict } from '../verify/verdict.ts';
import type { PodStatusUpdate } from './pod-status.ts';

/** What was last written, as the agent remembers it. */
export interface WrittenStatus {
  readonly inSync: boolean;
  readonly reason: string;
  readonly writtenAt: number;
  readonly transitionAt: Date;
  readonly matched: string | undefined;
  /** The note written with it, if any. */
  readonly note?: string;
}

export function statusToWrite(
  verdicts: readonly Verdict[],
  /** `Kind/name@resourceVersion,...` of the sources as this pass saw them. */
  versions: string,
  last: WrittenStatus | undefined,
  now: number,
  heartbeatMs: number,
  /** Why nothing was done about the drift (heal/report.ts, conditionNote), for the message. */
  note?: string,
): { update: PodStatusUpdate; written: WrittenStatus } | undefined {
  // (1)
  if (verdicts.some((v) => v.state === 'Unknown')) return undefined;
  // (2)
  const bad = verdicts.find((v) => v.state === 'Drifted' || v.state === 'Missing');
  const inSync = !bad;
  const propagating = verdicts.some((v) => v.state === 'Propagating');
  const reason = bad ? bad.reason : propagating ? 'Propagating' : 'InSync';
  // (3)
  const matched = verdicts.every((v) => v.state === 'InSync') ? versions : undefined;
  // (4)
  const noted = bad && note ? note : undefined;
  const quietPropagation = last?.inSync === true && inSync && reason === 'Propagating';
  const transition =
    !last || last.inSync !== inSync || (last.reason !== reason && !quietPropagation) || last.note !== noted;
  const newMatch = matched !== undefined && matched !== last?.matched;
  if (!transition && !newMatch && now - (last?.writtenAt ?? 0) < heartbeatMs) return undefined;
  const transitionAt = !last || last.inSync !== inSync ? new Date(now) : last.transitionAt;
  return {
    update: {
      inSync,
      reason,
      message: bad
        ? `${bad.target}: ${bad.message}${noted ? `; ${noted}` : ''}`
        : propagating
          ? 'propagating within grace'
          : 'every target matches the API',
      lastTransitionTime: transitionAt,
      ...(matched !== undefined ? { lastConfigSync: new Date(now), matchedVersions: matched } : {}),
    },
    written: {
      inSync,
      reason,
      writtenAt: now,
      transitionAt,
      matched: matched ?? last?.matched,
      ...(noted ? { note: noted } : {}),
    },
  };
}
