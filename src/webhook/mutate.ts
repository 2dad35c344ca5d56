// The admission decision for one Pod: the JSON Patch that adds the config-sync sidecar, or none.
// Pure: AdmissionReview in, AdmissionReview out. The same sidecar as `inject` (src/inject).
//
// Unlike `inject`, the webhook never changes the ServiceAccount: by the time mutating webhooks
// run, the ServiceAccount admission plugin has already resolved it (and mounted its token), so
// a Pod must already run as an identity bound to config-sync's Role. A warning says so when it
// runs as `default`.
import type { V1Pod } from '@kubernetes/client-node';
import { parsePodAnnotations } from '../config/pod-annotations.ts';
import { podShapeProblem } from '../inject/pod-shape.ts';
import {
  configMounts,
  SIDECAR_NAME,
  type SidecarOptions,
  STATE_VOLUME,
  sidecarContainer,
} from '../inject/sidecar.ts';

export interface AdmissionReview {
  readonly apiVersion?: string;
  readonly kind?: string;
  readonly request?: { readonly uid?: string; readonly object?: V1Pod; readonly namespace?: string };
}

export interface AdmissionResponse {
  readonly apiVersion: 'admission.k8s.io/v1';
  readonly kind: 'AdmissionReview';
  readonly response: {
    readonly uid: string;
    readonly allowed: true;
    readonly patchType?: 'JSONPatch';
    readonly patch?: string;
    readonly warnings?: string[];
  };
}

/**
 * What can be decided for a Pod, as the log says it, and its value of the `decision` label of
 * config_sync_webhook_admissions_total (a closed set).
 */
export const ADMISSION_DECISIONS = {
  injected: 'injected',
  'already has the sidecar': 'already_injected',
  'no ConfigMap or Secret mounted': 'no_config',
  'token turned off': 'token_off',
  'a Pod it cannot read': 'unreadable_pod',
  'not a Pod with containers': 'not_a_pod',
  failed: 'failed',
} as const;

export type AdmissionDecision = keyof typeof ADMISSION_DECISIONS;

export interface MutationResult {
  readonly review: AdmissionResponse;
  /** What was decided, for the log: injected, or why not. */
  readonly decision: AdmissionDecision;
}

/**
 * Steps: (1) only a Pod with containers, of a shape it can read (review.ts); (2) already carrying the sidecar: nothing (a Pod seen
 * twice, by reinvocation or by both selectors, is patched once); (3) no ConfigMap or Secret
 * mounted, or the token turned off: nothing, with a warning; (4) otherwise JSON Patch ops that
 * append the sidecar to the init containers and its state emptyDir to the volumes. Every answer allows the Pod: config-sync
 * never blocks a Pod from being created.
 */
export function mutatePod(review: AdmissionReview, options: SidecarOptions): MutationResult {
  const uid = review.request?.uid ?? '';
  const pod = review.request?.object;
  const allow = (
    decision: AdmissionDecision,
    extra: Partial<AdmissionResponse['response']> = {},
  ): MutationResult => ({
    review: {
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      response: { uid, allowed: true, ...extra },
    },
    decision,
  });
  // (1)
  const problem = podShapeProblem(pod);
  if (problem) {
    return allow('a Pod it cannot read', {
      warnings: [`config-sync not injected: the Pod could not be read (${problem})`],
    });
  }
  if (!pod?.spec || pod.kind !== 'Pod' || !Array.isArray(pod.spec.containers))
    return allow('not a Pod with containers');
  const spec = pod.spec;
  // (2)
  if (
    (spec.initContainers ?? []).some((c) => c.name === SIDECAR_NAME) ||
    spec.containers.some((c) => c.name === SIDECAR_NAME)
  ) {
    return allow('already has the sidecar');
  }
  // (3)
  if (spec.automountServiceAccountToken === false) {
    return allow('token turned off', {
      warnings: [
        'config-sync not injected: automountServiceAccountToken is false, so the agent could not reach the API',
      ],
    });
  }
  if (configMounts(spec).length === 0) return allow('no ConfigMap or Secret mounted');
  const sidecar = sidecarContainer(spec, options);
  // (4)
  const ops: { op: 'add'; path: string; value: unknown }[] = [
    spec.initContainers && spec.initContainers.length > 0
      ? { op: 'add', path: '/spec/initContainers/-', value: sidecar }
      : { op: 'add', path: '/spec/initContainers', value: [sidecar] },
  ];
  if (!(spec.volumes ?? []).some((v) => v.name === STATE_VOLUME.name)) {
    ops.push(
      spec.volumes && spec.volumes.length > 0
        ? { op: 'add', path: '/spec/volumes/-', value: STATE_VOLUME }
        : { op: 'add', path: '/spec/volumes', value: [STATE_VOLUME] },
    );
  }
  const warnings =
    (spec.serviceAccountName ?? 'default') === 'default'
      ? [
          `config-sync injected, but the Pod runs as ServiceAccount "default": bind config-sync's Role to it or run it as ${options.serviceAccount}`,
        ]
      : [];
  // The Pod's config-sync annotations pass through unchanged; one the agent cannot read is told
  // to whoever applies it (kubectl prints admission warnings), not only later in an Event.
  for (const p of parsePodAnnotations(pod.metadata?.annotations, 'sidecar').problems)
    warnings.push(
      `config-sync: invalid annotation: ${p}; the agent will report drift and never restart this Pod`,
    );
  return allow('injected', {
    patchType: 'JSONPatch',
    patch: Buffer.from(JSON.stringify(ops)).toString('base64'),
    ...(warnings.length ? { warnings } : {}),
  });
}
