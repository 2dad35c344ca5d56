// The policy gate as this Pod applies it (heal/policy.ts decides): the built-in policies, then
// OPA if --policy-url is set, for a plan that would restart. The agent and `heal` both use it,
// so `heal --dry-run` shows what the gate says.
import type { OwnerState, Plan } from '../heal/planner.ts';
import { builtInGate, gatedPlan, opaGate, policyInput } from '../heal/policy.ts';
import { askOpa } from '../heal/policy-opa.ts';
import { configHash, type SourceLookup } from '../verify/expected.ts';
import type { Runtime } from './runtime.ts';

export async function gateRestart(
  rt: Runtime,
  plan: Plan,
  owner: OwnerState,
  lookup: SourceLookup,
  now: number,
  signal?: AbortSignal,
): Promise<Plan> {
  const policy = rt.config.policy;
  if (plan.decision !== 'restart' || owner.type !== 'workload') return plan;
  if (!policy.restartWindow && !policy.onlyWhenSettled && !policy.opa) return plan;
  const builtIn = builtInGate(policy, owner.workload.health, now);
  if (!builtIn.allowed || !policy.opa) return gatedPlan(plan, builtIn);
  // The sources as OPA sees them: versions and keyed content digests (configHash of the one
  // source, under the Pod's key), never a value.
  const sources = rt.sources.flatMap((ref) => {
    const state = lookup(ref);
    if (state?.state !== 'present') return [];
    return [
      {
        kind: ref.kind,
        name: ref.name,
        resourceVersion: state.snapshot.resourceVersion,
        digest: rt.fingerprint(configHash(lookup, [ref])),
      },
    ];
  });
  const input = policyInput(plan, owner.workload, rt.namespace, rt.pod?.metadata?.name, sources, now);
  const outcome = await askOpa(policy.opa.url, input, rt.config.requestTimeoutMs, signal);
  return gatedPlan(plan, opaGate(builtIn, policy, outcome));
}
