// The long-running agent: watches its sources in the API and its mounts on disk, and runs one
// level-based reconcile whenever anything may have changed (controller-runtime style: events
// only wake the loop; each pass re-reads the actual state and decides from scratch).
//
// A pass, step by step:
//  (1) verify every target against the cached API state (verifyPass); where that finds drift,
//      confirm the sources behind it with a quorum read first and decide again on what the
//      API says now (confirmView); record metrics;
//  (2) log each verdict that changed, and the propagation time of what just caught up;
//  (3) if anything drifted: find the owner, plan, and act once per distinct plan (restart,
//      dedupe or alert), with an Event on the Pod; a 409 wakes the loop to re-plan at once;
//  (4) write the InSync condition and last-config-sync on a transition or at the heartbeat;
//  (5) sleep until the next signal, the earliest grace deadline or the resync interval.
import fs from 'node:fs';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { LoopConfig, ReloadConfig } from '../config/agent-config.ts';
import { referencedSources, type SourceRef, targetSources } from '../discover/targets.ts';
import { type EventReason, emitEvent, type PodRef, restartWorkload } from '../heal/executor.ts';
import { findOwner, readWorkload, resolveOwner } from '../heal/owner.ts';
import type { OwnerState, Plan, WorkloadKind } from '../heal/planner.ts';
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
import {
  actionKey,
  type HealReport,
  planReport,
  type RestartOutcome,
  restartReport,
} from '../heal/report.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import type { AgentMetrics } from '../metrics/metrics.ts';
import { statusToWrite, type WrittenStatus } from '../status/condition.ts';
import { annotatePod, writePodStatus } from '../status/pod-status.ts';
import { configHash, configVersion, type SourceLookup } from '../verify/expected.ts';
import { refKey, type SourceState, sameView, viewVersion } from '../verify/source.ts';
import { type TargetMemory, targetId, type Verdict } from '../verify/verdict.ts';
import { SourceWatch } from '../watch/api-watch.ts';
import { watchFiles } from '../watch/file-watch.ts';
import { readSource } from '../watch/read-source.ts';
import { DATA_LINK, readVolume } from '../watch/read-volume.ts';
import { planFor } from './oneshot.ts';
import { containerStarts, isDrift, type PassResult, verifyPass } from './pass.ts';
import { type Runtime, writeEnvBaselines } from './runtime.ts';
import { verdictNews } from './verdict-changes.ts';

export interface AgentDeps {
  readonly rt: Runtime;
  readonly log: Logger;
  readonly metrics: AgentMetrics;
  readonly options: Pick<LoopConfig, 'resyncMs' | 'pollMs' | 'heartbeatMs'>;
  readonly clock?: () => number;
}

/** Wakes a sleeping loop; a wake while awake is remembered for the next sleep. */
class Wakeup {
  private pending = false;
  private resolve: (() => void) | undefined;

  wake(): void {
    this.pending = true;
    this.resolve?.();
  }

  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    if (!this.pending && !signal.aborted) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, Math.max(0, ms));
        const onAbort = () => done();
        function done() {
          clearTimeout(timer);
          signal.removeEventListener('abort', onAbort);
          resolve();
        }
        this.resolve = done;
        signal.addEventListener('abort', onAbort, { once: true });
      });
    }
    this.resolve = undefined;
    this.pending = false;
  }
}

/** How soon a reload fallback held back by an unreadable API is tried again. */
const FALLBACK_RETRY_MS = 5_000;

export interface AgentHandle {
  ready(): boolean;
  live(): boolean;
  done: Promise<void>;
}

export function startAgent(deps: AgentDeps, signal: AbortSignal): AgentHandle {
  const { rt, log, metrics, options } = deps;
  const clock = deps.clock ?? Date.now;
  const sources = new Map<string, SourceState>();
  const watches = new Map<string, SourceWatch>();
  const wakeup = new Wakeup();
  let memory = new Map<string, TargetMemory>();
  let envBaselines: Record<string, string> = { ...rt.envBaselines };
  let ready = false;
  let lastPassAt = clock();
  let lastVerdict = new Map<string, string>();
  let lastActionKey = '';
  /** Reload mode's memory (heal/reload-state.ts). */
  let reload: ReloadState = INITIAL_RELOAD_STATE;
  // When the containers started: for env and subPath targets, the app's start decides what it
  // holds when it and the agent did not start together (container-view.ts).
  const agentStartedAt = Date.now() - process.uptime() * 1000;
  let starts = containerStarts(rt.pod, agentStartedAt);
  let status: WrittenStatus | undefined;
  const podRef: PodRef | undefined = rt.pod?.metadata?.name
    ? { name: rt.pod.metadata.name, namespace: rt.namespace, uid: rt.pod.metadata.uid ?? '' }
    : undefined;
  const lookup = (ref: { kind: 'ConfigMap' | 'Secret'; name: string }) => sources.get(refKey(ref));

  const event = async (reason: EventReason, message: string, type: 'Normal' | 'Warning') => {
    if (!podRef) return;
    try {
      await emitEvent(rt.client, podRef, reason, message, type, new Date(clock()));
    } catch (error) {
      log.warn(
        { err: { code: (error as { code?: string }).code, message: (error as Error).message } },
        'could not emit Event',
      );
    }
  };

  // The owning workload, found once: a Pod's controller chain (Pod -> ReplicaSet -> Deployment)
  // does not change during its life, and reading the ReplicaSet again on every heal was one
  // round trip more between a change and its restart. The workload itself is read every time
  // (its resourceVersion and template make the plan); if it is gone, the chain is found again.
  let ownerRef: { kind: WorkloadKind; name: string } | undefined;
  async function currentOwner(): Promise<OwnerState> {
    if (!ownerRef && rt.pod) {
      const found = await findOwner(rt.client, rt.namespace, rt.pod);
      if (found.type === 'unsupported') return found;
      ownerRef = found;
    }
    if (!ownerRef) return resolveOwner(rt.client, rt.namespace, rt.pod);
    try {
      return await readWorkload(rt.client, rt.namespace, ownerRef.kind, ownerRef.name);
    } catch (error) {
      if ((error as { code?: string }).code === 'CS_API_NOT_FOUND') ownerRef = undefined;
      throw error;
    }
  }

  /** Performs a heal report (heal/report.ts): the metric, the log line, the Event. */
  async function tell(report: HealReport): Promise<void> {
    metrics.heals.inc(report.metric);
    log[report.log.level](report.log.fields, report.log.msg);
    if (report.event) await event(report.event.reason, report.event.message, report.event.type);
  }

  // (3)
  async function act(verdicts: readonly Verdict[], now: number): Promise<{ retryAt?: number }> {
    let plan: Plan;
    try {
      plan = planFor(rt, verdicts, await currentOwner(), lookup, now);
    } catch (error) {
      const key = `failed:${(error as { code?: string }).code}`;
      if (key !== lastActionKey) {
        lastActionKey = key;
        metrics.heals.inc({ action: 'restart', result: 'failed' });
        log.error(
          { code: (error as { code?: string }).code, hint: (error as { hint?: string }).hint },
          (error as Error).message,
        );
        await event('HealFailed', (error as Error).message, 'Warning');
      }
      return {};
    }
    const key = actionKey(plan);
    const repeated = key === lastActionKey;
    if (plan.decision === 'restart') {
      let outcome: RestartOutcome;
      try {
        outcome = { type: await restartWorkload(rt.client, rt.namespace, plan, new Date(now)) };
      } catch (error) {
        outcome = { type: 'failed', error: error as Error };
      }
      await tell(restartReport(plan, outcome, repeated));
      if (outcome.type === 'conflict') {
        wakeup.wake();
        return {};
      }
      lastActionKey = key;
      return {};
    }
    const report = planReport(plan, repeated);
    lastActionKey = key;
    if (report) await tell(report);
    return plan.retryAt === undefined ? {} : { retryAt: plan.retryAt };
  }

  // (3b) Reload mode: once every file matches the API after a change, tell the app. The config it
  // loaded is taken to be the one on disk at the agent's first in-sync pass (as a native sidecar
  // the agent starts before the app), then each config it was successfully told to reload.
  // A reload that fails is not retried for the same config: it becomes a ReloadFailed verdict
  // for the planner, which applies the fallback (restart or alert) with the usual dedupe.
  async function reloadIfChanged(
    settings: ReloadConfig,
    verdicts: readonly Verdict[],
    now: number,
  ): Promise<{ retryAt?: number }> {
    const current = configHash(lookup, rt.sources);
    if (reload.loaded === undefined) {
      // The app is taken to have loaded the files as they are now, unless its container started
      // before their last swap: then they changed while no agent watched, and one reload is owed.
      const owed = volumesSwappedAfterAppStart();
      if (owed.length === 0) {
        reload = { ...reload, loaded: current };
        return {};
      }
      log.info(
        { targets: owed },
        'the files changed after the app started, while no agent watched: reloading once',
      );
      reload = { ...reload, loaded: BEFORE_THE_AGENT };
    }
    const step = nextReloadStep(reload, verdicts, current, now, settings.settleMs);
    if (step.type === 'none') return {};
    if (step.type === 'wait') return { retryAt: step.at };
    if (step.type === 'fallback') return fallBack(step.message, verdicts, now);
    try {
      const how = await triggerReload(settings.trigger, signal);
      reload = reloaded(reload, current);
      metrics.heals.inc({ action: 'reload', result: 'ok' });
      const shown = configVersion(lookup, rt.sources);
      log.info({ decision: 'reload', how, configHash: shown }, 'reloaded the app');
      await event('Reloaded', `${how}, for config ${shown}`, 'Normal');
      // Confirm at once: the next pass re-verifies the files the app was told to load. If they
      // changed meanwhile, that pass sees it and the usual flow (propagation, reload, fallback) follows.
      wakeup.wake();
      return {};
    } catch (error) {
      const message = (error as Error).message;
      reload = reloadFailed(reload, current, message);
      metrics.heals.inc({ action: 'reload', result: 'failed' });
      log.warn(
        { decision: 'reload', configHash: configVersion(lookup, rt.sources), error: message },
        'reload failed',
      );
      await event('ReloadFailed', message, 'Warning');
      return fallBack(message, verdicts, now);
    }
  }

  /** Volume targets whose `..data` swapped after their app container started (Pod status, `starts`). */
  function volumesSwappedAfterAppStart(): string[] {
    return rt.targets
      .filter((t) => {
        if (t.type !== 'volume' || t.subPath !== undefined) return false;
        let swappedAt: number | undefined;
        try {
          swappedAt = fs.lstatSync(path.join(rt.agentPath(t.mountPath), DATA_LINK)).mtimeMs;
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
  async function fallBack(
    message: string,
    verdicts: readonly Verdict[],
    now: number,
  ): Promise<{ retryAt?: number }> {
    const { corrected, unconfirmed } = await reRead(rt.sources);
    if (corrected || unconfirmed.size > 0) {
      log.warn(
        {
          configHash: configVersion(lookup, rt.sources),
          stale: corrected,
          unreadable: [...unconfirmed.keys()],
        },
        'reload fallback held back: the sources changed or could not be read',
      );
      if (corrected) wakeup.wake();
      return corrected ? {} : { retryAt: now + FALLBACK_RETRY_MS };
    }
    reload = fallbackCarriedOut(reload);
    const failed: Verdict = {
      target: 'reload',
      state: 'Drifted',
      reason: 'ReloadFailed',
      message: `${message}: the app may still run the old config`,
      mismatches: [],
    };
    return act([...verdicts, failed], now);
  }

  // (4)
  async function writeStatus(verdicts: readonly Verdict[], now: number): Promise<void> {
    if (!podRef) return;
    const versions = rt.sources
      .map((ref) => {
        const s = lookup(ref);
        return s?.state === 'present' ? `${refKey(ref)}@${s.snapshot.resourceVersion}` : undefined;
      })
      .filter(Boolean)
      .join(',');
    const write = statusToWrite(verdicts, versions, status, now, options.heartbeatMs);
    if (!write) return;
    try {
      await writePodStatus(rt.client, rt.namespace, podRef.name, write.update);
      status = write.written;
    } catch (error) {
      log.warn(
        { code: (error as { code?: string }).code, hint: (error as { hint?: string }).hint },
        (error as Error).message,
      );
    }
  }

  // (1) The cache is the watches' view, and a watch can be behind without knowing it: a stalled
  // connection, a partition, an event still in flight while kubelet already wrote the files.
  // Drift is an accusation that leads to a restart, so before it stands, every source behind a
  // drifted target is read again with a quorum GET (controller-runtime re-reads state before it
  // acts, for the same reason), and the pass is decided again on that:
  //  (a) a source the GET returns as the cache has it: the cache was right, drift stands;
  //  (b) a source that differs: the cache was stale; it takes the fresh state and its watch
  //      relists, so the view is whole again;
  //  (c) a source the GET cannot read (the API unreachable, too slow, refused): not evidence,
  //      so its targets are Unknown for this pass and nothing acts on them.
  async function confirmView(pass: PassResult, now: number): Promise<PassResult> {
    const drifted = new Set(pass.verdicts.filter(isDrift).map((v) => v.target));
    if (drifted.size === 0) return pass;
    const [{ corrected, unconfirmed }, restarted] = await Promise.all([
      reRead(referencedSources(rt.targets.filter((t) => drifted.has(targetId(t))))),
      refreshStarts(),
    ]);
    // (a)
    if (!corrected && !restarted && unconfirmed.size === 0) return pass;
    return runPass((ref) => unconfirmed.get(refKey(ref)) ?? lookup(ref), now);
  }

  /** (b) and (c) for `refs`: corrects the cache where it was stale; returns what could not be read. */
  async function reRead(
    refs: readonly SourceRef[],
  ): Promise<{ corrected: boolean; unconfirmed: Map<string, SourceState> }> {
    const fresh = await Promise.all(refs.map((ref) => readSource(rt.client, rt.namespace, ref)));
    const unconfirmed = new Map<string, SourceState>();
    let corrected = false;
    refs.forEach((ref, i) => {
      const key = refKey(ref);
      const state = fresh[i] as SourceState;
      if (state.state === 'unreadable') {
        // (c)
        unconfirmed.set(key, {
          ...state,
          reason: `could not confirm the cached copy with a fresh read before acting: ${state.reason}`,
        });
      } else if (!sameView(sources.get(key), state)) {
        // (b)
        log.info(
          { source: key, cached: viewVersion(sources.get(key)), api: viewVersion(state) },
          'the cached copy was stale: a fresh read corrected it, relisting',
        );
        metrics.staleViews.inc({ kind: ref.kind });
        sources.set(key, state);
        watches.get(key)?.resync();
        corrected = true;
      }
    });
    return { corrected, unconfirmed };
  }

  // (d) An app container that restarted since the agent last read its Pod holds the config of
  // its restart for env and subPath targets (container-view.ts): the Pod's status is read again
  // with the sources, and a changed start is decided again too. Returns whether one changed.
  async function refreshStarts(): Promise<boolean> {
    if (!podRef) return false;
    try {
      const pod = await rt.client.get<V1Pod>({
        resource: 'pods',
        namespace: rt.namespace,
        name: podRef.name,
      });
      const fresh = containerStarts(pod, agentStartedAt);
      const changed = JSON.stringify(fresh.byContainer) !== JSON.stringify(starts.byContainer);
      starts = fresh;
      return changed;
    } catch {
      return false; // the sources' re-read says what the API cannot answer
    }
  }

  function runPass(view: SourceLookup, now: number): PassResult {
    return verifyPass({
      starts,
      targets: rt.targets,
      lookup: view,
      readVolume,
      agentPath: rt.agentPath,
      envBaselines,
      memory,
      policy: rt.verifyPolicy,
      now,
    });
  }

  async function reconcile(): Promise<number | undefined> {
    const now = clock();
    const t0 = performance.now();
    // (1) The duration metric is the local pass (read, hash, decide), not the API's answer time.
    const first = runPass(lookup, now);
    if (rt.reload) {
      const hash = configHash(lookup, rt.sources);
      reload = seeConfig(reload, hash, now);
    }
    metrics.duration.observe((performance.now() - t0) / 1000);
    const pass = await confirmView(first, now);
    memory = pass.memory;
    const drifted = pass.verdicts.filter(isDrift);
    // A source counts as mismatched in this pass when any target that reads it drifted.
    const driftedTargets = new Set(drifted.map((v) => v.target));
    const driftedSources = new Set(
      rt.targets.filter((t) => driftedTargets.has(targetId(t))).flatMap((t) => targetSources(t).map(refKey)),
    );
    for (const ref of rt.sources) {
      const labels = { namespace: rt.namespace, kind: ref.kind, name: ref.name };
      metrics.checks.inc(labels);
      if (driftedSources.has(refKey(ref))) metrics.mismatches.inc(labels);
    }
    const allInSync = pass.verdicts.every((v) => v.state === 'InSync');
    metrics.inSync.set(allInSync ? 1 : 0);
    if (allInSync) {
      metrics.lastSuccess.set(now / 1000);
      lastActionKey = '';
    }

    // Env targets start from what the container saw: record it once, on the Pod, so a restarted
    // agent keeps the same baseline.
    const missingBaselines = Object.entries(pass.envDigests).filter(([id]) => envBaselines[id] === undefined);
    if (missingBaselines.length > 0 && podRef) {
      envBaselines = { ...envBaselines, ...Object.fromEntries(missingBaselines) };
      try {
        await annotatePod(rt.client, rt.namespace, podRef.name, {
          [ANNOTATION.envBaseline]: writeEnvBaselines(envBaselines, rt.digestKeyId),
        });
        log.info({ targets: missingBaselines.map(([id]) => id) }, 'recorded env baselines');
      } catch (error) {
        log.warn({ code: (error as { code?: string }).code }, (error as Error).message);
      }
    }

    // (2)
    const { news, told } = verdictNews(lastVerdict, pass.verdicts);
    lastVerdict = told;
    for (const { verdict: v, level, event: drifted } of news) {
      log[level]({ target: v.target, state: v.state, reason: v.reason, mismatches: v.mismatches }, v.message);
      if (drifted) await event('Drifted', drifted, 'Warning');
    }
    for (const v of pass.verdicts) {
      if (v.propagationSeconds !== undefined) {
        metrics.propagation.observe(v.propagationSeconds);
        log.info({ target: v.target, propagationSeconds: v.propagationSeconds }, 'propagated');
      }
    }

    if (reload.confirming !== undefined) {
      const still = allInSync && configHash(lookup, rt.sources) === reload.confirming;
      const shown = configVersion(lookup, rt.sources);
      if (still)
        log.info(
          { configHash: shown },
          'reload confirmed: the files still match what the app was told to load',
        );
      else
        log.warn({ configHash: shown }, 'the files changed while the app reloaded: following the new change');
      reload = { ...reload, confirming: undefined };
    }
    let retryAt: number | undefined;
    if (drifted.length > 0) ({ retryAt } = await act(pass.verdicts, now));
    if (rt.reload && allInSync) ({ retryAt } = await reloadIfChanged(rt.reload, pass.verdicts, now));
    await writeStatus(pass.verdicts, now);
    ready = true;
    lastPassAt = clock();

    // (5)
    const deadlines = pass.verdicts.map((v) => v.deadline).filter((d): d is number => d !== undefined);
    if (retryAt !== undefined) deadlines.push(retryAt);
    return deadlines.length ? Math.min(...deadlines) : undefined;
  }

  const done = (async () => {
    const tasks: Promise<void>[] = [];
    for (const ref of rt.sources) {
      const watch = new SourceWatch(
        rt.client,
        rt.namespace,
        ref,
        {
          onState: (state) => {
            sources.set(refKey(ref), state);
            wakeup.wake();
          },
          onRestart: (reason, detail) => {
            metrics.apiWatchRestarts.inc({ kind: ref.kind, reason });
            if (reason !== 'closed')
              log.warn({ source: refKey(ref), reason, detail }, 'API watch restarting');
          },
        },
        clock,
      );
      watches.set(refKey(ref), watch);
      tasks.push(
        watch.start(signal).catch((error) => log.error({ source: refKey(ref) }, (error as Error).message)),
      );
    }
    const paths = rt.targets.flatMap((t) => (t.type === 'volume' ? [rt.agentPath(t.mountPath)] : []));
    if (paths.length > 0) {
      tasks.push(
        watchFiles(
          {
            paths,
            intervalMs: options.pollMs,
            onChange: () => wakeup.wake(),
            onPollingOnly: (error) => {
              metrics.filePolling.set(1);
              log.warn({ err: error.message }, 'inotify refused: watching files by polling only');
            },
          },
          signal,
        ),
      );
    }

    // The first pass waits (briefly) for every source's initial list, so it compares against
    // the API rather than reporting Unknown for what simply has not arrived yet.
    const started = clock();
    while (!signal.aborted && sources.size < rt.sources.length && clock() - started < 30_000) {
      await wakeup.sleep(1000, signal);
    }
    while (!signal.aborted) {
      let next: number | undefined;
      try {
        next = await reconcile();
      } catch (error) {
        log.error({ err: (error as Error).message }, 'reconcile failed');
      }
      const until = next === undefined ? options.resyncMs : Math.min(options.resyncMs, next - clock() + 10);
      await wakeup.sleep(until, signal);
    }
    await Promise.all(tasks);
  })();

  return {
    ready: () => ready,
    live: () => clock() - lastPassAt < options.resyncMs * 3 + 30_000,
    done,
  };
}
