// One verification pass over every target: expectation from the API's view, observation from
// disk (or the start baseline of what the app got), and the verdict. The same pass serves the agent's loop and the
// one-shot commands; file reading is passed in so the pass itself stays deterministic.
import type { V1Pod } from '@kubernetes/client-node';
import type { Target, VolumeTarget } from '../discover/targets.ts';
import { definedOnly } from '../kube/defined-only.ts';
import type { ReadVolumeResult } from '../read/volume.ts';
import { type ContainerView, containerView } from '../verify/container-view.ts';
import { type Expectation, expectEnv, expectVolume, type SourceLookup } from '../verify/expected.ts';
import type { Fingerprint } from '../verify/fingerprint.ts';
import {
  type AppHolds,
  decide,
  type TargetMemory,
  targetId,
  type Verdict,
  type VerifyWindows,
} from '../verify/verdict.ts';
import { heldBaseline, type StartBaseline, type StartBaselines } from './start-baselines.ts';

export type VolumeReader = (
  dir: string,
  expectedPaths: Iterable<string>,
  subPath: boolean,
) => ReadVolumeResult;

export interface PassInput {
  readonly targets: readonly Target[];
  readonly lookup: SourceLookup;
  readonly readVolume: VolumeReader;
  /** Where a volume target's files are in the agent's filesystem (Runtime.volumePath). */
  readonly volumePath: (target: VolumeTarget) => string;
  /** What each app container got at its start, as recorded on the Pod (start-baselines.ts). */
  readonly baselines: StartBaselines;
  readonly memory: ReadonlyMap<string, TargetMemory>;
  /** --grace and --debounce, straight from the AgentConfig. */
  readonly windows: VerifyWindows;
  /** The Pod's keyed fingerprint, for digests shown in mismatches. */
  readonly fingerprint: Fingerprint;
  readonly now: number;
  /** When each container of the Pod (last) started, from its status; the agent's own too. */
  readonly starts?: ContainerStarts;
  /** The agent reads the app containers' own subPath files (readsContainerStarts). */
  readonly seesAppMounts?: boolean;
}

export interface ContainerStarts {
  readonly agent: number | undefined;
  readonly byContainer: Readonly<Record<string, number>>;
}

export interface PassResult {
  readonly verdicts: readonly Verdict[];
  readonly memory: Map<string, TargetMemory>;
  /**
   * By target id, what this pass can tell an env or subPath target's container got at its start
   * (baselineCandidate); the agent records those its Pod does not have yet (start-baselines.ts).
   */
  readonly baselines: Readonly<Record<string, StartBaseline>>;
}

/** A verdict that accuses the files: what the agent heals or alerts on. */
export function isDrift(verdict: Verdict): boolean {
  return verdict.state === 'Drifted' || verdict.state === 'Missing';
}

/**
 * What the app container of an env or subPath target holds: the view its start gives
 * (container-view.ts), and the baseline recorded for that start, if there is one.
 */
function appHolds(
  starts: ContainerStarts | undefined,
  container: string,
  expectation: Expectation,
  stored: StartBaseline | undefined,
): AppHolds {
  const startedAt = starts?.byContainer[container];
  const view = containerView(
    startedAt,
    starts?.agent,
    expectation.changedAt,
    expectation.neverChanged ?? false,
  );
  return { view, ...definedOnly({ baseline: heldBaseline(stored, startedAt) }) };
}

/**
 * What an env or subPath target's container got at its start, where this pass can tell:
 *  (1) a baseline recorded for that very start already says it -> nothing new;
 *  (2) the container started after the current version (view 'current') -> the API's version;
 *  (3) the agent's copy stands for the app's (view 'agent-copy') -> that copy: the subPath file
 *      as the agent reads it; for env (which no other container can read) the baseline taken
 *      before the app's start was known, or the API's version when there is none yet, and
 *      nothing when the baseline is of an earlier start of the container (what the container got
 *      when it started again is not known; that baseline stays the observation, as before);
 *  (4) the app is older than the current version (view 'older') -> nothing: it holds something
 *      the agent never saw.
 * A subPath baseline is taken only once its container's start is known: until then, the agent's
 * own copy is the observation anyway.
 */
export function baselineCandidate(
  kind: 'env' | 'subPath',
  view: ContainerView,
  startedAt: number | undefined,
  stored: StartBaseline | undefined,
  api: string | undefined,
  agentCopy: string | undefined,
): StartBaseline | undefined {
  // (1)
  if (heldBaseline(stored, startedAt) !== undefined) return undefined;
  let fp: string | undefined;
  // (2)
  if (view === 'current') fp = api;
  // (3)
  else if (view === 'agent-copy') fp = kind === 'subPath' ? agentCopy : envAgentCopy(stored, api);
  // (4)
  if (fp === undefined) return undefined;
  if (startedAt !== undefined) return { fp, startedAt };
  return kind === 'env' ? { fp } : undefined;
}

/**
 * baselineCandidate's step (3) for env: the baseline taken before the app's start was known; the
 * API's version where there is no baseline yet; nothing where the baseline is of an earlier start.
 */
function envAgentCopy(stored: StartBaseline | undefined, api: string | undefined): string | undefined {
  if (stored === undefined) return api;
  return stored.startedAt === undefined ? stored.fp : undefined;
}

/**
 * Whether a target's verdict depends on when its container started (container-view.ts): an env
 * target or a subPath file holds what the container got when it started, while a whole volume is
 * compared as the agent sees it now. Where the agent reads the app container's own subPath file
 * (`seesAppMounts`: the node agent reads kubelet's bind mount of it), that file is what the app
 * holds, whatever the starts.
 */
export function readsContainerStarts(target: Target, seesAppMounts = false): boolean {
  return target.type === 'env' || (target.subPath !== undefined && !seesAppMounts);
}

export function verifyPass(input: PassInput): PassResult {
  const policy = { ...input.windows, fingerprint: input.fingerprint };
  const verdicts: Verdict[] = [];
  const memory = new Map<string, TargetMemory>();
  const baselines: Record<string, StartBaseline> = {};
  for (const target of input.targets) {
    const id = targetId(target);
    const previous = input.memory.get(id) ?? {};
    const stored = input.baselines[id];
    const startedAt = input.starts?.byContainer[target.container];
    if (target.type === 'env') {
      const plain = expectEnv(target, input.lookup);
      const { expectation } = plain;
      const digest = plain.digest === undefined ? undefined : policy.fingerprint(plain.digest);
      const app = appHolds(input.starts, target.container, expectation, stored);
      // The observation is the baseline that stands for the app's current start; without one,
      // the baseline there is (taken before that start was known, or of an earlier start), as
      // before baselines were tied to starts.
      const observed = app.baseline ?? stored?.fp;
      const candidate = baselineCandidate('env', app.view, startedAt, stored, digest, undefined);
      if (candidate) baselines[id] = candidate;
      const result = decide(
        target,
        expectation,
        { baseline: observed },
        previous,
        input.now,
        policy,
        digest,
        app,
      );
      verdicts.push(result.verdict);
      memory.set(id, result.memory);
      continue;
    }
    const expectation = expectVolume(target, input.lookup);
    const observation = input.readVolume(
      input.volumePath(target),
      expectation.files.keys(),
      target.subPath !== undefined,
    );
    let app: AppHolds = { view: 'agent-copy' };
    if (readsContainerStarts(target, input.seesAppMounts)) {
      app = appHolds(input.starts, target.container, expectation, stored);
      const api = expectation.files.get('')?.digest.sha256;
      const copy = observation.error ? undefined : observation.files.get('');
      const candidate = baselineCandidate(
        'subPath',
        app.view,
        startedAt,
        stored,
        api === undefined ? undefined : policy.fingerprint(api),
        copy === undefined || copy === 'missing' ? undefined : policy.fingerprint(copy.sha256),
      );
      if (candidate) baselines[id] = candidate;
    }
    const result = decide(target, expectation, observation, previous, input.now, policy, undefined, app);
    verdicts.push(result.verdict);
    memory.set(id, result.memory);
  }
  return { verdicts, memory, baselines };
}

/**
 * When each container of `pod` last started (its running state), and the agent's own start: the
 * process's, since the Pod's status may not show the agent's container running yet when the
 * agent first reads it.
 */
export function containerStarts(pod: V1Pod | undefined, agentStartedAt: number): ContainerStarts {
  const byContainer: Record<string, number> = {};
  for (const s of [
    ...(pod?.status?.initContainerStatuses ?? []),
    ...(pod?.status?.containerStatuses ?? []),
  ]) {
    const at = s.state?.running?.startedAt;
    if (at) byContainer[s.name] = new Date(at).getTime();
  }
  return { agent: agentStartedAt, byContainer };
}
