// The reconciler of one Pod: what the sidecar runs for its own Pod and the node agent runs for
// each Pod it serves. Events only wake its loop (pod-loop.ts); each pass re-reads the actual
// state and decides from scratch (level-based, as controller-runtime's reconcilers do). Its
// parts each keep their own state, backoff and deadline: the Event outbox (event-outbox.ts),
// the status writer (status-writer.ts), the heal actor (heal-actor.ts), the container-starts
// tracker (container-starts.ts), reload mode's controller (reload-controller.ts).
//
// A pass (reconcile), step by step:
//  (1) verify every target against the cached API state (a drift is called past its window
//      plus this Pod's spread, heal/spread.ts); where that finds drift, confirm the sources
//      behind it with a quorum read, read the Pod's container starts again where a drifted
//      target depends on them, and decide again on that (confirm-drift.ts); record the pass's
//      metrics and any new start baseline (baseline-recorder.ts);
//  (2) in reload mode, once all is in sync, tell the app (first: it is what the user waits for);
//  (3) log each verdict that changed, and the propagation time of what just caught up;
//  (4) if anything drifted, act (heal-actor.ts) with the owner read beside the confirmation;
//      in reload mode, wait for the app's answer; then send the Drifted Events, unless a
//      sibling's restart already heals the drift (its Pod's Events tell the story, once);
//  (4b) on the first pass, an InvalidAnnotation Event for each annotation value that cannot be
//      read: the Pod is never restarted until it is fixed, and its owner must learn why;
//  (5) write the InSync condition and last-config-sync if due (status-writer.ts);
//  (6) read the Pod again for a container start still pending; send again the Events whose
//      create failed, once their backoff is over;
//  (7) return the earliest deadline (a grace window, a retry, that read) for the loop's sleep.
import type { Logger } from 'pino';
import type { OwnerReadOptions } from '../heal/owner.ts';
import type { OwnerState } from '../heal/planner.ts';
import { restartSpreadMs } from '../heal/spread.ts';
import type { SourceLookup } from '../verify/expected.ts';
import type { TargetMemory } from '../verify/verdict.ts';
import type { Confirmation } from '../watch/confirm-sources.ts';
import { BaselineRecorder } from './baseline-recorder.ts';
import { confirmDrift } from './confirm-drift.ts';
import { ContainerStartsTracker } from './container-starts.ts';
import { EventOutbox } from './event-outbox.ts';
import { HealActor, type HealOutcome } from './heal-actor.ts';
import { isDrift, type PassResult, type VolumeReader, verifyPass } from './pass.ts';
import { countPass, type PodMetrics } from './pod-metrics.ts';
import { reloadController } from './reload-controller.ts';
import { podReader, type Runtime } from './runtime.ts';
import { matchedVersions, StatusWriter } from './status-writer.ts';
import { verdictNews } from './verdict-changes.ts';

/** How soon a drift whose sources could not be confirmed (the API did not answer) is tried again. */
const CONFIRM_RETRY_MS = 5_000;

/** The API's view of the Pod's sources: a watch cache, and its quorum read before acting. */
export interface SourceView {
  readonly lookup: SourceLookup;
  confirm(refs: Parameters<SourceLookup>[0][]): Promise<Confirmation>;
}

export interface ReconcilerDeps {
  readonly rt: Runtime;
  readonly view: SourceView;
  readonly readVolume: VolumeReader;
  readonly metrics: PodMetrics;
  readonly log: Logger;
  readonly clock: () => number;
  readonly heartbeatMs: number;
  /** When the agent began serving this Pod (its process's start, for the sidecar). */
  readonly startedAt: number;
  /** The owning workload as the API has it now (heal/owner.ts, ownerResolver). */
  readonly currentOwner: (options?: OwnerReadOptions) => Promise<OwnerState>;
  /** Run the pass again at once. */
  readonly wake: () => void;
  readonly signal: AbortSignal;
}

export interface Reconciler {
  /** One pass; returns the earliest time it wants to run again, if any. */
  reconcile(): Promise<number | undefined>;
  /** Whether a pass has completed. */
  ready(): boolean;
}

export function createReconciler(deps: ReconcilerDeps): Reconciler {
  const { rt, view, log, metrics, clock } = deps;
  const { lookup } = view;
  const podName = rt.pod?.metadata?.name;
  const podRef = podName
    ? { name: podName, namespace: rt.namespace, uid: rt.pod?.metadata?.uid ?? '' }
    : undefined;
  let memory = new Map<string, TargetMemory>();
  let lastTold = new Map<string, string>();
  // Drifted Events told by a pass but not sent yet: they wait for the heal's outcome (step 4).
  let unsentDrift: string[] = [];
  // A decision that restarts races this Pod's siblings; alert-only mode restarts nothing.
  const windows = {
    ...rt.config.verify,
    spreadMs: rt.config.heal.mode === 'alert-only' ? 0 : restartSpreadMs(podRef?.uid),
  };
  let ready = false;

  const readPod = podReader(rt);

  const events = new EventOutbox({ client: rt.client, pod: podRef, log, clock });
  const status = new StatusWriter({
    client: rt.client,
    namespace: rt.namespace,
    pod: podName,
    heartbeatMs: deps.heartbeatMs,
    log,
    clock,
  });
  const starts = new ContainerStartsTracker({
    pod: rt.pod,
    targets: rt.targets,
    agentStartedAt: deps.startedAt,
    heartbeatMs: deps.heartbeatMs,
    clock,
    ...(rt.seesAppMounts ? { seesAppMounts: true } : {}),
  });
  const baselines = new BaselineRecorder({ rt, log });
  const healer = new HealActor({
    rt,
    lookup,
    events,
    metrics,
    log,
    clock,
    currentOwner: deps.currentOwner,
    readPod,
    wake: deps.wake,
    signal: deps.signal,
  });
  const reload = rt.config.reload
    ? reloadController({
        config: rt.config.reload,
        targets: rt.targets,
        sources: rt.sources,
        volumePath: rt.volumePath,
        lookup,
        starts: () => starts.starts,
        confirm: (refs) => view.confirm([...refs]),
        act: (verdicts, now) => healer.act(verdicts, now),
        wake: deps.wake,
        event: (reason, message, type) => events.emit(reason, message, type),
        metrics,
        log,
        signal: deps.signal,
      })
    : undefined;

  function runPass(sources: SourceLookup, now: number): PassResult {
    return verifyPass({
      starts: starts.starts,
      targets: rt.targets,
      lookup: sources,
      readVolume: deps.readVolume,
      volumePath: rt.volumePath,
      baselines: baselines.current(),
      memory,
      windows,
      fingerprint: rt.fingerprint,
      now,
      ...(rt.seesAppMounts ? { seesAppMounts: true } : {}),
    });
  }

  const confirmView = (pass: PassResult, now: number, seen: readonly unknown[]) =>
    confirmDrift({ rt, view, currentOwner: deps.currentOwner, readPod, starts, runPass }, pass, now, seen);

  async function reconcile(): Promise<number | undefined> {
    const now = clock();
    // (1) The duration metric is the local pass (read, hash, decide), not the API's answer time.
    const t0 = performance.now();
    const seen = rt.sources.map(lookup);
    const first = runPass(lookup, now);
    reload?.see(now);
    metrics.duration.observe((performance.now() - t0) / 1000);
    const { pass, owner, pod, unconfirmed } = await confirmView(first, now, seen);
    memory = pass.memory;
    const drifted = pass.verdicts.filter(isDrift);
    const allInSync = pass.verdicts.every((v) => v.state === 'InSync');
    countPass(metrics, rt, pass, allInSync, now);
    if (allInSync) healer.settled();
    await baselines.record(pass);

    // (2) In reload mode, a pass in sync asks the app to reload before it logs its verdicts: the
    // reload is what the user waits for, and the log lines before it were 0.1 to 0.2 ms of the
    // swap -> POST time at the median and up to 2.5 ms at p99 (writes to stdout, measured). The
    // request is on its way once afterInSync's synchronous part has run; its answer is awaited
    // below, so the "reloaded" line still follows the verdicts'.
    reload?.confirmLast(allInSync);
    const reloading = reload && allInSync ? reload.afterInSync(pass.verdicts, now) : undefined;

    // (3)
    const { news, told } = verdictNews(lastTold, pass.verdicts);
    lastTold = told;
    for (const { verdict: v, level, event } of news) {
      log[level]({ target: v.target, state: v.state, reason: v.reason, mismatches: v.mismatches }, v.message);
      if (event) unsentDrift.push(event);
    }
    for (const v of pass.verdicts) {
      if (v.propagationSeconds !== undefined) {
        metrics.propagation.observe(v.propagationSeconds);
        log.info({ target: v.target, propagationSeconds: v.propagationSeconds }, 'propagated');
      }
    }

    // (4) The Drifted Events wait for the heal's outcome, not the restart for them. Where a
    // sibling's restart heals this drift, this Pod sends none: with 50 replicas, 50 Drifted and
    // 49 Deduped Events were 100 of the drift's 500 requests, and told nothing the restarting
    // Pod's Drifted and Healed do not (each Pod's InSync condition and log still say it). A
    // conflict plans again at once: its Events wait for that plan.
    let retryAt: number | undefined;
    let outcome: HealOutcome = {};
    if (drifted.length > 0) outcome = await healer.act(pass.verdicts, now, owner, pod);
    ({ retryAt } = outcome);
    if (reloading) ({ retryAt } = await reloading);
    if (!outcome.conflict) {
      const drift = unsentDrift;
      unsentDrift = [];
      if (!outcome.siblingRestarted)
        await Promise.all(drift.map((message) => events.emit('Drifted', message, 'Warning')));
    }
    // (4b) config/pod-annotations.ts
    for (const problem of ready ? [] : rt.annotationProblems) {
      log.warn({ annotation: true }, problem);
      await events.emit('InvalidAnnotation', `${problem}; until fixed, no restart`, 'Warning');
    }
    // (5)
    await status.write(pass.verdicts, matchedVersions(rt.sources, lookup), now, healer.note());
    ready = true;

    // (6)
    if (await starts.readWhenDue(clock(), readPod)) deps.wake();
    await events.sendUnsent(clock());

    // (7) A drift the API could not confirm is asked about again soon, not at the next resync:
    // the read that failed was one request, and the drift behind it may be real. So are a status
    // write and Events that failed.
    const deadlines = [
      ...pass.verdicts.map((v) => v.deadline),
      retryAt,
      unconfirmed ? clock() + CONFIRM_RETRY_MS : undefined,
      status.deadline(),
      events.deadline(),
      starts.deadline(),
    ].filter((d): d is number => d !== undefined);
    return deadlines.length ? Math.min(...deadlines) : undefined;
  }

  return { reconcile, ready: () => ready };
}
