// inject: the sidecar added where it belongs, nothing else touched, twice the same as once, and a
// clear refusal of what cannot work.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { resolveSettings } from '../../src/config/settings.ts';
import {
  quantityValue,
  sidecarResourceSettings,
  sidecarResources,
} from '../../src/config/sidecar-resources.ts';
import { sidecarAgentEnv, sidecarSettings } from '../../src/config/sidecar-settings.ts';
import { ConfigSyncError } from '../../src/errors.ts';
import { isImageReference } from '../../src/inject/image-ref.ts';
import { injectManifests } from '../../src/inject/inject.ts';
import { DEFAULT_SIDECAR } from '../../src/inject/sidecar.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const inject = (source: string) => injectManifests(source, 'in.yaml', DEFAULT_SIDECAR);

const service = `# a Service, formatted by hand
apiVersion: v1
kind: Service
metadata: {name: web}     # odd spacing stays
spec:
  ports: [ {port: 80} ]
`;

const deployment = (extra = '') => `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web  # the app
spec:
  template:
    spec:${extra}
      volumes:
        - name: config
          configMap: {name: web-config}
        - name: tls
          secret: {secretName: web-tls}
        - name: merged
          projected:
            sources: [{configMap: {name: base}}]
        - name: scratch
          emptyDir: {}
      containers:
        - name: app
          image: nginx
          volumeMounts:
            - {name: config, mountPath: /etc/app}
            - {name: config, mountPath: /etc/app.yaml, subPath: app.yaml}
            - {name: tls, mountPath: /tls}
            - {name: merged, mountPath: /etc/merged}
            - {name: scratch, mountPath: /tmp}
`;

interface PodSpecView {
  serviceAccountName?: string;
  initContainers?: { name: string; restartPolicy?: string; volumeMounts?: unknown[] }[];
  volumes?: { name: string; [field: string]: unknown }[];
}

function podSpecOf(output: string, index: number): PodSpecView {
  const doc = parseAllDocuments(output)[index];
  if (!doc) throw new Error(`no document ${index} in the output`);
  return (doc.toJSON() as { spec: { template: { spec: PodSpecView } } }).spec.template.spec;
}

function errorOf(fn: () => unknown): ConfigSyncError {
  try {
    fn();
  } catch (e) {
    if (e instanceof ConfigSyncError) return e;
    throw e;
  }
  throw new Error('expected a ConfigSyncError');
}

describe('inject', () => {
  it('adds the native sidecar with read-only mounts of every config volume, and the ServiceAccount', () => {
    const { output, injected } = inject(deployment());
    expect(injected).toEqual(['Deployment web']);
    const spec = podSpecOf(output, 0);
    expect(spec.serviceAccountName).toBe('config-sync-agent');
    const sidecar = spec.initContainers?.[0];
    expect(sidecar).toMatchObject({ name: 'config-sync', restartPolicy: 'Always' });
    expect(sidecar?.volumeMounts).toEqual([
      { name: 'config', mountPath: '/etc/app', readOnly: true },
      { name: 'config', mountPath: '/etc/app.yaml', subPath: 'app.yaml', readOnly: true },
      { name: 'tls', mountPath: '/tls', readOnly: true },
      { name: 'merged', mountPath: '/etc/merged', readOnly: true },
      { name: 'config-sync-state', mountPath: '/var/run/config-sync' },
    ]);
    // Its own emptyDir: the Pod's fingerprint key.
    expect(spec.volumes?.filter((v) => v.name === 'config-sync-state')).toEqual([
      { name: 'config-sync-state', emptyDir: { medium: 'Memory', sizeLimit: '1Mi' } },
    ]);
  });

  it('keeps every other document byte for byte, and comments in the one it changes', () => {
    const { output } = inject(`${service}${deployment()}`);
    expect(output.startsWith(service)).toBe(true);
    expect(output).toContain('name: web # the app');
  });

  it('injecting twice changes nothing', () => {
    const once = inject(`${service}${deployment()}`).output;
    const twice = inject(once);
    expect(twice.output).toBe(once);
    expect(twice.injected).toEqual([]);
  });

  it('a stream with nothing to inject comes out identical', () => {
    expect(inject(service).output).toBe(service);
  });

  it('handles Pods, StatefulSets, DaemonSets and Lists', () => {
    const list = `apiVersion: v1
kind: List
items:
  - apiVersion: apps/v1
    kind: StatefulSet
    metadata: {name: db}
    spec:
      template:
        spec:
          volumes: [{name: c, configMap: {name: db-config}}]
          containers: [{name: db, image: postgres, volumeMounts: [{name: c, mountPath: /etc/db}]}]
---
apiVersion: v1
kind: Pod
metadata: {name: once}
spec:
  volumes: [{name: c, secret: {secretName: s}}]
  containers: [{name: app, image: x, volumeMounts: [{name: c, mountPath: /s}]}]
`;
    expect(inject(list).injected).toEqual(['StatefulSet db', 'Pod once']);
  });

  it('leaves a Job alone, with a note', () => {
    const job =
      'apiVersion: batch/v1\nkind: Job\nmetadata: {name: migrate}\nspec: {template: {spec: {containers: [{name: m, image: x}]}}}\n';
    const result = inject(job);
    expect(result.output).toBe(job);
    expect(result.notes).toEqual([
      'Job migrate left alone: config-sync restarts only the Pods of a Deployment, StatefulSet, DaemonSet or Rollout',
    ]);
  });

  it("passes the template's config-sync annotations through, and names one the agent cannot read", () => {
    const annotated = deployment().replace(
      'spec:\n  template:\n    spec:',
      'spec:\n  template:\n    metadata:\n      annotations: {config-sync.io/ignore: "volume/tls", config-sync.io/grace: soon}\n    spec:',
    );
    expect(annotated).toContain('config-sync.io/grace: soon');
    const result = inject(annotated);
    expect(result.injected).toEqual(['Deployment web']);
    expect(parse(result.output.replace(/^---\n/, '')).spec.template.metadata.annotations).toEqual({
      'config-sync.io/ignore': 'volume/tls',
      'config-sync.io/grace': 'soon',
    });
    expect(result.notes).toEqual([
      'in.yaml: Deployment web: invalid annotation: config-sync.io/grace="soon" is not a duration; write e.g. 30s, 2m or 1m30s; the agent will report drift there and never restart it',
    ]);
  });

  it('leaves a workload that mounts no ConfigMap or Secret alone, with a note', () => {
    const plain =
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: bare}\nspec: {template: {spec: {containers: [{name: a, image: x}]}}}\n';
    const result = inject(plain);
    expect(result.output).toBe(plain);
    expect(result.notes[0]).toContain('mounts no ConfigMap or Secret');
  });

  it.each([
    ['\n      serviceAccountName: payments', 'CS_INJECT_SERVICE_ACCOUNT', '--service-account payments'],
    ['\n      automountServiceAccountToken: false', 'CS_INJECT_NO_TOKEN', 'remove it'],
  ])('refuses %j with %s', (extra, code, hint) => {
    const e = errorOf(() => inject(deployment(extra)));
    expect(e.code).toBe(code);
    expect(e.hint).toContain(hint);
    expect(e.message).toMatch(/^in\.yaml: Deployment web /);
  });

  it('reports a YAML error with the line in the whole stream', () => {
    const e = errorOf(() => inject(`${service}---\nkind: Deployment\nmetadata: [oops\n`));
    expect(e.code).toBe('CS_INJECT_YAML');
    expect(e.message).toBe(
      'in.yaml: line 10: Flow sequence in block collection must be sufficiently indented and end with a ]',
    );
  });

  it('builds the same sidecar as the shipped example', () => {
    const example = parse(fs.readFileSync(path.join(root, 'deploy/sidecar/example/deployment.yaml'), 'utf8'));
    const shipped = example.spec.template.spec.initContainers[0];
    const withoutSidecar = structuredClone(example);
    withoutSidecar.spec.template.spec.initContainers = [];
    const { output } = inject(JSON.stringify(withoutSidecar));
    expect(podSpecOf(output, 0).initContainers?.[0]).toEqual(shipped);
  });
});

describe('isImageReference', () => {
  const digest = `sha256:${'a'.repeat(64)}`;
  it.each([
    'config-sync:0.1.0',
    'config-sync',
    'registry.example/config-sync:0.1.0',
    'localhost:5000/team/config-sync:v1',
    `ghcr.io/org/config-sync@${digest}`,
    `config-sync:0.1.0@${digest}`,
    '[::1]:5000/config-sync:1',
    'a__b/c-d.e:Tag_1.2-3',
  ])('%s is a reference', (ref) => {
    expect(isImageReference(ref)).toBe(true);
  });

  it.each([
    'bad image ref!!',
    'UPPER/case:1',
    'Upper:1',
    'a:b:c',
    '',
    'x:',
    ':tag',
    'x@sha256:zz',
    '-x:1',
    'registry.example/',
    `${'a'.repeat(256)}:1`,
  ])('%j is not', (ref) => {
    expect(isImageReference(ref)).toBe(false);
  });
});

describe('the injected agent’s settings (inject and webhook: --sidecar-grace, --sidecar-debounce, --sidecar-on-drift)', () => {
  const settingsOf = (args: string[], env: Record<string, string> = {}) =>
    sidecarAgentEnv('inject', resolveSettings('inject', sidecarSettings, args, env));

  it('become the agent’s own environment variables in the sidecar', () => {
    const agentEnv = settingsOf(['--sidecar-grace', '2m', '--sidecar-on-drift', 'alert-only']);
    expect(agentEnv).toEqual({ CONFIG_SYNC_GRACE: '2m', CONFIG_SYNC_ON_DRIFT: 'alert-only' });
    const out = injectManifests(
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      volumes: [{name: c, configMap: {name: cfg}}]\n      containers: [{name: app, image: a, volumeMounts: [{name: c, mountPath: /etc/app}]}]\n',
      'in.yaml',
      { ...DEFAULT_SIDECAR, agentEnv },
    );
    const sidecar = (
      parse(out.output) as { spec: { template: { spec: { initContainers: { env: unknown[] }[] } } } }
    ).spec.template.spec.initContainers[0];
    expect(sidecar?.env).toEqual(
      expect.arrayContaining([
        { name: 'CONFIG_SYNC_GRACE', value: '2m' },
        { name: 'CONFIG_SYNC_ON_DRIFT', value: 'alert-only' },
      ]),
    );
  });

  it('none given: none set, the agent keeps its defaults', () => {
    expect(settingsOf([])).toEqual({});
  });

  it.each([
    [['--sidecar-grace', '2x'], {}, '--sidecar-grace 2x is not a duration'],
    [[], { CONFIG_SYNC_SIDECAR_DEBOUNCE: '48h' }, 'CONFIG_SYNC_SIDECAR_DEBOUNCE=48h is out of range'],
    [
      ['--sidecar-on-drift', 'reload'],
      {},
      '--sidecar-on-drift reload (from --sidecar-on-drift) is not restart or alert-only',
    ],
  ])('%j %j: refused where it was given', (args, env, message) => {
    expect(() => settingsOf(args, env)).toThrow(message);
  });
});

describe('the injected agent’s resources (inject and webhook: --sidecar-cpu-request, --sidecar-memory-request, --sidecar-memory-limit)', () => {
  const resourcesOf = (args: string[], env: Record<string, string> = {}) =>
    sidecarResources('webhook', resolveSettings('webhook', sidecarResourceSettings, args, env));
  const manifest =
    'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      volumes: [{name: c, configMap: {name: cfg}}]\n      containers: [{name: app, image: a, volumeMounts: [{name: c, mountPath: /etc/app}]}]\n';
  const sidecarOf = (output: string) =>
    (parse(output) as { spec: { template: { spec: { initContainers: { resources: unknown }[] } } } }).spec
      .template.spec.initContainers[0];

  it('none given: the defaults the benchmarks sized, as deploy/sidecar/example has them', () => {
    const resources = resourcesOf([]);
    expect(resources).toEqual({ requests: { cpu: '10m', memory: '128Mi' }, limits: { memory: '192Mi' } });
    expect(sidecarOf(injectManifests(manifest, 'in.yaml', DEFAULT_SIDECAR).output)?.resources).toEqual(
      resources,
    );
  });

  it('given (a flag or its environment variable): set on the sidecar, the rest kept', () => {
    const resources = resourcesOf(['--sidecar-memory-limit', '256Mi'], {
      CONFIG_SYNC_SIDECAR_MEMORY_REQUEST: '160Mi',
    });
    expect(resources).toEqual({ requests: { cpu: '10m', memory: '160Mi' }, limits: { memory: '256Mi' } });
    expect(
      sidecarOf(injectManifests(manifest, 'in.yaml', { ...DEFAULT_SIDECAR, resources }).output)?.resources,
    ).toEqual(resources);
  });

  it.each([
    [
      ['--sidecar-memory-request', '128MB'],
      {},
      '--sidecar-memory-request 128MB (from --sidecar-memory-request) is not a positive Kubernetes quantity',
    ],
    [[], { CONFIG_SYNC_SIDECAR_CPU_REQUEST: '-1' }, 'CONFIG_SYNC_SIDECAR_CPU_REQUEST'],
    [['--sidecar-cpu-request', '0'], {}, 'is not a positive Kubernetes quantity'],
    [
      ['--sidecar-memory-request', '256Mi'],
      {},
      "the sidecar's memory request 256Mi (from --sidecar-memory-request) is above its limit 192Mi (from the default)",
    ],
  ])('%j %j: refused where it was given', (args, env, message) => {
    expect(() => resourcesOf(args, env)).toThrow(message);
  });

  it('reads quantities as Kubernetes does', () => {
    expect(quantityValue('128Mi')).toBe(128 * 2 ** 20);
    expect(quantityValue('1G')).toBe(1e9);
    expect(quantityValue('10m')).toBeCloseTo(0.01);
    expect(quantityValue('0.5')).toBe(0.5);
    expect(quantityValue('1e3')).toBe(1000);
    expect(quantityValue('128MB')).toBeUndefined();
    expect(quantityValue('')).toBeUndefined();
  });
});
