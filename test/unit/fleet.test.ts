// The fleet view's decisions (src/fleet/rows.ts): which Pods run the agent, their state, their
// workload named without reading it, and the one line per workload.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { statusText } from '../../src/fleet/format.ts';
import {
  age,
  missedInjection,
  notInjectedRow,
  podRow,
  runsAgent,
  workloadLine,
  workloadOf,
  workloadRows,
} from '../../src/fleet/rows.ts';

const NOW = Date.parse('2026-12-03T12:00:00Z');
const ago = (s: number) => new Date(NOW - s * 1000).toISOString();

function pod(
  name: string,
  condition?: { status: 'True' | 'False'; reason: string; since?: number },
  over: Partial<V1Pod['metadata']> = {},
): V1Pod {
  return {
    metadata: {
      name,
      namespace: 'shop',
      labels: { 'pod-template-hash': '5c8f' },
      ownerReferences: [
        { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-5c8f', uid: 'u', controller: true },
      ],
      annotations: {
        'config-sync.io/last-config-sync': ago(90),
        'config-sync.io/matched-versions': 'ConfigMap/web-config@41',
      },
      ...over,
    },
    spec: { initContainers: [{ name: 'config-sync' }], containers: [{ name: 'app' }] },
    status: {
      conditions: condition
        ? [
            {
              type: 'config-sync.io/InSync',
              status: condition.status,
              reason: condition.reason,
              message: `app:/etc/app: ${condition.reason}`,
              lastTransitionTime: ago(condition.since ?? 600) as unknown as Date,
            },
          ]
        : [],
    },
  };
}

describe('Pods that asked for the sidecar and missed it', () => {
  const bare = (labels: Record<string, string> = {}): V1Pod => ({
    metadata: { name: 'web-9', namespace: 'shop', labels },
    spec: { containers: [{ name: 'app' }] },
    status: { phase: 'Running' },
  });
  it('by their namespace or their own label; not when the Pod says disabled, or the namespace is not known', () => {
    const enabled = { 'config-sync.io/inject': 'enabled' };
    expect(missedInjection(bare(), enabled, 'config-sync')).toBe(true);
    expect(missedInjection(bare(enabled), {}, 'config-sync')).toBe(true);
    expect(missedInjection(bare({ 'config-sync.io/inject': 'disabled' }), enabled, 'config-sync')).toBe(
      false,
    );
    expect(missedInjection(bare(), undefined, 'config-sync')).toBe(false);
    expect(missedInjection(bare(), {}, 'config-sync')).toBe(false);
    // A Pod that has an agent (its condition) is not missing one.
    const served = {
      ...bare(),
      status: { phase: 'Running', conditions: [{ type: 'config-sync.io/InSync', status: 'True' }] },
    };
    expect(missedInjection(served as V1Pod, enabled, 'config-sync')).toBe(false);
    const row = notInjectedRow(bare());
    expect(row).toMatchObject({ state: 'NotInjected', reason: 'NotInjected', workload: '-' });
    expect(workloadLine(workloadRows([row])[0] as never, NOW, false)).toBe(
      'Pod/web-9: 0/1 in sync (1 without the sidecar it asked for)',
    );
  });
});

describe('Pods the node agent checks', () => {
  it('are listed with no sidecar: with its condition, or annotated for it before it wrote one', () => {
    const served = pod('web-1', { status: 'True', reason: 'InSync' });
    served.spec = { containers: [{ name: 'app' }] };
    expect(runsAgent(served, 'config-sync')).toBe(true);
    expect(podRow(served).agent).toBe('node');
    const waiting = pod('web-2', undefined, { annotations: { 'config-sync.io/node-agent': 'enabled' } });
    waiting.spec = { containers: [{ name: 'app' }] };
    expect(runsAgent(waiting, 'config-sync')).toBe(true);
    expect(podRow(waiting)).toMatchObject({ state: 'NoStatus', agent: 'node' });
    const neither = pod('web-3', undefined, { annotations: {} });
    neither.spec = { containers: [{ name: 'app' }] };
    expect(runsAgent(neither, 'config-sync')).toBe(false);
  });
});

describe('which Pods run the agent', () => {
  it('its container, its condition or its annotation; not a Pod with none', () => {
    expect(runsAgent(pod('a'), 'config-sync')).toBe(true);
    expect(runsAgent({ metadata: {}, spec: { containers: [{ name: 'app' }] } }, 'config-sync')).toBe(false);
    const renamed: V1Pod = { spec: { containers: [{ name: 'sync' }] } };
    expect(runsAgent(renamed, 'config-sync')).toBe(false);
    expect(runsAgent(renamed, 'sync')).toBe(true);
  });
});

describe('a Pod row', () => {
  it.each([
    [{ status: 'True', reason: 'InSync' }, 'InSync'],
    [{ status: 'True', reason: 'Propagating' }, 'Propagating'],
    [{ status: 'False', reason: 'SubPathStale' }, 'Drifted'],
    [undefined, 'NoStatus'],
  ] as const)('condition %j -> %s', (condition, state) => {
    expect(podRow(pod('a', condition)).state).toBe(state);
  });

  it('drifted: since when, the reason and the message; the last sync and the versions', () => {
    const row = podRow(pod('a', { status: 'False', reason: 'SubPathStale', since: 240 }));
    expect(row).toMatchObject({
      namespace: 'shop',
      pod: 'a',
      workload: 'Deployment/web',
      reason: 'SubPathStale',
      driftedSince: NOW - 240_000,
      lastSync: NOW - 90_000,
      matchedVersions: 'ConfigMap/web-config@41',
    });
  });

  it.each([
    [{}, 'Deployment/web'],
    [{ labels: { 'rollouts-pod-template-hash': '5c8f' } }, 'Rollout/web'],
    [{ labels: {} }, 'ReplicaSet/web-5c8f'],
    [
      {
        ownerReferences: [
          { apiVersion: 'apps/v1', kind: 'StatefulSet', name: 'db', uid: 'u', controller: true },
        ],
      },
      'StatefulSet/db',
    ],
    [{ ownerReferences: [] }, '-'],
  ] as const)('workload from %j: %s', (meta, workload) => {
    expect(workloadOf(pod('a', undefined, meta as Partial<V1Pod['metadata']>))).toBe(workload);
  });
});

describe('one line per workload', () => {
  it('all in sync (Propagating counts), or how many drifted, why, since the earliest', () => {
    const rows = [
      podRow(pod('web-1', { status: 'True', reason: 'InSync' })),
      podRow(pod('web-2', { status: 'True', reason: 'Propagating' })),
      podRow(
        pod(
          'api-1',
          { status: 'False', reason: 'SubPathStale', since: 240 },
          {
            labels: { 'pod-template-hash': '9d' },
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-9d', uid: 'u', controller: true },
            ],
          },
        ),
      ),
      podRow(
        pod(
          'api-2',
          { status: 'True', reason: 'InSync' },
          {
            labels: { 'pod-template-hash': '9d' },
            ownerReferences: [
              { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-9d', uid: 'u', controller: true },
            ],
          },
        ),
      ),
      podRow(
        pod('api-3', undefined, {
          labels: { 'pod-template-hash': '9d' },
          ownerReferences: [
            { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'api-9d', uid: 'u', controller: true },
          ],
        }),
      ),
    ];
    const lines = workloadRows(rows).map((w) => workloadLine(w, NOW, false));
    expect(lines).toEqual([
      'web: 2/2 in sync',
      'api: 1/3 drifted (SubPathStale) since 4m (1 with no status yet)',
    ]);
    expect(workloadRows(rows).map((w) => workloadLine(w, NOW, true))[0]).toBe('shop/web: 2/2 in sync');
  });

  it('ages as kubectl shows them', () => {
    expect([age(35_000), age(240_000), age(3 * 3_600_000), age(3 * 86_400_000)]).toEqual([
      '35s',
      '4m',
      '3h',
      '3d',
    ]);
  });

  it('the table: a column per field, aligned; wide adds the agent, the versions and the message', () => {
    const rows = [podRow(pod('web-1', { status: 'False', reason: 'EnvStale', since: 60 }))];
    const text = statusText(rows, workloadRows(rows), NOW, { allNamespaces: false, wide: true });
    expect(text.split('\n').slice(0, 2)).toEqual([
      'POD    WORKLOAD        STATE    REASON    SINCE  LAST SYNC  AGENT    MATCHED VERSIONS         MESSAGE',
      'web-1  Deployment/web  Drifted  EnvStale  60s    90s ago    sidecar  ConfigMap/web-config@41  app:/etc/app: EnvStale',
    ]);
    expect(text).toContain('web: 1/1 drifted (EnvStale) since 60s');
  });
});
