import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { DEFAULT_SIDECAR } from '../../src/inject/sidecar.ts';
import { mutatePod } from '../../src/webhook/mutate.ts';

const pod = (spec: Partial<V1Pod['spec']> = {}): V1Pod => ({
  kind: 'Pod',
  metadata: { generateName: 'web-' },
  spec: {
    serviceAccountName: 'config-sync-agent',
    volumes: [{ name: 'config', configMap: { name: 'web-config' } }],
    containers: [{ name: 'app', image: 'x', volumeMounts: [{ name: 'config', mountPath: '/etc/app' }] }],
    ...spec,
  },
});

const review = (object: V1Pod) => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: { uid: 'u-1', object },
});
const patchOf = (r: ReturnType<typeof mutatePod>) =>
  JSON.parse(Buffer.from(r.review.response.patch ?? '', 'base64').toString());

describe('mutatePod', () => {
  it('adds the sidecar as the first init container list, answering with the request uid', () => {
    const r = mutatePod(review(pod()), DEFAULT_SIDECAR);
    expect(r.review.response).toMatchObject({ uid: 'u-1', allowed: true, patchType: 'JSONPatch' });
    const [op] = patchOf(r);
    expect(op).toMatchObject({ op: 'add', path: '/spec/initContainers' });
    expect(op.value[0]).toMatchObject({ name: 'config-sync', restartPolicy: 'Always' });
    expect(r.review.response.warnings).toBeUndefined();
  });

  it("adds the sidecar's state emptyDir to the volumes, once", () => {
    const [, volume] = patchOf(mutatePod(review(pod()), DEFAULT_SIDECAR));
    expect(volume).toEqual({
      op: 'add',
      path: '/spec/volumes/-',
      value: { name: 'config-sync-state', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    });
    const withState = pod({
      volumes: [
        { name: 'config', configMap: { name: 'web-config' } },
        { name: 'config-sync-state', emptyDir: {} },
      ],
    });
    expect(patchOf(mutatePod(review(withState), DEFAULT_SIDECAR))).toHaveLength(1);
  });

  it('warns of a config-sync annotation the agent cannot read, and changes no annotation', () => {
    const annotated = {
      ...pod(),
      metadata: { generateName: 'web-', annotations: { 'config-sync.io/on-drift': 'never' } },
    };
    const r = mutatePod(review(annotated), DEFAULT_SIDECAR);
    expect(r.decision).toBe('injected');
    expect(patchOf(r).map((op: { path: string }) => op.path)).toEqual([
      '/spec/initContainers',
      '/spec/volumes/-',
    ]);
    expect(r.review.response.warnings).toEqual([
      'config-sync: invalid annotation: config-sync.io/on-drift="never" is not restart, alert-only or reload; write one of those; the agent will report drift and never restart this Pod',
    ]);
  });

  it('appends to existing init containers', () => {
    const r = mutatePod(review(pod({ initContainers: [{ name: 'migrate', image: 'm' }] })), DEFAULT_SIDECAR);
    expect(patchOf(r)[0]).toMatchObject({ op: 'add', path: '/spec/initContainers/-' });
  });

  it.each([
    [
      'already injected',
      pod({ initContainers: [{ name: 'config-sync', image: 'c', restartPolicy: 'Always' }] }),
      'already has the sidecar',
    ],
    [
      'no config mounted',
      pod({ volumes: [], containers: [{ name: 'app', image: 'x' }] }),
      'no ConfigMap or Secret mounted',
    ],
  ])('%s: allowed, no patch', (_, object, decision) => {
    const r = mutatePod(review(object), DEFAULT_SIDECAR);
    expect(r.decision).toBe(decision);
    expect(r.review.response).toEqual({ uid: 'u-1', allowed: true });
  });

  it('warns, and does not inject, when the token is turned off', () => {
    const r = mutatePod(review(pod({ automountServiceAccountToken: false })), DEFAULT_SIDECAR);
    expect(r.review.response.patch).toBeUndefined();
    expect(r.review.response.warnings?.[0]).toContain('automountServiceAccountToken is false');
  });

  it('injects a Pod running as "default" with a warning about its permissions', () => {
    const r = mutatePod(review(pod({ serviceAccountName: 'default' })), DEFAULT_SIDECAR);
    expect(r.decision).toBe('injected');
    expect(r.review.response.warnings?.[0]).toContain('runs as ServiceAccount "default"');
  });

  it('allows anything that is not a Pod', () => {
    expect(mutatePod({ request: { uid: 'u-2' } }, DEFAULT_SIDECAR).review.response).toEqual({
      uid: 'u-2',
      allowed: true,
    });
  });
});
