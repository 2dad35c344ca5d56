// Spreads the moment sibling replicas call one change drifted, so that the first one's restart is
// made before most of the others look. Every replica sees a change at the same moment (each has
// the same watch event), and with the same window each decided within milliseconds of the
// others: all read the workload before any restart was made, all sent the conditional restart
// patch, all but one were refused and read again (measured, 50 agents: 25 refused patches, 13
// requests per agent). A replica's decision now waits up to RESTART_SPREAD_MS more, by an offset
// of its own: the first restarts, and the later ones' one read of the workload finds it done.
//
// The offset comes from the Pod's UID, not a random draw: the same Pod waits the same time at
// every drift (a log line or a test can say why it went first), and UIDs are random already.
import { createHash } from 'node:crypto';

/** The widest spread: what a decision may wait beyond its window, against a 5 s debounce and a 90 s grace. */
export const RESTART_SPREAD_MS = 1_000;

/** This Pod's offset within the spread, in [0, RESTART_SPREAD_MS); 0 without a Pod. */
export function restartSpreadMs(podUid: string | undefined): number {
  if (!podUid) return 0;
  const fraction = createHash('sha256').update(podUid).digest().readUInt32BE(0) / 2 ** 32;
  return Math.floor(fraction * RESTART_SPREAD_MS);
}
