// The agent's decision to write its Pod's status (src/status/condition.ts): when, and what.
import { describe, expect, it } from 'vitest';
import { statusToWrite, type WrittenStatus } from '../../src/status/condition.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const T = 1_800_000_000_000;
const HEARTBEAT = 15 * 60_000;
const v = (state: Verdict['state'], reason: Verdict['reason'] = state as Verdict['reason']): Verdict => ({
  target: 'app:/etc/app',
  state,
  reason,
  message: `${state} message`,
  mismatches: [],
});
const V1 = 'ConfigMap/web-config@1';
const V2 = 'ConfigMap/web-config@2';

describe('statusToWrite', () => {
  it('first pass in sync: writes True/InSync with last-config-sync and the versions', () => {
    const w = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT);
    expect(w?.update).toMatchObject({ inSync: true, reason: 'InSync', matchedVersions: V1 });
    expect(w?.update.lastConfigSync).toEqual(new Date(T));
    expect(w?.written).toMatchObject({ inSync: true, reason: 'InSync', writtenAt: T, matched: V1 });
  });

  it('the same state again before the heartbeat: nothing to write', () => {
    const last = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    expect(statusToWrite([v('InSync')], V1, last, T + 60_000, HEARTBEAT)).toBeUndefined();
  });

  it('the same state at the heartbeat: written again, keeping the transition time', () => {
    const last = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    const w = statusToWrite([v('InSync')], V1, last, T + HEARTBEAT, HEARTBEAT);
    expect(w?.update.lastTransitionTime).toEqual(new Date(T));
    expect(w?.update.lastConfigSync).toEqual(new Date(T + HEARTBEAT));
  });

  it('a match on new versions with no transition: written, naming them', () => {
    const last = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    const w = statusToWrite([v('InSync')], V2, last, T + 1000, HEARTBEAT);
    expect(w?.update.matchedVersions).toBe(V2);
    expect(w?.update.lastTransitionTime).toEqual(new Date(T));
  });

  it('a change kubelet delivers within grace is one write, its new match: InSync to Propagating is not news', () => {
    const first = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    expect(statusToWrite([v('Propagating')], V2, first, T + 1000, HEARTBEAT)).toBeUndefined();
    const w = statusToWrite([v('InSync')], V2, first, T + 5000, HEARTBEAT);
    expect(w?.update).toMatchObject({ inSync: true, reason: 'InSync', matchedVersions: V2 });
    // Back from a drift, Propagating is a transition (False to True), and written.
    const drifted = statusToWrite([v('Drifted', 'ContentDrift')], V2, first, T + 1000, HEARTBEAT)?.written;
    expect(statusToWrite([v('Propagating')], V2, drifted, T + 2000, HEARTBEAT)?.update).toMatchObject({
      inSync: true,
      reason: 'Propagating',
    });
  });

  it('Propagating counts as in sync, with its own reason and no last-config-sync (written at the heartbeat)', () => {
    const last = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    const w = statusToWrite([v('Propagating')], V2, last, T + HEARTBEAT, HEARTBEAT);
    expect(w?.update).toMatchObject({
      inSync: true,
      reason: 'Propagating',
      message: 'propagating within grace',
    });
    expect(w?.update.lastConfigSync).toBeUndefined();
    expect(w?.update.lastTransitionTime).toEqual(new Date(T)); // still True: no status transition
    expect(w?.written.matched).toBe(V1); // the last verified match stays remembered
  });

  it('drift: False with the drifted target’s reason and message, a new transition time', () => {
    const last = statusToWrite([v('InSync')], V1, undefined, T, HEARTBEAT)?.written;
    const w = statusToWrite([v('InSync'), v('Drifted', 'SubPathStale')], V2, last, T + 5000, HEARTBEAT);
    expect(w?.update).toMatchObject({
      inSync: false,
      reason: 'SubPathStale',
      message: 'app:/etc/app: Drifted message',
      lastTransitionTime: new Date(T + 5000),
    });
  });

  it('any Unknown target: no write at all, whatever the rest says', () => {
    const last: WrittenStatus = {
      inSync: true,
      reason: 'InSync',
      writtenAt: 0,
      transitionAt: new Date(0),
      matched: V1,
    };
    expect(
      statusToWrite([v('Drifted', 'ContentDrift'), v('Unknown', 'ApiUnreadable')], V2, last, T, HEARTBEAT),
    ).toBeUndefined();
  });
});
