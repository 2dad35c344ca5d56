// One verification pass over every target: expectation from the API's view, observation from
// disk (or the env baseline), and the verdict. The same pass serves the agent's loop and the
// one-shot commands; file reading is passed in so the pass itself stays deterministic.
import type { V1Pod } from '@kubernetes/client-node';
import type { Target } from '../discover/targets.ts';
import type { ReadVolumeResult } from '../read/volume.ts';
import { containerView } from '../verify/container-view.ts';
import { type Expectation, expectEnv, expectVolume, type SourceLookup } from '../verify/expected.ts';
import type { Fingerprint } from '../verify/fingerprint.ts';
import { decide, type TargetMemory, targetId, type Verdict, type VerifyWindows } from '../verify/verdict.ts';

export type VolumeReader = (
  dir: string,
  expectedPaths: Iterable<string>,
  subPath: boolean,
) => ReadVolumeResult;

export interface PassInput {
  readonly targets: readonly Target[];
  readonly lookup: SourceLookup;
  readonly readVolume: VolumeReader;
  readonly agentPath: (mountPath: string) => string;
  readonly envBaselines: Readonly<Record<string, string>>;
  readonly memory: ReadonlyMap<string, TargetMemory>;
  /** --grace and --debounce, straight from the AgentConfig. */
  readonly windows: VerifyWindows;
  /** The Pod's keyed fingerprint, for digests shown in mismatches. */
  readonly fingerprint: Fingerprint;
  readonly now: number;
  /** When each container of the Pod (last) started, from its status; the agent's own too. */
  readonly starts?: ContainerStarts;
}

export interface ContainerStarts {
  readonly agent: number | undefined;
  readonly byContainer: Readonly<Record<string, number>>;
}

export interface PassResult {
  readonly verdicts: readonly Verdict[];
  readonly memory: Map<string, TargetMemory>;
  /** Current env fingerprints by target id, to record as baselines where none exists yet. */
  readonly envDigests: Readonly<Record<string, string>>;
}

/** A verdict that accuses the files: what the agent heals or alerts on. */
export function isDrift(verdict: Verdict): boolean {
  return verdict.state === 'Drifted' || verdict.state === 'Missing';
}

function viewOf(starts: ContainerStarts | undefined, container: string, expectation: Expectation) {
  return containerView(
    starts?.byContainer[container],
    starts?.agent,
    expectation.changedAt,
    expectation.neverChanged ?? false,
  );
}

/**
 * Whether a target's verdict depends on when its container started (container-view.ts): an env
 * target or a subPath file holds what the container got when it started, while a whole volume is
 * compared as the agent sees it now.
 */
export function readsContainerStarts(target: Target): boolean {
  return target.type === 'env' || target.subPath !== undefined;
}

export function verifyPass(input: PassInput): PassResult {
  const policy = { ...input.windows, fingerprint: input.fingerprint };
  const verdicts: Verdict[] = [];
  const memory = new Map<string, TargetMemory>();
  const envDigests: Record<string, string> = {};
  for (const target of input.targets) {
    const id = targetId(target);
    const previous = input.memory.get(id) ?? {};
    if (target.type === 'env') {
      const plain = expectEnv(target, input.lookup);
      const { expectation } = plain;
      const digest = plain.digest === undefined ? undefined : policy.fingerprint(plain.digest);
      const view = viewOf(input.starts, target.container, expectation);
      // A baseline is what the app started with: never take one from a version it did not get.
      if (digest && view !== 'older') envDigests[id] = digest;
      const result = decide(
        target,
        expectation,
        { baseline: input.envBaselines[id] },
        previous,
        input.now,
        policy,
        digest,
        view,
      );
      verdicts.push(result.verdict);
      memory.set(id, result.memory);
      continue;
    }
    const expectation = expectVolume(target, input.lookup);
    const observation = input.readVolume(
      input.agentPath(target.mountPath),
      expectation.files.keys(),
      target.subPath !== undefined,
    );
    const view = readsContainerStarts(target)
      ? viewOf(input.starts, target.container, expectation)
      : 'agent-copy';
    const result = decide(target, expectation, observation, previous, input.now, policy, undefined, view);
    verdicts.push(result.verdict);
    memory.set(id, result.memory);
  }
  return { verdicts, memory, envDigests };
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
