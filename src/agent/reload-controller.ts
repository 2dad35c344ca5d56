// Reload mode's effects: once every file matches the API after a change, tell the app. Its
// decisions are pure (heal/reload-state.ts, one ReloadState value); this performs them.
//
// The config the app loaded is taken to be the one on disk at the agent's first in-sync pass (as
// a native sidecar the agent starts before the app), then each config it was successfully told
// to reload. A reload that fails is not retried for the same config: it becomes a ReloadFailed
// verdict for the planner, which applies the fallback (restart or alert) with the usual dedupe.
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import type { ReloadConfig } from '../config/agent-config.ts';
import type { Target, VolumeTarget } from '../discover/targets.ts';
import type { EventReason } from '../heal/executor.ts';
import { appStartedBeforeSwap, triggerReload } from '../heal/reload.ts';
import {
  BEFORE_THE_AGENT,
  fallbackCarriedOut,
  INITIAL_RELOAD_STATE,
  nextReloadStep,
  type ReloadState,
  reloaded,
  reloadFailed,
  seeConfig,
} from '../heal/reload-state.ts';
import type { SourceRef } from '../kube/resources.ts';
import { DATA_LINK } from '../read/volume.ts';
import { configHash, configVersion, type SourceLookup } from '../verify/expected.ts';
import { targetId, type Verdict } from '../verify/verdict.ts';
import type { Confirmation } from '../watch/confirm-sources.ts';
import type { HealOutcome } from './heal-actor.ts';
import type { ContainerStarts } from './pass.ts';
import type { PodMetrics } from './pod-metrics.ts';

/** How soon a reload fallback held back by an unreadable API is tried again. */
const FALLBACK_RETRY_MS = 5_000;

export type { HealOutcome } from './heal-actor.ts';

export interface ReloadDeps {
  readonly config: ReloadConfig;
  readonly targets: readonly Target[];
  readonly sources: readonly SourceRef[];
  /** Where a volume target's files are in the agent's filesystem. */
  readonly volumePath: (target: VolumeTarget) => string;
  readonly lookup: SourceLookup;
  /** When each container last started (the Pod's status, refreshed by the agent). */
  readonly starts: () => ContainerStarts;
  /** The source cache's quorum re-read (watch/source-cache.ts). */
  readonly confirm: (refs: readonly SourceRef[]) => Promise<Confirmation>;
  /** Plans and performs a heal for these verdicts (the agent's act). */
  readonly act: (verdicts: readonly Verdict[], now: number) => Promise<HealOutcome>;
  readonly wake: () => void;
  readonly event: (reason: EventReason, message: string, type: 'Normal' | 'Warning') => Promise<void>;
  readonly metrics: Pick<PodMetrics, 'heals'>;
  readonly log: Logger;
  readonly signal: AbortSignal;
}

export interface ReloadController {
  /** Every pass, first: the config as the cache has it now (for the settle time). */
  see(now: number): void;
  /** Every pass, after the verdicts: confirms (or not) the reload of the last pass. */
  confirmLast(allInSync: boolean): void;
  /** After an in-sync pass: reload if the config changed, or fall back; may ask to run again at `retryAt`. */
  afterInSync(verdicts: readonly Verdict[], now: number): Promise<{ retryAt?: number }>;
}

/**
 * configHash, answered again from the last call while every source's lookup gives the same
 * snapshot object (the cache replaces a snapshot on each change and never alters one). Why:
 * configHash sorts and digests every key of every source, and a pass asks for it two or three
 * times, twice before the reload's POST; for 100 keys that was about 0.5 ms a change in the
 * reload bench's profile.
 */
function lastConfigHash(lookup: SourceLookup, sources: readonly SourceRef[]): () => string {
  let last: { readonly views: readonly unknown[]; readonly hash: string } | undefined;
  return () => {
    const views = sources.map((ref) => {
      const state = lookup(ref);
      return state?.state === 'present' ? state.snapshot : state?.state;
    });
    if (last?.views.every((view, i) => view === views[i])) return last.hash;
    last = { views, hash: configHash(lookup, sources) };
    return last.hash;
  };
}

export function reloadController(deps: ReloadDeps): ReloadController {
  const { log, metrics } = deps;
  let reload: ReloadState = INITIAL_RELOAD_STATE;
  const current = lastConfigHash(deps.lookup, deps.sources);
  const shown = () => configVersion(deps.lookup, deps.sources);

  /** Volume targets whose `..data` swapped after their app container started (Pod status). */
  function volumesSwappedAfterAppStart(): string[] {
    const starts = deps.starts();
    return deps.targets
      .filter((t) => {
        if (t.type !== 'volume' || t.subPath !== undefined) return false;
        let swappedAt: number | undefined;
        try {
          swappedAt = fs.lstatSync(path.join(deps.volumePath(t), DATA_LINK)).mtimeMs;
        } catch {
          swappedAt = undefined;
        }
        return appStartedBeforeSwap(starts.byContainer[t.container], swappedAt) === true;
      })
      .map(targetId);
  }

  // The fallback restarts for the config the cache holds, so that view is confirmed first, as
  // drift is: stale, and the next pass decides on the corrected view (a new config is a new
  // reload); unreadable, and the fallback is tried again after FALLBACK_RETRY_MS.
  async function fallBack(message: string, verdicts: readonly Verdict[], now: number) {
    const { corrected, unconfirmed } = await deps.confirm(deps.sources);
    if (corrected || unconfirmed.size > 0) {
      log.warn(
        { configHash: shown(), stale: corrected, unreadable: [...unconfirmed.keys()] },
        'reload fallback held back: the sources changed or could not be read',
      );
      if (corrected) deps.wake();
      return corrected ? {} : { retryAt: now + FALLBACK_RETRY_MS };
    }
    const failed: Verdict = {
      target: 'reload',
      state: 'Drifted',
      reason: 'ReloadFailed',
      message: `${message}: the app may still run the old config`,
      mismatches: [],
    };
    // A 409 (the workload changed while planning) is not the fallback carried out: it stays owed,
    // and the pass the conflict wakes plans it again on the workload as it is now. Nor is a
    // failure (the restart patch or a read refused or unanswered, the policy server unable to
    // decide): it stays owed, and is tried again at the retryAt the failure set.
    const { retryAt, conflict, failed: unhealed } = await deps.act([...verdicts, failed], now);
    if (!conflict && !unhealed) reload = fallbackCarriedOut(reload);
    return retryAt === undefined ? {} : { retryAt };
  }

  return {
    see(now) {
      reload = seeConfig(reload, current(), now);
    },

    confirmLast(allInSync) {
      if (reload.confirming === undefined) return;
      if (allInSync && current() === reload.confirming)
        log.info(
          { configHash: shown() },
          'reload confirmed: the files still match what the app was told to load',
        );
      else
        log.warn(
          { configHash: shown() },
          'the files changed while the app reloaded: following the new change',
        );
      reload = { ...reload, confirming: undefined };
    },

    async afterInSync(verdicts, now) {
      const hash = current();
      if (reload.loaded === undefined) {
        // The app is taken to have loaded the files as they are now, unless its container started
        // before their last swap: then they changed while no agent watched, and one reload is owed.
        const owed = volumesSwappedAfterAppStart();
        if (owed.length === 0) {
          reload = { ...reload, loaded: hash };
          return {};
        }
        log.info(
          { targets: owed },
          'the files changed after the app started, while no agent watched: reloading once',
        );
        reload = { ...reload, loaded: BEFORE_THE_AGENT };
      }
      const step = nextReloadStep(reload, verdicts, hash, now, deps.config.settleMs);
      if (step.type === 'none') return {};
      if (step.type === 'wait') return { retryAt: step.at };
      if (step.type === 'fallback') return fallBack(step.message, verdicts, now);
      try {
        const how = await triggerReload(deps.config.trigger, deps.signal);
        reload = reloaded(reload, hash);
        metrics.heals.inc({ action: 'reload', result: 'ok' });
        log.info({ decision: 'reload', how, configHash: shown() }, 'reloaded the app');
        await deps.event('Reloaded', `${how}, for config ${shown()}`, 'Normal');
        // Confirm at once: the next pass re-verifies the files the app was told to load. If they
        // changed meanwhile, that pass sees it and the usual flow (propagation, reload, fallback) follows.
        deps.wake();
        return {};
      } catch (error) {
        const message = (error as Error).message;
        reload = reloadFailed(reload, hash, message);
        metrics.heals.inc({ action: 'reload', result: 'failed' });
        log.warn({ decision: 'reload', configHash: shown(), error: message }, 'reload failed');
        await deps.event('ReloadFailed', message, 'Warning');
        return fallBack(message, verdicts, now);
      }
    },
  };
}
