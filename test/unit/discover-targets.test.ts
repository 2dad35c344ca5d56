import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { discoverTargets, referencedSources } from '../../src/discover/targets.ts';

const pod: V1Pod = {
  spec: {
    volumes: [
      { name: 'config', configMap: { name: 'app-config', defaultMode: 0o640 } },
      {
        name: 'tls',
        secret: {
          secretName: 'tls',
          items: [{ key: 'tls.crt', path: 'cert.pem', mode: 0o400 }],
          optional: true,
        },
      },
      {
        name: 'merged',
        projected: {
          defaultMode: 0o600,
          sources: [
            { configMap: { name: 'base' } },
            { secret: { name: 'overlay' } },
            { downwardAPI: { items: [] } },
          ],
        },
      },
      {
        name: 'kube-api-access-x7k2p',
        projected: {
          sources: [{ serviceAccountToken: { path: 'token' } }, { configMap: { name: 'kube-root-ca.crt' } }],
        },
      },
      { name: 'scratch', emptyDir: {} },
    ],
    initContainers: [
      { name: 'migrate', image: 'i', envFrom: [{ configMapRef: { name: 'ignored-init' } }] },
      {
        name: 'proxy',
        image: 'i',
        restartPolicy: 'Always',
        volumeMounts: [{ name: 'tls', mountPath: '/tls' }],
      },
      {
        name: 'config-sync',
        image: 'i',
        restartPolicy: 'Always',
        volumeMounts: [{ name: 'config', mountPath: '/etc/app' }],
      },
    ],
    containers: [
      {
        name: 'app',
        image: 'i',
        volumeMounts: [
          { name: 'config', mountPath: '/etc/app' },
          { name: 'config', mountPath: '/etc/app.yaml', subPath: 'app.yaml' },
          { name: 'merged', mountPath: '/etc/merged' },
          { name: 'kube-api-access-x7k2p', mountPath: '/var/run/secrets/kubernetes.io/serviceaccount' },
          { name: 'scratch', mountPath: '/tmp' },
          { name: 'config', mountPath: '/etc/per-pod', subPathExpr: '$(POD_NAME)' },
        ],
        env: [
          { name: 'A', valueFrom: { configMapKeyRef: { name: 'env-config', key: 'a' } } },
          { name: 'B', valueFrom: { configMapKeyRef: { name: 'env-config', key: 'b' } } },
          { name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'password', optional: true } } },
        ],
        envFrom: [{ secretRef: { name: 'all-secrets' } }],
      },
    ],
  },
};

describe('discoverTargets', () => {
  const { targets, notes } = discoverTargets(pod, { self: 'config-sync' });

  it('finds volume, subPath and projected targets with their modes, items and optional flags', () => {
    const volumes = targets.filter((t) => t.type === 'volume');
    expect(
      volumes.map((t) => [t.container, t.mountPath, t.type === 'volume' ? (t.subPath ?? '') : '']),
    ).toEqual([
      ['app', '/etc/app', ''],
      ['app', '/etc/app.yaml', 'app.yaml'],
      ['app', '/etc/merged', ''],
      ['proxy', '/tls', ''],
    ]);
    expect(volumes[0]).toMatchObject({
      sources: [{ ref: { kind: 'ConfigMap', name: 'app-config' }, defaultMode: 0o640, optional: false }],
    });
    expect(volumes[2]).toMatchObject({
      sources: [
        { ref: { kind: 'ConfigMap', name: 'base' }, defaultMode: 0o600 },
        { ref: { kind: 'Secret', name: 'overlay' }, defaultMode: 0o600 },
      ],
    });
    expect(volumes[3]).toMatchObject({
      sources: [
        {
          ref: { kind: 'Secret', name: 'tls' },
          items: [{ key: 'tls.crt', path: 'cert.pem', mode: 0o400 }],
          optional: true,
        },
      ],
    });
  });

  it('folds env references per object: keys for valueFrom, all for envFrom', () => {
    const env = targets.filter((t) => t.type === 'env');
    expect(env).toEqual([
      {
        type: 'env',
        container: 'app',
        ref: { kind: 'ConfigMap', name: 'env-config' },
        keys: ['a', 'b'],
        optional: false,
      },
      {
        type: 'env',
        container: 'app',
        ref: { kind: 'Secret', name: 'db' },
        keys: ['password'],
        optional: true,
      },
      {
        type: 'env',
        container: 'app',
        ref: { kind: 'Secret', name: 'all-secrets' },
        keys: 'all',
        optional: false,
      },
    ]);
  });

  it('skips itself, finished init containers and the injected service-account volume, and says why', () => {
    expect(targets.some((t) => t.container === 'config-sync' || t.container === 'migrate')).toBe(false);
    expect(referencedSources(targets).map((r) => r.name)).not.toContain('kube-root-ca.crt');
    expect(notes).toContain(
      'volume kube-api-access-x7k2p: the service-account token volume the API server adds to every Pod; not a target',
    );
    expect(notes).toContain('app: /etc/per-pod uses subPathExpr, which the agent cannot expand; not checked');
  });

  it('--container narrows, and an unknown one is noted', () => {
    const narrowed = discoverTargets(pod, { self: 'config-sync', containers: ['proxy', 'nope'] });
    expect(new Set(narrowed.targets.map((t) => t.container))).toEqual(new Set(['proxy']));
    expect(narrowed.notes).toContain('container nope (from --container) is not in the Pod');
  });

  it('lists every referenced object once, sorted', () => {
    expect(referencedSources(targets).map((r) => `${r.kind}/${r.name}`)).toEqual([
      'ConfigMap/app-config',
      'ConfigMap/base',
      'ConfigMap/env-config',
      'Secret/all-secrets',
      'Secret/db',
      'Secret/overlay',
      'Secret/tls',
    ]);
  });
});
