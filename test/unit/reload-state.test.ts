// Reload mode's memory as one value (src/heal/reload-state.ts): each transition and the step it
// leads to.
import { describe, expect, it } from 'vitest';
import {
  fallbackCarriedOut,
  INITIAL_RELOAD_STATE,
  nextReloadStep,
  type ReloadState,
  reloaded,
  reloadFailed,
  seeConfig,
} from '../../src/heal/reload-state.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const inSync: Verdict[] = [{ target: 't', state: 'InSync', reason: 'InSync', message: '', mismatches: [] }];
const propagating: Verdict[] = [
  { target: 't', state: 'Propagating', reason: 'Propagating', message: '', mismatches: [] },
];
const SETTLE = 1000;
const T = 1_000_000;

describe('ReloadState', () => {
  it('the first config seen is taken as long-standing: its first change reloads at once', () => {
    let s = seeConfig(INITIAL_RELOAD_STATE, 'a', T);
    s = { ...s, loaded: 'a' };
    s = seeConfig(s, 'b', T + 10);
    expect(nextReloadStep(s, inSync, 'b', T + 10, SETTLE)).toEqual({ type: 'reload' });
  });

  it('nothing to do while the app runs the current config, or while a target is not InSync', () => {
    const s = { ...seeConfig(INITIAL_RELOAD_STATE, 'a', T), loaded: 'a' };
    expect(nextReloadStep(s, inSync, 'a', T, SETTLE)).toEqual({ type: 'none' });
    expect(nextReloadStep(s, propagating, 'b', T, SETTLE)).toEqual({ type: 'none' });
  });

  it('a change right after another (a burst) waits until the config has settled', () => {
    let s: ReloadState = { ...seeConfig(INITIAL_RELOAD_STATE, 'a', T), loaded: 'a' };
    s = seeConfig(s, 'b', T + 10); // b after a long quiet: reloaded at once
    s = reloaded(s, 'b');
    s = seeConfig(s, 'c', T + 200); // c only 190 ms after b
    expect(nextReloadStep(s, inSync, 'c', T + 200, SETTLE)).toEqual({ type: 'wait', at: T + 1200 });
    expect(nextReloadStep(s, inSync, 'c', T + 1200, SETTLE)).toEqual({ type: 'reload' });
  });

  it('a reload made is to be confirmed, and becomes the loaded config', () => {
    const s = reloaded({ ...INITIAL_RELOAD_STATE, loaded: 'a' }, 'b');
    expect(s).toMatchObject({ loaded: 'b', confirming: 'b' });
  });

  it('a failed reload owes its fallback once, and is not retried for the same config', () => {
    let s: ReloadState = { ...seeConfig(INITIAL_RELOAD_STATE, 'a', T), loaded: 'a' };
    s = reloadFailed(s, 'b', 'POST /-/reload: 500');
    expect(nextReloadStep(s, inSync, 'b', T, SETTLE)).toEqual({
      type: 'fallback',
      message: 'POST /-/reload: 500',
    });
    s = fallbackCarriedOut(s);
    expect(nextReloadStep(s, inSync, 'b', T, SETTLE)).toEqual({ type: 'none' });
    // A new config is a new reload.
    expect(nextReloadStep(s, inSync, 'c', T, SETTLE)).toEqual({ type: 'reload' });
  });

  it('transitions never change the value they are given', () => {
    const s = { ...INITIAL_RELOAD_STATE, loaded: 'a' };
    reloaded(s, 'b');
    reloadFailed(s, 'b', 'x');
    seeConfig(s, 'b', T);
    expect(s).toEqual({ ...INITIAL_RELOAD_STATE, loaded: 'a' });
  });
});
