// One verification pass over every target: expectation from the API's view, observation from
// disk (or the env baseline), and the verdict. The same pass serves the agent's loop and the
// one-shot commands; file reading is passed in so the pass itself stays deterministic.
import type { Target } from '../discover/targets.ts';
import { expectEnv, expectVolume, type SourceLookup } from '../verify/expected.ts';
import { decide, type TargetMemory, targetId, type Verdict, type VerifyPolicy } from '../verify/verdict.ts';
import type { ReadVolumeResult } from '../watch/read-volume.ts';

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
  readonly policy: VerifyPolicy;
  readonly now: number;
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

export function verifyPass(input: PassInput): PassResult {
  const verdicts: Verdict[] = [];
  const memory = new Map<string, TargetMemory>();
  const envDigests: Record<string, string> = {};
  for (const target of input.targets) {
    const id = targetId(target);
    const previous = input.memory.get(id) ?? {};
    if (target.type === 'env') {
      const plain = expectEnv(target, input.lookup);
      const { expectation } = plain;
      const digest = plain.digest === undefined ? undefined : input.policy.fingerprint(plain.digest);
      if (digest) envDigests[id] = digest;
      const result = decide(
        target,
        expectation,
        { baseline: input.envBaselines[id] },
        previous,
        input.now,
        input.policy,
        digest,
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
    const result = decide(target, expectation, observation, previous, input.now, input.policy);
    verdicts.push(result.verdict);
    memory.set(id, result.memory);
  }
  return { verdicts, memory, envDigests };
}
