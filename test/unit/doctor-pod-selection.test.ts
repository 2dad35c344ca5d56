// doctor's reading of a Pod's config-sync annotations: what they leave out, as its agent reads
// them, and each value that cannot be read as a problem with its code, domain and hint.
import type { V1Pod } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { discoverTargets } from '../../src/discover/targets.ts';
import { podSelectionReport } from '../../src/doctor/pod-selection.ts';

const pod = (annotations: Record<string, string>, sidecar = false): V1Pod => ({
  metadata: { name: 'web-1', annotations },
  spec: {
    volumes: [
      { name: 'config', configMap: { name: 'web-config' } },
      { name: 'cache', configMap: { name: 'cache-seed' } },
    ],
    containers: [
      {
        name: 'app',
        image: 'x',
        volumeMounts: [
          { name: 'config', mountPath: '/etc/app' },
          { name: 'cache', mountPath: '/var/cache' },
        ],
        env: [{ name: 'PW', valueFrom: { secretKeyRef: { name: 'db', key: 'pw' } } }],
      },
    ],
    initContainers: sidecar ? [{ name: 'config-sync', image: 'c', restartPolicy: 'Always' }] : [],
  },
});

const report = (p: V1Pod) => podSelectionReport(p, discoverTargets(p, { self: 'config-sync' }).targets);

describe('podSelectionReport', () => {
  it('leaves out what the annotations name, and says so', () => {
    const r = report(pod({ 'config-sync.io/ignore': 'volume/cache', 'config-sync.io/secret-env': 'ignore' }));
    expect(r.targets.map((t) => (t.type === 'volume' ? t.volume : t.ref.name))).toEqual(['config']);
    expect(r.lines).toEqual([
      'container app: volume cache at /var/cache: not checked, config-sync.io/ignore names volume/cache',
      'container app: env from Secret db: not checked, config-sync.io/secret-env is ignore',
    ]);
    expect(r.problems).toEqual([]);
  });

  it('reads them as the agent that serves the Pod: reload is a problem for the node agent only', () => {
    const reload = {
      'config-sync.io/on-drift': 'reload',
      'config-sync.io/reload-url': 'http://127.0.0.1:1/',
    };
    expect(report(pod(reload, true)).problems).toEqual([]);
    expect(report(pod(reload, false)).problems).toEqual([
      {
        code: 'CS_CONFIG_BAD_ANNOTATION',
        domain: 'config',
        message:
          'Pod web-1: config-sync.io/on-drift="reload" is not available to the node agent (a reload\'s trigger is one app\'s); write restart or alert-only, or run the sidecar beside this app for reload mode',
        hint: 'fix the annotation on the Pod template; until then the agent reports drift in this Pod and never restarts it',
      },
    ]);
  });
});
