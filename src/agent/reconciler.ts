// The reconciler of one Pod: what the sidecar runs for its own Pod and the node agent runs for
// each Pod it serves. Events only wake its loop (pod-loop.ts); each pass re-reads the actual
// state and decides from scratch (level-based, as controller-runtime's reconcilers do). Its
// parts each keep their own state, backoff and deadline: the Event outbox (event-outbox.ts),
// the status writer (status-writer.ts), the heal actor (heal-actor.ts), the container-starts
// tracker (container-starts.ts), reload mode's controller (reload-controller.ts).
//
// A pass (reconcile), step by step:
//  (1) verify every target against the cached API state; where that finds drift, confirm the
//      sources behind it with a quorum read, read the Pod's container starts again where a
//      drifted target depends on them, and decide again on that (confirmView); record the
//      pass's metrics and any new start baseline (baseline-recorder.ts);
//  (2) in reload mode, once all is in sync, tell the app (first: it is what the user waits for);
//  (3) log each verdict that changed, and the propagation time of what just caught up;
//  (4) if anything drifted, act (heal-actor.ts) with the owner and Pod read beside the
//      confirmation; in reload mode, wait for the app's answer;
//  (5) write the InSync condition and last-config-sync if due (status-writer.ts);
//  (6) read the Pod again for a container start still pending; send again the Events whose
//      create failed, once their backoff is over;
//  (7) return the earliest deadline (a grace window, a retry, that read) for the loop's sleep.
import type { Logger } from 'pino';
import { referencedSources } from '../discover/targets.ts';
import type { OwnerState } from '../heal/planner.ts';
import type { SourceLookup } from '../verify/expected.ts';
import { refKey } from '../verify/source.ts';
import { type TargetMemory, targetId } from '../verify/verdict.ts';
import type { Confirmation } from '../watch/source-cache.ts';
import { BaselineRecorder } from './baseline-recorder.ts';
import { ContainerStartsTracker } from './container-starts.ts';
import { EventOutbox } from './event-outbox.ts';
import { HealActor } from './heal-actor.ts';
import { isDrift, type PassResult, readsContainerStarts, type VolumeReader, verifyPass } from './pass.ts';
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
  readonly currentOwner: () => Promise<OwnerState>;
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
      windows: rt.config.verify,
      fingerprint: rt.fingerprint,
      now,
      ...(rt.seesAppMounts ? { seesAppMounts: true } : {}),
    });
  }

  // (1) Drift is an accusation that leads to a restart, so before it stands, every source behind
  // a drifted target is confirmed with a quorum read (which corrects a stale copy), the Pod's
  // container starts are read again where a drifted target depends on them (env and subPath
  // targets), and the pass is decided again on that. A source the API could not confirm is
  // Unknown for this pass. The owning workload and the Pod are read at the same time: if the
  // drift stands, the plan needs both, and reading them after the confirmation was one more
  // round trip before the restart.
  // `seen`: the states the pass used. A view shared with other Pods (the node agent's) may be
  // corrected by another Pod's confirmation first, and this one then corrects nothing: so decide
  // again whenever a state used was replaced since (a false restart on the stale pass, before).
  async function confirmView(pass: PassResult, now: number, seen: readonly unknown[]) {
    const drifted = new Set(pass.verdicts.filter(isDrift).map((v) => v.target));
    if (drifted.size === 0) return { pass };
    const driftedTargets = rt.targets.filter((t) => drifted.has(targetId(t)));
    const owner = deps.currentOwner();
    owner.catch(() => {}); // act() reports a failed read; unawaited when the drift goes away
    const pod = readPod();
    const [{ corrected, unconfirmed }, restarted] = await Promise.all([
      view.confirm(referencedSources(driftedTargets)),
      driftedTargets.some((t) => readsContainerStarts(t, rt.seesAppMounts))
        ? pod.then((p) => starts.refresh(p))
        : false,
    ]);
    const replaced = rt.sources.some((ref, i) => lookup(ref) !== seen[i]);
    if (!corrected && !replaced && !restarted && unconfirmed.size === 0) return { pass, owner, pod };
    return {
      pass: runPass((ref) => unconfirmed.get(refKey(ref)) ?? lookup(ref), now),
      owner,
      pod,
      unconfirmed: unconfirmed.size > 0,
    };
  }

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

    // (3) The Drifted Events are sent without holding the restart back; the pass waits for them
    // before it ends.
    const { news, told } = verdictNews(lastTold, pass.verdicts);
    lastTold = told;
    const driftEvents: Promise<void>[] = [];
    for (const { verdict: v, level, event } of news) {
      log[level]({ target: v.target, state: v.state, reason: v.reason, mismatches: v.mismatches }, v.message);
      if (event) driftEvents.push(events.emit('Drifted', event, 'Warning'));
    }
    for (const v of pass.verdicts) {
      if (v.propagationSeconds !== undefined) {
        metrics.propagation.observe(v.propagationSeconds);
        log.info({ target: v.target, propagationSeconds: v.propagationSeconds }, 'propagated');
      }
    }

    // (4)
    let retryAt: number | undefined;
    if (drifted.length > 0) ({ retryAt } = await healer.act(pass.verdicts, now, owner, pod));
    if (reloading) ({ retryAt } = await reloading);
    await Promise.all(driftEvents);
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
