// Reload mode's memory, as one value with pure transitions: which config the app loaded, the
// reload waiting to be confirmed, how long the config has stood, and a failed reload whose
// fallback is owed. The agent holds a ReloadState and performs the steps these functions name.
import type { Verdict } from '../verify/verdict.ts';
import { type ConfigSteadiness, reloadTiming, shouldReload } from './reload.ts';

export interface ReloadState {
  /** The config the app is taken to run: set at the first in-sync pass, then by each reload. */
  readonly loaded: string | undefined;
  /** A reload just made, for this config: the next pass confirms the files still match it. */
  readonly confirming: string | undefined;
  /** How long the config has looked the same, for reloadTiming. */
  readonly steadiness: ConfigSteadiness;
  readonly steadyHash: string | undefined;
  /** A reload that failed, for that config: its fallback is owed until carried out. */
  readonly failure:
    | { readonly config: string; readonly message: string; readonly fallbackOwed: boolean }
    | undefined;
}

/** What was there before the agent started is unknown, so the first config seen is taken as long-standing. */
export const INITIAL_RELOAD_STATE: ReloadState = {
  loaded: undefined,
  confirming: undefined,
  steadiness: { since: Number.NEGATIVE_INFINITY, previousStableMs: undefined },
  steadyHash: undefined,
  failure: undefined,
};

/** Every pass: a config different from the last one seen restarts the steadiness clock. */
export function seeConfig(state: ReloadState, hash: string, now: number): ReloadState {
  const changed = state.steadyHash !== undefined && hash !== state.steadyHash;
  return {
    ...state,
    steadyHash: hash,
    steadiness: changed ? { since: now, previousStableMs: now - state.steadiness.since } : state.steadiness,
  };
}

/** What the app was told to load before this agent ran: the current config, or an older one. */
export const BEFORE_THE_AGENT = 'before the agent started';

export type ReloadStep =
  | { readonly type: 'none' }
  | { readonly type: 'wait'; readonly at: number }
  | { readonly type: 'reload' }
  | { readonly type: 'fallback'; readonly message: string };

/**
 * After an in-sync pass, with `state.loaded` set:
 *  (1) nothing to reload (a target not InSync, or the app already runs this config) -> none;
 *  (2) a reload of this config failed before -> its fallback if still owed, else none (a failed
 *      reload is not retried for the same config);
 *  (3) inside a burst -> wait until the config has settled; otherwise reload.
 */
export function nextReloadStep(
  state: ReloadState,
  verdicts: readonly Verdict[],
  current: string,
  now: number,
  settleMs: number,
): ReloadStep {
  // (1)
  if (!shouldReload(verdicts, state.loaded, current)) return { type: 'none' };
  // (2)
  if (state.failure?.config === current)
    return state.failure.fallbackOwed
      ? { type: 'fallback', message: state.failure.message }
      : { type: 'none' };
  // (3)
  const when = reloadTiming(state.steadiness, now, settleMs);
  return 'at' in when ? { type: 'wait', at: when.at } : { type: 'reload' };
}

export function reloaded(state: ReloadState, current: string): ReloadState {
  return { ...state, loaded: current, confirming: current };
}

export function reloadFailed(state: ReloadState, current: string, message: string): ReloadState {
  return { ...state, failure: { config: current, message, fallbackOwed: true } };
}

export function fallbackCarriedOut(state: ReloadState): ReloadState {
  return state.failure ? { ...state, failure: { ...state.failure, fallbackOwed: false } } : state;
}
