// What the webhook accepts as a request. Any caller that can reach its port can send any bytes:
// a body that is not an AdmissionReview is a bad request (400); the Pod inside is checked by
// src/inject/pod-shape.ts before the mutation reads it.
import { isObject } from '../inject/pod-shape.ts';
import type { AdmissionReview } from './mutate.ts';

/** The review, or why the body is not one (for a 400). */
export function readReview(body: unknown): { review: AdmissionReview } | { invalid: string } {
  if (!isObject(body)) return { invalid: 'the body is not a JSON object' };
  if (body.kind !== 'AdmissionReview') return { invalid: 'kind is not AdmissionReview' };
  if (body.apiVersion !== 'admission.k8s.io/v1') return { invalid: 'apiVersion is not admission.k8s.io/v1' };
  const request = body.request;
  if (!isObject(request)) return { invalid: 'request is not an object' };
  if (typeof request.uid !== 'string' || request.uid === '')
    return { invalid: 'request.uid is not a string' };
  return { review: body as AdmissionReview };
}
