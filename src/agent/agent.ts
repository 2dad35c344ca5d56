// The long-running agent: the reconciler, wired to its parts in controller-runtime's shape.
//  - the source cache (watch/source-cache.ts): one API watch per source, the initial sync wait,
//    lookup, and the quorum re-read before acting;
//  - the file watch (watch/file-watch.ts): inotify plus a stat poll of the mounts;
//  - the loop (loop.ts): events only wake it; each pass re-reads the actual state and decides
//    from scratch (level-based), then it sleeps;
//  - pure decisions, each with unit tests of its own: the verdicts (verify/), which of them are
//    news (verdict-changes.ts), the plan and how it is told (heal/planner.ts, heal/report.ts),
//    the status write (status/condition.ts), reload mode's state (heal/reload-state.ts, performed
//    by reload-controller.ts), the start baselines to record (start-baselines.ts).
//
// A pass (reconcile), step by step:
//  (1) verify every target against the cached API state (verifyPass); where that finds drift,
//      confirm the sources behind it with a quorum read first and decide again on what the
//      API says now (confirmView); record metrics and any new start baseline;
//  (2) in reload mode, once all is in sync, tell the app (first: it is what the user waits for);
//  (3) log each verdict that changed, and the propagation time of what just caught up;
//  (4) if anything drifted: find the owner and read the Pod again (one being deleted never
//      restarts), plan, and act once per distinct plan (restart, dedupe or alert), with an
//      Event on the Pod; a 409 wakes the loop to re-plan at once; a heal that failed (a read
//      or the patch refused or unanswered, the policy server unable to decide) is tried again
//      after a backoff of 5 s doubling to 5 min (agent/retry.ts), not at the next --resync;
//      in reload mode, wait for the app's answer;
//  (5) write the InSync condition and last-config-sync on a transition or at the heartbeat (a
//      write that failed is tried again after the same backoff as a heal);
//  (6) until every app container with an env or subPath target shows its start, read the Pod
//      again now and then (the start ties each baseline to the container it stands for); send
//      again the Events whose create failed, once their backoff is over;
//  (7) return the earliest deadline (a grace window, a retry, that read) for the loop's sleep.
import type { V1Pod } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { LoopConfig } from '../config/agent-config.ts';
import { referencedSources, targetSources } from '../discover/targets.ts';
import { type EventReason, emitEvent, eventName, type PodRef, restartWorkload } from '../heal/executor.ts';
import { ownerResolver } from '../heal/owner.ts';
import type { OwnerState, Plan } from '../heal/planner.ts';
import {
  actionKey,
  conditionNote,
  type HealReport,
  planReport,
  type RestartOutcome,
  restartReport,
} from '../heal/report.ts';
import { ANNOTATION } from '../kube/annotations.ts';
import type { AgentMetrics } from '../metrics/metrics.ts';
import { PayloadDigests } from '../read/payload-digests.ts';
import { volumeReader } from '../read/volume.ts';
import { statusToWrite, type WrittenStatus } from '../status/condition.ts';
import { annotatePod, writePodStatus } from '../status/pod-status.ts';
import type { SourceLookup } from '../verify/expected.ts';
import { refKey } from '../verify/source.ts';
import { type TargetMemory, targetId, type Verdict } from '../verify/verdict.ts';
import { watchFiles } from '../watch/file-watch.ts';
import { SourceCache } from '../watch/source-cache.ts';
import { VolumeEntries } from '../watch/volume-entries.ts';
import { runLoop, Wakeup } from './loop.ts';
import { containerStarts, isDrift, type PassResult, readsContainerStarts, verifyPass } from './pass.ts';
import { planFor } from './pod-plan.ts';
import { gateRestart } from './policy-gate.ts';
import { type HealOutcome, reloadController } from './reload-controller.ts';
import { Backoff } from './retry.ts';
import type { Runtime } from './runtime.ts';
import {
  baselinesToRecord,
  type StartBaseline,
  startsReadDelay,
  writeStartBaselines,
} from './start-baselines.ts';
import { verdictNews } from './verdict-changes.ts';

/** How soon a drift whose sources could not be confirmed (the API did not answer) is tried again. */
const CONFIRM_RETRY_MS = 5_000;
/** How many Events whose create failed wait to be sent again (sendUnsentEvents). */
const MAX_UNSENT_EVENTS = 20;

/** An Event to send: named and timed when it happened, whenever it is sent. */
interface PendingEvent {
  readonly reason: EventReason;
  readonly message: string;
  readonly type: 'Normal' | 'Warning';
  readonly at: Date;
  readonly name: string;
}

export interface AgentDeps {
  readonly rt: Runtime;
  readonly log: Logger;
  readonly metrics: AgentMetrics;
  readonly options: Pick<LoopConfig, 'resyncMs' | 'pollMs' | 'heartbeatMs'>;
  readonly clock?: () => number;
}

export interface AgentHandle {
  ready(): boolean;
  live(): boolean;
  done: Promise<void>;
}

export function startAgent(deps: AgentDeps, signal: AbortSignal): AgentHandle {
  const { rt, log, metrics, options } = deps;
  const clock = deps.clock ?? Date.now;
  const wakeup = new Wakeup();
  const cache = new SourceCache(
    rt.client,
    rt.namespace,
    rt.sources,
    {
      onChange: () => wakeup.wake(),
      onRestart: (ref, reason, detail) => {
        metrics.apiWatchRestarts.inc({ kind: ref.kind, reason });
        if (reason !== 'closed') log.warn({ source: refKey(ref), reason, detail }, 'API watch restarting');
      },
      onStale: (ref, cached, api) => {
        log.info(
          { source: refKey(ref), cached, api },
          'the cached copy was stale: a fresh read corrected it, relisting',
        );
        metrics.staleViews.inc({ kind: ref.kind });
      },
    },
    clock,
  );
  const lookup = cache.lookup;
  const currentOwner = ownerResolver(rt.client, rt.namespace, rt.pod);
  let memory = new Map<string, TargetMemory>();
  // Every pass reads every mount; an unchanged file is not hashed again, a volume directory
  // whose own entries the file watch saw no event for is not listed again (volumeReader), and
  // the files of a kubelet update are hashed while kubelet writes them, before its swap.
  const volumeEntries = new VolumeEntries();
  let watchTrustedSince = clock();
  const payloadDigests = new PayloadDigests();
  const readVolume = volumeReader(Date.now, volumeEntries.version, payloadDigests.take);
  let baselines: Record<string, StartBaseline> = { ...rt.baselines };
  let ready = false;
  let lastPassAt = clock();
  let lastVerdict = new Map<string, string>();
  let lastActionKey = '';
  let status: WrittenStatus | undefined;
  /** Why the last plan did not restart, where an operator must act: into the condition's message. */
  let refusalNote: string | undefined;
  // When the containers started: for env and subPath targets, the app's start decides what it
  // holds when it and the agent did not start together (container-view.ts).
  const agentStartedAt = Date.now() - process.uptime() * 1000;
  let starts = containerStarts(rt.pod, agentStartedAt);
  let startsReads = 0;
  let startsReadAt = clock() + 1000;
  const podRef: PodRef | undefined = rt.pod?.metadata?.name
    ? { name: rt.pod.metadata.name, namespace: rt.namespace, uid: rt.pod.metadata.uid ?? '' }
    : undefined;

  // An Event whose create failed (the API refused or did not answer) is kept and sent again
  // after the backoff (retry.ts), at the end of a pass, so that it never holds a restart back:
  // a Healed or HealFailed Event is how an operator learns why a workload restarted or did not.
  // It keeps its name and time; one made after all by a try whose answer was lost is a 409, and
  // counts as sent. At most MAX_UNSENT_EVENTS wait; beyond that the oldest are dropped.
  const unsentEvents: PendingEvent[] = [];
  const eventBackoff = new Backoff();
  let eventRetryAt: number | undefined;

  async function sendEvent(e: PendingEvent): Promise<boolean> {
    if (!podRef) return true;
    try {
      await emitEvent(rt.client, podRef, e.reason, e.message, e.type, e.at, e.name);
      eventBackoff.succeeded();
      return true;
    } catch (error) {
      const { delayMs, retryInSeconds } = eventBackoff.failed();
      eventRetryAt = clock() + delayMs;
      if (!unsentEvents.includes(e)) {
        unsentEvents.push(e);
        if (unsentEvents.length > MAX_UNSENT_EVENTS) unsentEvents.shift();
      }
      log.warn(
        {
          err: { code: (error as { code?: string }).code, message: (error as Error).message },
          event: e.reason,
          retryInSeconds,
        },
        'could not emit Event: sending it again',
      );
      return false;
    }
  }

  const event = async (reason: EventReason, message: string, type: 'Normal' | 'Warning') => {
    if (!podRef) return;
    const at = new Date(clock());
    await sendEvent({ reason, message, type, at, name: eventName(podRef.name, at) });
  };

  /** The Events that failed, oldest first, once their backoff is over; stops at the first failure. */
  async function sendUnsentEvents(now: number): Promise<void> {
    if (unsentEvents.length === 0 || (eventRetryAt !== undefined && now < eventRetryAt)) return;
    for (const e of [...unsentEvents]) {
      if (!(await sendEvent(e))) return;
      // Sent; it may have been dropped meanwhile, when other Events failed past the limit.
      const at = unsentEvents.indexOf(e);
      if (at >= 0) unsentEvents.splice(at, 1);
    }
  }

  /** Performs a heal report (heal/report.ts): the metric, the log line, the Event. */
  async function tell(report: HealReport): Promise<void> {
    metrics.heals.inc(report.metric);
    log[report.log.level](report.log.fields, report.log.msg);
    if (report.event) await event(report.event.reason, report.event.message, report.event.type);
  }

  /** Failed heals in a row: how long the wait before the next try is (retry.ts). */
  const healBackoff = new Backoff();
  /**
   * A heal that failed (a read it needed, the restart patch, or the policy server's answer): the
   * pass is run again after a backoff rather than at the next --resync, and `failed` tells the
   * reload fallback that it is still owed.
   */
  function healFailed(): HealOutcome {
    const { failures, delayMs, retryInSeconds } = healBackoff.failed();
    log.info({ failures, retryInSeconds }, 'the heal failed: trying again');
    return { failed: true, retryAt: clock() + delayMs };
  }

  // (3) `owner` and `pod`: the workload and the agent's own Pod as read beside the sources'
  // confirmation (confirmView), so the restart waits for one round trip fewer; read here when
  // the caller has none. The Pod is read again because a deletion comes long after the start,
  // and a Pod being deleted does not restart its workload (planner step 3b).
  async function act(
    verdicts: readonly Verdict[],
    now: number,
    owner?: Promise<OwnerState>,
    pod?: Promise<V1Pod | undefined>,
  ): Promise<HealOutcome> {
    let plan: Plan;
    try {
      const [ownerState, ownPod] = await Promise.all([owner ?? currentOwner(), pod ?? readOwnPod()]);
      plan = await gateRestart(
        rt,
        planFor(rt, verdicts, ownerState, lookup, now, ownPod ?? rt.pod),
        ownerState,
        lookup,
        now,
        signal,
      );
      refusalNote = conditionNote(plan);
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
      return healFailed();
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
        return { conflict: true };
      }
      lastActionKey = key;
      if (outcome.type === 'failed') return healFailed();
      healBackoff.succeeded();
      return {};
    }
    const report = planReport(plan, repeated);
    lastActionKey = key;
    if (report) await tell(report);
    if (plan.undecided) return healFailed();
    healBackoff.succeeded();
    return plan.retryAt === undefined ? {} : { retryAt: plan.retryAt };
  }

  // (3b)
  const reload = rt.config.reload
    ? reloadController({
        config: rt.config.reload,
        targets: rt.targets,
        sources: rt.sources,
        agentPath: rt.agentPath,
        lookup,
        starts: () => starts,
        confirm: (refs) => cache.confirm(refs),
        act: (verdicts, now) => act(verdicts, now),
        wake: () => wakeup.wake(),
        event,
        metrics,
        log,
        signal,
      })
    : undefined;

  /** Failed status writes in a row, and when to write again (retry.ts): not at the next resync. */
  const statusBackoff = new Backoff();
  let statusRetryAt: number | undefined;
  // (4)
  async function writeStatus(verdicts: readonly Verdict[], now: number): Promise<void> {
    statusRetryAt = undefined;
    if (!podRef) return;
    const versions = rt.sources
      .map((ref) => {
        const s = lookup(ref);
        return s?.state === 'present' ? `${refKey(ref)}@${s.snapshot.resourceVersion}` : undefined;
      })
      .filter(Boolean)
      .join(',');
    const write = statusToWrite(verdicts, versions, status, now, options.heartbeatMs, refusalNote);
    if (!write) return;
    try {
      await writePodStatus(rt.client, rt.namespace, podRef.name, write.update);
      status = write.written;
      statusBackoff.succeeded();
    } catch (error) {
      // Unwritten, the condition says what the last write said (a readiness gate acts on it):
      // the pass runs again after a backoff, and writes whatever is due then.
      const { delayMs, retryInSeconds } = statusBackoff.failed();
      statusRetryAt = clock() + delayMs;
      log.warn(
        {
          code: (error as { code?: string }).code,
          hint: (error as { hint?: string }).hint,
          retryInSeconds,
        },
        (error as Error).message,
      );
    }
  }

  // (1) Drift is an accusation that leads to a restart, so before it stands, every source behind
  // a drifted target is confirmed with a quorum read (the source cache's confirm(), which
  // corrects a stale copy), the Pod's container starts are read again where a drifted target
  // depends on them (d: env and subPath targets), and the pass is decided again on that. A
  // source the API could not confirm is Unknown for this pass.
  // The owning workload and the agent's own Pod are read at the same time: if the drift stands,
  // the plan needs both, and reading them after the confirmation was one more round trip before
  // the restart.
  async function confirmView(
    pass: PassResult,
    now: number,
  ): Promise<{
    pass: PassResult;
    owner?: Promise<OwnerState>;
    pod?: Promise<V1Pod | undefined>;
    unconfirmed?: boolean;
  }> {
    const drifted = new Set(pass.verdicts.filter(isDrift).map((v) => v.target));
    if (drifted.size === 0) return { pass };
    const driftedTargets = rt.targets.filter((t) => drifted.has(targetId(t)));
    const owner = currentOwner();
    owner.catch(() => {}); // act() reports a failed read; unawaited when the drift goes away
    const pod = readOwnPod();
    const [{ corrected, unconfirmed }, restarted] = await Promise.all([
      cache.confirm(referencedSources(driftedTargets)),
      driftedTargets.some(readsContainerStarts) ? pod.then(refreshStarts) : false,
    ]);
    if (!corrected && !restarted && unconfirmed.size === 0) return { pass, owner, pod };
    return {
      pass: runPass((ref) => unconfirmed.get(refKey(ref)) ?? lookup(ref), now),
      owner,
      pod,
      unconfirmed: unconfirmed.size > 0,
    };
  }

  /** The agent's own Pod as the API has it now; undefined where it has no Pod or the read failed. */
  async function readOwnPod(): Promise<V1Pod | undefined> {
    if (!podRef) return undefined;
    try {
      return await rt.client.get<V1Pod>({ resource: 'pods', namespace: rt.namespace, name: podRef.name });
    } catch {
      // The sources' re-read says what the API cannot answer; the plan keeps the Pod as read at
      // the start, so a failed read holds back no restart it would have made before.
      return undefined;
    }
  }

  // (d) An app container that restarted since the agent last read its Pod holds the config of
  // its restart for env and subPath targets (container-view.ts): the Pod's status, as read with
  // the sources, decides them again where a start changed. Returns whether one changed.
  function refreshStarts(pod: V1Pod | undefined): boolean {
    if (!pod) return false;
    const fresh = containerStarts(pod, agentStartedAt);
    const changed = JSON.stringify(fresh.byContainer) !== JSON.stringify(starts.byContainer);
    starts = fresh;
    return changed;
  }

  function runPass(view: SourceLookup, now: number): PassResult {
    return verifyPass({
      starts,
      targets: rt.targets,
      lookup: view,
      readVolume,
      agentPath: rt.agentPath,
      baselines,
      memory,
      windows: rt.config.verify,
      fingerprint: rt.fingerprint,
      now,
    });
  }

  // (1) What each app container got at its start, for env and subPath targets: recorded on the
  // Pod with that start, so a restarted agent still knows what the app holds (start-baselines.ts).
  async function recordBaselines(pass: PassResult): Promise<void> {
    const record = baselinesToRecord(pass.baselines, baselines);
    if (Object.keys(record).length === 0 || !podRef) return;
    baselines = { ...baselines, ...record };
    try {
      await annotatePod(rt.client, rt.namespace, podRef.name, {
        [ANNOTATION.startBaselines]: writeStartBaselines(baselines, rt.digestKeyId),
      });
      log.info({ targets: Object.keys(record) }, 'recorded start baselines');
    } catch (error) {
      log.warn({ code: (error as { code?: string }).code }, (error as Error).message);
    }
  }

  // (6) Whether an app container that has an env or subPath target has shown no start yet: in
  // the native sidecar order, the agent's first passes come before its app runs.
  function startsPending(): boolean {
    return (
      podRef !== undefined &&
      rt.targets.some((t) => readsContainerStarts(t) && starts.byContainer[t.container] === undefined)
    );
  }

  async function readStartsWhenDue(now: number): Promise<void> {
    if (!startsPending() || now < startsReadAt) return;
    startsReads += 1;
    startsReadAt = now + startsReadDelay(startsReads, options.heartbeatMs);
    // A start that appeared decides env and subPath targets again, and lets their baselines be
    // recorded: one more pass, at once.
    if (refreshStarts(await readOwnPod())) wakeup.wake();
  }

  async function reconcile(): Promise<number | undefined> {
    const now = clock();
    // At least once every --resync a pass reads the volumes' own entries again, and stats or
    // reads the files of kubelet's current payload, rather than keep what the file watch said
    // was unchanged: an overflowed inotify queue loses events silently.
    if (now - watchTrustedSince >= options.resyncMs) {
      volumeEntries.distrust();
      payloadDigests.distrust();
      watchTrustedSince = now;
    }
    const t0 = performance.now();
    // (1) The duration metric is the local pass (read, hash, decide), not the API's answer time.
    const first = runPass(lookup, now);
    reload?.see(now);
    metrics.duration.observe((performance.now() - t0) / 1000);
    const { pass, owner, pod, unconfirmed } = await confirmView(first, now);
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
      refusalNote = undefined;
      healBackoff.succeeded();
    }
    await recordBaselines(pass);

    // (2) In reload mode, a pass in sync asks the app to reload before it logs its verdicts: the
    // reload is what the user waits for, and the log lines before it were 0.1 to 0.2 ms of the
    // swap -> POST time at the median and up to 2.5 ms at p99 (writes to stdout, measured). The
    // request is on its way once afterInSync's synchronous part has run; its answer is awaited
    // below, so the "reloaded" line still follows the verdicts'.
    reload?.confirmLast(allInSync);
    const reloading = reload && allInSync ? reload.afterInSync(pass.verdicts, now) : undefined;

    // (3) The Drifted Events are sent without holding the restart back; the pass waits for them
    // before it ends.
    const { news, told } = verdictNews(lastVerdict, pass.verdicts);
    lastVerdict = told;
    const driftEvents: Promise<void>[] = [];
    for (const { verdict: v, level, event: driftEvent } of news) {
      log[level]({ target: v.target, state: v.state, reason: v.reason, mismatches: v.mismatches }, v.message);
      if (driftEvent) driftEvents.push(event('Drifted', driftEvent, 'Warning'));
    }
    for (const v of pass.verdicts) {
      if (v.propagationSeconds !== undefined) {
        metrics.propagation.observe(v.propagationSeconds);
        log.info({ target: v.target, propagationSeconds: v.propagationSeconds }, 'propagated');
      }
    }

    // (4)
    let retryAt: number | undefined;
    if (drifted.length > 0) ({ retryAt } = await act(pass.verdicts, now, owner, pod));
    if (reloading) ({ retryAt } = await reloading);
    await Promise.all(driftEvents);
    // (5)
    await writeStatus(pass.verdicts, now);
    ready = true;
    lastPassAt = clock();

    // (6)
    await readStartsWhenDue(clock());
    await sendUnsentEvents(clock());

    // (7) A drift the API could not confirm is asked about again soon, not at the next resync:
    // the read that failed was one request, and the drift behind it may be real. So are a status
    // write and Events that failed.
    const deadlines = pass.verdicts.map((v) => v.deadline).filter((d): d is number => d !== undefined);
    if (retryAt !== undefined) deadlines.push(retryAt);
    if (unconfirmed) deadlines.push(clock() + CONFIRM_RETRY_MS);
    if (statusRetryAt !== undefined) deadlines.push(statusRetryAt);
    if (unsentEvents.length > 0 && eventRetryAt !== undefined) deadlines.push(eventRetryAt);
    if (startsPending()) deadlines.push(startsReadAt);
    return deadlines.length ? Math.min(...deadlines) : undefined;
  }

  const done = (async () => {
    const tasks: Promise<void>[] = [
      cache.start(signal, (ref, error) => log.error({ source: refKey(ref) }, error.message)),
    ];
    const paths = rt.targets.flatMap((t) => (t.type === 'volume' ? [rt.agentPath(t.mountPath)] : []));
    // The first pass waits for the file watches as well as the API's view: a change made
    // between a first pass and a watch set up after it would wait for the next --resync.
    let watchesReady = Promise.resolve();
    if (paths.length > 0) {
      const watched = Promise.withResolvers<void>();
      signal.addEventListener('abort', () => watched.resolve(), { once: true });
      watchesReady = watched.promise;
      tasks.push(
        watchFiles(
          {
            paths,
            intervalMs: options.pollMs,
            onChange: () => wakeup.wake(),
            onReady: () => watched.resolve(),
            entries: volumeEntries,
            payloads: payloadDigests,
            onPollingOnly: (error) => {
              metrics.filePolling.set(1);
              log.warn({ err: error.message }, 'inotify refused: watching files by polling only');
            },
          },
          signal,
        ),
      );
    }
    await runLoop(
      {
        wakeup,
        synced: async () => {
          await watchesReady;
          await cache.waitForSync((ms) => wakeup.sleep(ms, signal), signal);
        },
        reconcile,
        resyncMs: options.resyncMs,
        clock,
        onError: (error) => log.error({ err: error.message }, 'reconcile failed'),
      },
      signal,
    );
    await Promise.all(tasks);
  })();

  return {
    ready: () => ready,
    live: () => clock() - lastPassAt < options.resyncMs * 3 + 30_000,
    done,
  };
}
