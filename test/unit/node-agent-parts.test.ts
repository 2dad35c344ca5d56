// The node agent's pure parts: which Pods it serves (discover/node-pods.ts), where their files are
// in kubelet's directory, its configuration (config/node-config.ts), the per-Pod keys it derives
// (agent/digest-key.ts), its metrics' bounded per-Pod series (agent/node-pod-metrics.ts), and its
// admission policy for workloads, kept the same as the sidecar's.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { loadDigestKey, podKey } from '../../src/agent/digest-key.ts';
import { NodeVerdicts } from '../../src/agent/node-pod-metrics.ts';
import { nodeConfig, nodeSettings } from '../../src/config/node-config.ts';
import { resolveSettings } from '../../src/config/settings.ts';
import { kubeletVolumePath, nodeAgentServes, whoServes } from '../../src/discover/node-pods.ts';
import { discoverTargets, type VolumeTarget } from '../../src/discover/targets.ts';
import type { ConfigSyncError } from '../../src/errors.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import { createNodeMetrics } from '../../src/metrics/node-metrics.ts';
import { keyId } from '../../src/verify/fingerprint.ts';

const running = (annotations: Record<string, string> = {}, containers = ['app']): V1Pod => ({
  metadata: { name: 'web-1', namespace: 'shop', uid: 'uid-1', annotations },
  spec: { containers: containers.map((name) => ({ name })) },
  status: { phase: 'Running' },
});
const ENABLED = { 'config-sync.io/node-agent': 'enabled' };

describe('which Pods the node agent serves', () => {
  it.each([
    ['a Pod of an opted-in namespace', running(), ENABLED, true, /namespace is labelled/],
    ['a Pod that opts itself in', running(ENABLED), undefined, true, /annotation .* is enabled/],
    [
      'a Pod that opts out of an opted-in namespace: the Pod wins',
      running({ 'config-sync.io/node-agent': 'disabled' }),
      ENABLED,
      false,
      /disabled/,
    ],
    ['a Pod of a namespace not opted in', running(), { other: 'x' }, false, /^not opted in$/],
    [
      'a Pod with a config-sync sidecar: left to it',
      running(ENABLED, ['app', 'config-sync']),
      ENABLED,
      false,
      /sidecar/,
    ],
    [
      'a Pending Pod: nothing to read yet',
      { ...running(ENABLED), status: { phase: 'Pending' } },
      ENABLED,
      false,
      /Pending, not Running/,
    ],
    [
      'a Pod that ended',
      { ...running(ENABLED), status: { phase: 'Succeeded' } },
      ENABLED,
      false,
      /Succeeded/,
    ],
    [
      'a Pod being deleted: kubelet tears its volumes down',
      { ...running(ENABLED), metadata: { ...running(ENABLED).metadata, deletionTimestamp: new Date() } },
      ENABLED,
      false,
      /being deleted/,
    ],
  ] as const)('%s', (_what, pod, labels, serve, why) => {
    const decision = nodeAgentServes(pod as V1Pod, labels);
    expect(decision.serve).toBe(serve);
    expect(decision.why).toMatch(why);
  });

  it('a value neither enabled nor disabled is not served, and returned to be reported', () => {
    const decision = nodeAgentServes(running({ 'config-sync.io/node-agent': 'yes' }), ENABLED);
    expect(decision).toMatchObject({ serve: false, badValue: 'yes' });
    expect(decision.why).toMatch(/"yes", neither enabled nor disabled/);
  });

  it("a native sidecar named config-sync counts as the Pod's own sidecar", () => {
    const pod = running(ENABLED);
    pod.spec = {
      containers: [{ name: 'app' }],
      initContainers: [{ name: 'config-sync', restartPolicy: 'Always' }],
    };
    expect(nodeAgentServes(pod, undefined).serve).toBe(false);
  });
});

describe('who checks a Pod, as doctor says it', () => {
  it('its sidecar; else the node agent, naming why; else nobody, with how to opt in', () => {
    expect(whoServes(running(ENABLED, ['app', 'config-sync']), undefined)).toBe(
      'its config-sync sidecar checks it',
    );
    // doctor may run before the Pod runs: the phase is not what it judges.
    const pending = { ...running(), status: { phase: 'Pending' } };
    expect(whoServes(pending, ENABLED)).toMatch(
      /the node agent .* checks it, since its namespace is labelled/,
    );
    expect(whoServes(running(), {})).toMatch(
      /not opted in to the node agent: nothing checks its configuration; .*config-sync\.io\/node-agent: enabled/,
    );
    expect(whoServes(running(), undefined)).toMatch(/its namespace could not be read/);
    expect(whoServes(running({ 'config-sync.io/node-agent': 'on' }), undefined)).toMatch(
      /"on", neither enabled nor disabled; set it/,
    );
  });
});

describe("where a Pod's files are in kubelet's directory", () => {
  const pod: V1Pod = {
    metadata: { name: 'web-1', namespace: 'shop', uid: 'u-1' },
    spec: {
      volumes: [
        { name: 'config', configMap: { name: 'web-config' } },
        { name: 'creds', secret: { secretName: 'web-secrets' } },
        { name: 'all', projected: { sources: [{ configMap: { name: 'web-config' } }] } },
      ],
      containers: [
        {
          name: 'app',
          volumeMounts: [
            { name: 'data', mountPath: '/data' },
            { name: 'config', mountPath: '/etc/app' },
            { name: 'config', mountPath: '/etc/log.yaml', subPath: 'log.yaml' },
            { name: 'creds', mountPath: '/etc/creds' },
            { name: 'all', mountPath: '/etc/all' },
          ],
        },
      ],
    },
  };
  const targets = discoverTargets(pod, { self: 'config-sync' }).targets as VolumeTarget[];
  const at = (mountPath: string) =>
    kubeletVolumePath(
      '/var/lib/kubelet',
      pod,
      targets.find((t) => t.mountPath === mountPath) as VolumeTarget,
    );

  it('a volume: pods/<uid>/volumes/<plugin, / escaped as ~>/<volume>', () => {
    expect(at('/etc/app')).toBe('/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~configmap/config');
    expect(at('/etc/creds')).toBe('/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~secret/creds');
    expect(at('/etc/all')).toBe('/var/lib/kubelet/pods/u-1/volumes/kubernetes.io~projected/all');
  });

  it("a subPath file: pods/<uid>/volume-subpaths/<volume>/<container>/<the mount's index in its container>", () => {
    // Index 2: the emptyDir mount before it counts, as in kubelet's makeMounts.
    expect(at('/etc/log.yaml')).toBe('/var/lib/kubelet/pods/u-1/volume-subpaths/config/app/2');
  });
});

describe("the node agent's configuration", () => {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'node-config-'));
  const make = (env: Record<string, string>, args: string[] = []) =>
    nodeConfig(resolveSettings('node', nodeSettings, args, { CONFIG_SYNC_KUBELET_ROOT: root, ...env }));
  const failure = (env: Record<string, string>, args: string[] = []) => {
    try {
      make(env, args);
    } catch (error) {
      return error as ConfigSyncError;
    }
    throw new Error('no error');
  };

  it('takes its node from NODE_NAME and its namespaces from a list', () => {
    const config = make({ NODE_NAME: 'node-1', CONFIG_SYNC_NAMESPACES: 'shop, payments,shop' });
    expect(config).toMatchObject({ nodeName: 'node-1', namespaces: ['shop', 'payments'], kubeletRoot: root });
    expect(config.agent.stateDir).toBe('/var/lib/config-sync');
  });

  it('refuses what it cannot run with, saying where to fix it', () => {
    expect(failure({ CONFIG_SYNC_NAMESPACES: 'shop' })).toMatchObject({
      code: 'CS_CONFIG_NO_NODE',
      hint: /spec\.nodeName/,
    });
    expect(failure({ NODE_NAME: 'node-1' })).toMatchObject({
      code: 'CS_CONFIG_NO_NAMESPACES',
      hint: /CONFIG_SYNC_NAMESPACES/,
    });
    expect(failure({ NODE_NAME: 'node-1', CONFIG_SYNC_NAMESPACES: 'Shop' })).toMatchObject({
      code: 'CS_USAGE_BAD_NAMESPACE',
      message: /"Shop" \(from CONFIG_SYNC_NAMESPACES\)/,
    });
    expect(
      failure({
        NODE_NAME: 'node-1',
        CONFIG_SYNC_NAMESPACES: 'shop',
        CONFIG_SYNC_KUBELET_ROOT: '/nonexistent/kubelet',
      }),
    ).toMatchObject({ code: 'CS_CONFIG_KUBELET_ROOT', message: /from CONFIG_SYNC_KUBELET_ROOT/ });
    expect(
      failure({ NODE_NAME: 'node-1', CONFIG_SYNC_NAMESPACES: 'shop' }, [
        '--on-drift',
        'reload',
        '--reload-url',
        'http://127.0.0.1:1/',
      ]),
    ).toMatchObject({
      code: 'CS_USAGE_BAD_FLAG',
      message: /reload is not available to the node agent/,
    });
  });

  it('has no flag of the sidecar that names its one Pod or its mounts', () => {
    const names = nodeSettings.map((d) => d.name);
    for (const sidecarOnly of ['pod', 'container', 'self-container', 'watch', 'mount-root'])
      expect(names).not.toContain(sidecarOnly);
    expect(names).toEqual(
      expect.arrayContaining(['node-name', 'namespaces', 'kubelet-root', 'state-dir', 'grace']),
    );
  });
});

describe("a Pod's key in the node agent", () => {
  it('is derived from the node key and the Pod uid: the same on a restart, another for another Pod', () => {
    const node = Buffer.alloc(32, 7);
    expect(podKey(node, 'uid-1')).toEqual(podKey(node, 'uid-1'));
    expect(keyId(podKey(node, 'uid-1'))).not.toBe(keyId(podKey(node, 'uid-2')));
    expect(keyId(podKey(node, 'uid-1'))).not.toBe(keyId(podKey(Buffer.alloc(32, 8), 'uid-1')));
  });
});

describe("the node agent's metrics", () => {
  it('a series per Pod out of sync, removed once it is in sync or no longer served; in_sync is 1 while there is none', async () => {
    const metrics = createNodeMetrics(createMetrics());
    const verdicts = new NodeVerdicts(metrics);
    const text = () => metrics.registry.metrics();
    const a = verdicts.forPod('shop', 'web-1');
    const b = verdicts.forPod('shop', 'web-2');
    a.inSync(true, 1_000);
    b.inSync(false, 1_000);
    expect(await text()).toContain('config_sync_pod_out_of_sync{namespace="shop",pod="web-2"} 1');
    expect(await text()).toMatch(/^config_sync_in_sync 0$/m);
    b.inSync(true, 2_000);
    expect(await text()).not.toContain('pod="web-2"');
    expect(await text()).toMatch(/^config_sync_in_sync 1$/m);
    expect(await text()).toMatch(/^config_sync_last_success_timestamp_seconds 2$/m);
    a.inSync(false, 3_000);
    verdicts.forget('shop', 'web-1');
    expect(await text()).not.toContain('pod="web-1"');
    expect(await text()).toMatch(/^config_sync_in_sync 1$/m);
  });
});

describe("the node agent's admission policy for workloads", () => {
  const validations = (file: string) => {
    const [policy] = parseAllDocuments(
      fs.readFileSync(path.resolve(import.meta.dirname, '../..', file), 'utf8'),
    );
    if (!policy) throw new Error(`${file} has no policy`);
    const spec = (policy.toJS() as { spec: Record<string, unknown> }).spec;
    return { validations: spec.validations, variables: spec.variables, match: spec.matchConstraints };
  };

  it("holds the node agent's token to exactly the sidecar's rules: a restart, nothing else", () => {
    expect(validations('deploy/node/node-workload-policy.yaml')).toEqual(
      validations('deploy/sidecar/rbac/own-workload-policy.yaml'),
    );
  });
});

describe("the fingerprint key's file", () => {
  it('is made whole once and read back; a key of another size says to delete it, not to mount an emptyDir', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'digest-key-'));
    const made = loadDigestKey(dir);
    expect(made).toMatchObject({ persistent: true });
    expect(loadDigestKey(dir).key).toEqual(made.key);
    expect(fs.readdirSync(dir)).toEqual(['fingerprint.key']);
    // A full tmpfs once left a 0-byte key, and every later start used a throwaway one.
    fs.writeFileSync(path.join(dir, 'fingerprint.key'), '');
    const short = loadDigestKey(dir);
    expect(short.persistent).toBe(false);
    expect(short.note).toMatch(
      /fingerprint\.key is 0 bytes, not a 32-byte key: .*delete .*fingerprint\.key and restart the agent/,
    );
    expect(short.note).not.toContain('emptyDir');
  });
});
