// The admission webhook's metrics, in a registry of its own, served on --metrics-listen: what it
// decided for each Pod, and the requests it refused to read. Both label sets are closed: the
// decisions (webhook/mutate.ts, ADMISSION_DECISIONS) and the refusal reasons below. A Pod created
// without the sidecar while the webhook was meant to inject it shows here as a decision other
// than `injected`, or as no admission at all while the webhook was down (`config-sync status`
// then lists it as NotInjected).
import Counter from 'prom-client/lib/counter.js';
import Registry from 'prom-client/lib/registry.js';
import { registerProcessMetrics } from './metrics.ts';

/** Why a request was answered without an admission decision. */
export type RefusedReason = 'too_large' | 'too_deep' | 'not_json' | 'not_a_review';

export interface WebhookMetrics {
  readonly registry: Registry;
  /** One per AdmissionReview answered, by what was decided for the Pod. */
  readonly admissions: Counter<'decision'>;
  /** Admissions answered with a warning (a Pod that runs as "default", an annotation that cannot be read, ...). */
  readonly warned: Counter<'decision'>;
  /** Requests refused before any decision (the Pod is then admitted as the API server's failurePolicy says). */
  readonly refused: Counter<'reason'>;
}

export function createWebhookMetrics(): WebhookMetrics {
  const registry = new Registry();
  const registers = [registry];
  registerProcessMetrics(registry);
  return {
    registry,
    admissions: new Counter({
      name: 'config_sync_webhook_admissions_total',
      help: 'AdmissionReviews answered, by decision: injected, already_injected, no_config, token_off, unreadable_pod, not_a_pod, failed.',
      labelNames: ['decision'],
      registers,
    }),
    warned: new Counter({
      name: 'config_sync_webhook_warnings_total',
      help: 'AdmissionReviews answered with a warning for the user, by decision.',
      labelNames: ['decision'],
      registers,
    }),
    refused: new Counter({
      name: 'config_sync_webhook_refused_requests_total',
      help: 'Requests to /mutate refused before any decision, by reason: too_large, too_deep, not_json, not_a_review.',
      labelNames: ['reason'],
      registers,
    }),
  };
}
