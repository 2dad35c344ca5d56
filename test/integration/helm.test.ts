// The Helm chart (deploy/helm/config-sync) with Helm v4 built from the Go module proxy
// (test/cluster/build-tool.sh): lint, the objects it shares with the kustomize bases rendered and
// compared, and install, upgrade and uninstall against the real API server into a namespace
// under Pod Security "restricted", with no warnings and nothing left behind.
//
// The release here is named and labelled so that it never meets the other tests: its webhook
// asks for a label no other test uses, and the cluster-scoped admission policies (which other
// tests apply with kustomize) are compared by rendering, not installed.
import { execFileSync, spawnSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { requiredAccess, rulesFor } from '../../src/kube/permissions.ts';
import { buildTool } from '../cluster/assets.ts';
import { controlPlane, useNamespace } from './support.ts';
import { root } from './support-app.ts';

const chart = path.join(root, 'deploy/helm/config-sync');
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'helm-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));
let helmBin = '';

interface Obj {
  apiVersion: string;
  kind: string;
  metadata: {
    name: string;
    namespace?: string;
    labels?: Record<string, string>;
    annotations?: Record<string, string>;
  };
  [field: string]: unknown;
}

/** The parts of a rendered Pod spec the node agent's test compares. */
interface PodSpecLike {
  containers: Record<string, unknown>[];
  volumes?: unknown;
  tolerations?: unknown;
  serviceAccountName?: string;
}

/** `--set` flags, one per value. */
const set = (...values: string[]) => values.flatMap((v) => ['--set', v]);

function helm(...args: string[]) {
  return spawnSync(helmBin, args, {
    encoding: 'utf8',
    env: {
      PATH: process.env.PATH ?? '',
      HOME: tmp,
      KUBECONFIG: controlPlane().adminKubeconfig,
      HELM_CACHE_HOME: path.join(tmp, 'cache'),
      HELM_CONFIG_HOME: path.join(tmp, 'config'),
      HELM_DATA_HOME: path.join(tmp, 'data'),
    },
  });
}

/** `helm template` of the chart as release config-sync, with these flags. */
const template = (...args: string[]) => helm('template', 'config-sync', chart, ...args);

/** The objects the chart renders with these values set. */
const render = (...values: string[]) => docs(template(...set(...values)).stdout);

function kubectl(...args: string[]): string {
  return execFileSync(controlPlane().kubectl, ['--kubeconfig', controlPlane().adminKubeconfig, ...args], {
    encoding: 'utf8',
  });
}

const docs = (yaml: string): Obj[] =>
  parseAllDocuments(yaml)
    .map((d) => d.toJSON() as Obj | null)
    .filter((o): o is Obj => o !== null);
const find = (objs: Obj[], kind: string) => objs.filter((o) => o.kind === kind);

/** What only the chart adds to an object: Helm's labels, the release in the selector, the caBundle. */
interface AntiAffinity {
  podAntiAffinity?: {
    preferredDuringSchedulingIgnoredDuringExecution?: {
      podAffinityTerm: { labelSelector: { matchLabels?: Record<string, string> } };
    }[];
  };
}

function withoutChartOnly(obj: Obj): unknown {
  const copy = structuredClone(obj) as Record<string, unknown> & Obj;
  const strip = (labels: Record<string, string> | undefined) => {
    if (!labels) return;
    for (const k of [
      'app.kubernetes.io/instance',
      'app.kubernetes.io/managed-by',
      'app.kubernetes.io/version',
      'helm.sh/chart',
    ])
      delete labels[k];
  };
  strip(copy.metadata.labels);
  delete copy.metadata.annotations; // the kustomize base's cert-manager hint
  delete copy.metadata.namespace;
  const spec = copy.spec as
    | {
        selector?: Record<string, string> & { matchLabels?: Record<string, string> };
        template?: { metadata?: { labels?: Record<string, string> } };
      }
    | undefined;
  strip(spec?.selector?.matchLabels);
  strip(spec?.template?.metadata?.labels);
  // The webhook's replicas prefer different nodes: the term selects them by the same labels.
  const affinity = (spec?.template as { spec?: { affinity?: AntiAffinity } } | undefined)?.spec?.affinity;
  for (const term of affinity?.podAntiAffinity?.preferredDuringSchedulingIgnoredDuringExecution ?? [])
    strip(term.podAffinityTerm.labelSelector.matchLabels);
  if (spec?.selector && !spec.selector.matchLabels) strip(spec.selector);
  for (const w of (copy.webhooks as { clientConfig: { caBundle?: string } }[] | undefined) ?? [])
    delete w.clientConfig.caBundle;
  return copy;
}

beforeAll(async () => {
  helmBin = await buildTool('helm');
}, 900_000);

describe('the chart', () => {
  it('helm lint --strict: no warning, no error', () => {
    const run = helm('lint', '--strict', chart);
    expect(run.status).toBe(0);
    expect(run.stdout).not.toMatch(/\[(WARNING|ERROR)\]/);
  });

  it('states the Kubernetes it needs: refuses 1.28, and on 1.29 the admission policies and the node agent, with the fix', () => {
    const old = template('--kube-version', 'v1.28.9');
    expect(old.status).not.toBe(0);
    expect(old.stderr).toContain('chart requires kubeVersion: >=1.29.0-0');
    const policies = template('--kube-version', 'v1.29.4');
    expect(policies.status).not.toBe(0);
    expect(policies.stderr).toMatch(
      /admissionPolicies\.enabled needs Kubernetes 1\.30 .* set admissionPolicies\.enabled=false/,
    );
    const node = template(
      '--kube-version',
      'v1.29.4',
      '--set',
      'admissionPolicies.enabled=false',
      '--set',
      'nodeAgent.enabled=true',
      '--set',
      'nodeAgent.namespaces={shop}',
    );
    expect(node.stderr).toMatch(/nodeAgent\.enabled needs Kubernetes 1\.30/);
    const sidecarOnly = template('--kube-version', 'v1.29.4', '--set', 'admissionPolicies.enabled=false');
    expect(sidecarOnly.status, sidecarOnly.stderr).toBe(0);
    expect(docs(sidecarOnly.stdout).some((d) => d.kind === 'ValidatingAdmissionPolicy')).toBe(false);
  });

  it('renders the webhook exactly as deploy/webhook has it, for a release named config-sync in config-sync-system', () => {
    const rendered = docs(template('-n', 'config-sync-system').stdout);
    const base = docs(kubectl('kustomize', path.join(root, 'deploy/webhook')));
    for (const kind of ['Deployment', 'Service', 'MutatingWebhookConfiguration', 'PodDisruptionBudget']) {
      const [ours] = find(rendered, kind);
      const [theirs] = find(base, kind);
      expect(ours, kind).toBeDefined();
      expect(withoutChartOnly(ours as Obj), kind).toEqual(withoutChartOnly(theirs as Obj));
    }
  });

  it('renders the admission policies, alert rules and dashboard from the same files', () => {
    const rendered = render('prometheusRule.enabled=true', 'dashboard.enabled=true');
    const policies = ['own-pod-policy.yaml', 'own-workload-policy.yaml', 'own-rollout-policy.yaml'].flatMap(
      (f) => docs(fs.readFileSync(path.join(root, 'deploy/sidecar/rbac', f), 'utf8')),
    );
    expect(
      find(rendered, 'ValidatingAdmissionPolicy').concat(find(rendered, 'ValidatingAdmissionPolicyBinding')),
    ).toEqual(expect.arrayContaining(policies));
    expect(policies).toHaveLength(6);
    const [rule] = find(rendered, 'PrometheusRule');
    const [source] = docs(
      fs.readFileSync(path.join(root, 'deploy/sidecar/monitoring/prometheus-rule.yaml'), 'utf8'),
    );
    expect((rule as Obj).spec).toEqual((source as Obj).spec);
    const [dashboard] = find(rendered, 'ConfigMap');
    expect((dashboard as Obj & { data: Record<string, string> }).data['config-sync.json']).toBe(
      fs.readFileSync(path.join(root, 'deploy/sidecar/monitoring/dashboard.json'), 'utf8'),
    );
  });

  it("renders a ServiceMonitor for the webhook's metrics port, only with the webhook", () => {
    const rendered = render('serviceMonitor.enabled=true', 'serviceMonitor.labels.release=prom');
    const [monitor] = find(rendered, 'ServiceMonitor') as (Obj & {
      metadata: { labels: Record<string, string> };
      spec: { selector: { matchLabels: Record<string, string> }; endpoints: { port: string }[] };
    })[];
    expect(monitor?.metadata.labels.release).toBe('prom');
    const service = find(rendered, 'Service').find((o) =>
      Object.entries(monitor?.spec.selector.matchLabels ?? { none: '' }).every(
        ([k, v]) => (o.metadata as { labels?: Record<string, string> }).labels?.[k] === v,
      ),
    ) as (Obj & { spec: { ports: { name: string; targetPort: string }[] } }) | undefined;
    const port = service?.spec.ports.find((p) => p.name === monitor?.spec.endpoints[0]?.port);
    expect(port).toMatchObject({ name: 'metrics', port: 9464, targetPort: 'metrics' });
    const webhook = find(rendered, 'Deployment')[0] as unknown as {
      spec: {
        template: {
          spec: { containers: { args: string[]; ports: { name: string; containerPort: number }[] }[] };
        };
      };
    };
    const container = webhook.spec.template.spec.containers[0];
    expect(container?.ports).toContainEqual({ name: 'metrics', containerPort: 9464 });
    expect(container?.args.join(' ')).toContain('--metrics-listen :9464');
    expect(find(render('serviceMonitor.enabled=true', 'webhook.enabled=false'), 'ServiceMonitor')).toEqual(
      [],
    );
  });

  it.each([
    ['Deployment', 'apps', 'deployments'],
    ['Rollout', 'argoproj.io', 'rollouts'],
  ])("the agent's Role for a %s is what the agent's own permissions ask for", (kind, group, resource) => {
    const rendered = render(
      'agent.namespaces[0].namespace=shop',
      'agent.namespaces[0].configMaps[0]=web-config',
      'agent.namespaces[0].secrets[0]=web-secrets',
      `agent.namespaces[0].workload.kind=${kind}`,
      'agent.namespaces[0].workload.name=web',
    );
    const [role] = find(rendered, 'Role') as (Obj & { rules: unknown[] })[];
    const wanted = rulesFor(
      requiredAccess({
        namespace: 'shop',
        sources: [
          { kind: 'ConfigMap', name: 'web-config' },
          { kind: 'Secret', name: 'web-secrets' },
        ],
        replicaSet: 'web-x',
        workload: { kind: kind as 'Deployment' | 'Rollout', name: 'web' },
      }),
    );
    const sortRules = (rules: unknown[]) => [...rules].map((r) => JSON.stringify(r)).sort();
    expect(sortRules(role?.rules ?? [])).toEqual(sortRules(wanted));
    expect(wanted).toContainEqual({
      apiGroups: [group],
      resources: [resource],
      verbs: ['get', 'patch'],
      resourceNames: ['web'],
    });
  });

  it('renders the node agent as deploy/node has it, its policies for the release namespace, and refuses it with no namespaces', () => {
    const rendered = docs(
      template('-n', 'cs-system', ...set('nodeAgent.enabled=true', 'nodeAgent.namespaces={shop,payments}'))
        .stdout,
    );
    const base = docs(kubectl('kustomize', path.join(root, 'deploy/node')));
    const [daemonSet] = find(rendered, 'DaemonSet') as (Obj & {
      spec: { template: { spec: PodSpecLike } };
    })[];
    const [shipped] = find(base, 'DaemonSet') as (Obj & {
      spec: { template: { spec: PodSpecLike } };
    })[];
    const ours = daemonSet?.spec.template.spec;
    const theirs = shipped?.spec.template.spec;
    // The same container but its image and namespaces, the same volumes and Pod-level fields.
    const container = (c: Record<string, unknown> | undefined) => ({
      ...c,
      image: undefined,
      imagePullPolicy: undefined,
      env: undefined,
    });
    expect(container(ours?.containers[0])).toEqual(container(theirs?.containers[0]));
    expect(ours?.containers[0]?.env).toContainEqual({
      name: 'CONFIG_SYNC_NAMESPACES',
      value: 'shop,payments',
    });
    expect(ours?.volumes).toEqual(theirs?.volumes);
    expect(ours?.tolerations).toEqual(theirs?.tolerations);
    expect(ours?.serviceAccountName).toBe(theirs?.serviceAccountName);
    expect(find(rendered, 'RoleBinding').map((b) => b.metadata.namespace)).toEqual(['shop', 'payments']);
    const [role] = find(rendered, 'ClusterRole').filter((r) => r.metadata.name === 'config-sync-node');
    const [shippedRole] = find(base, 'ClusterRole').filter((r) => r.metadata.name === 'config-sync-node');
    expect((role as Obj).rules).toEqual((shippedRole as Obj).rules);
    // Its admission policies match the release's ServiceAccount, not the base's namespace.
    const policies = find(rendered, 'ValidatingAdmissionPolicy').filter((p) =>
      p.metadata.name.startsWith('config-sync-node'),
    );
    expect(policies).toHaveLength(2);
    for (const p of policies)
      expect(JSON.stringify(p)).toContain(
        "request.userInfo.username == 'system:serviceaccount:cs-system:config-sync-node'",
      );
    const refused = template(...set('nodeAgent.enabled=true'));
    expect(refused.status).not.toBe(0);
    expect(refused.stderr).toContain('nodeAgent.enabled needs nodeAgent.namespaces');
  });

  // Argo CD and Flux render the chart without a cluster: what they render must not change from
  // one render to the next, or they show a diff for ever.
  it("renders the same twice with cert-manager or a certificate of the user's own; the chart's own CA is new each time", () => {
    const twice = (...values: string[]) => [template(...set(...values)), template(...set(...values))];
    for (const values of [
      ['webhook.tls.certManager.enabled=true'],
      [
        'webhook.tls.certManager.enabled=true',
        'webhook.tls.certManager.issuerRef.name=cluster-ca',
        'webhook.tls.certManager.issuerRef.kind=ClusterIssuer',
      ],
      ['webhook.tls.existingSecret=my-webhook-tls', 'webhook.tls.caBundle=Q0EgUEVN'],
    ]) {
      const [a, b] = twice(...values);
      expect(a?.status, a?.stderr).toBe(0);
      expect(a?.stdout, values.join(' ')).toBe(b?.stdout);
    }
    const [own1, own2] = twice();
    expect(own1?.stdout).not.toBe(own2?.stdout);

    // cert-manager: a Certificate for the Service's names, the CA injector asked for the
    // caBundle, no Secret of the chart's.
    const rendered = render('webhook.tls.certManager.enabled=true');
    expect(find(rendered, 'Secret')).toEqual([]);
    const [cert] = find(rendered, 'Certificate') as (Obj & {
      spec: { dnsNames: string[]; issuerRef: unknown; secretName: string };
    })[];
    expect(cert?.spec.dnsNames).toContain('config-sync-webhook.default.svc');
    expect(cert?.spec.secretName).toBe('config-sync-webhook-tls');
    expect(cert?.spec.issuerRef).toEqual({
      name: 'config-sync-webhook-selfsigned',
      kind: 'Issuer',
    });
    expect(find(rendered, 'Issuer')).toHaveLength(1);
    const [config] = find(rendered, 'MutatingWebhookConfiguration') as (Obj & {
      webhooks: { clientConfig: { caBundle?: string } }[];
    })[];
    expect(config?.metadata.annotations).toEqual({
      'cert-manager.io/inject-ca-from': 'default/config-sync-webhook-tls',
    });
    expect(config?.webhooks.map((w) => w.clientConfig.caBundle)).toEqual([undefined, undefined]);
    const issuer = render(
      'webhook.tls.certManager.enabled=true',
      'webhook.tls.certManager.issuerRef.name=cluster-ca',
      'webhook.tls.certManager.issuerRef.kind=ClusterIssuer',
    );
    expect(find(issuer, 'Issuer')).toEqual([]);
    const both = template(
      ...set(
        'webhook.tls.certManager.enabled=true',
        'webhook.tls.existingSecret=x',
        'webhook.tls.caBundle=Q0E=',
      ),
    );
    expect(both.stderr).toContain('choose certManager.enabled or existingSecret, not both');
  });

  it("passes the injected sidecar's resources to the webhook, and refuses a quantity Kubernetes would not take", () => {
    const rendered = render(
      'sidecar.resources.requests.memory=160Mi',
      'sidecar.resources.limits.memory=256Mi',
    );
    const [deployment] = find(rendered, 'Deployment') as (Obj & {
      spec: { template: { spec: { containers: { args: string[] }[] } } };
    })[];
    const args = deployment?.spec.template.spec.containers[0]?.args ?? [];
    expect(args.join(' ')).toContain('--sidecar-memory-request 160Mi --sidecar-memory-limit 256Mi');
    expect(args).not.toContain('--sidecar-cpu-request');
    const bad = template(...set('sidecar.resources.requests.memory=128MB'));
    expect(bad.stderr).toContain("at '/sidecar/resources/requests/memory': '128MB' does not match pattern");
  });

  it('schedules as asked: node selector, tolerations, affinity, priority, pull secrets; one replica has no budget', () => {
    const rendered = render(
      'webhook.nodeSelector.pool=system',
      'webhook.tolerations[0].key=dedicated',
      'webhook.tolerations[0].operator=Exists',
      'webhook.priorityClassName=system-cluster-critical',
      'imagePullSecrets[0].name=registry-credentials',
      'nodeAgent.enabled=true',
      'nodeAgent.namespaces={shop}',
      'nodeAgent.priorityClassName=system-node-critical',
      'nodeAgent.nodeSelector.kubernetes\\.io/os=linux',
    );
    const [deployment] = find(rendered, 'Deployment') as (Obj & {
      spec: { template: { spec: Record<string, unknown> } };
    })[];
    expect(deployment?.spec.template.spec).toMatchObject({
      nodeSelector: { pool: 'system' },
      tolerations: [{ key: 'dedicated', operator: 'Exists' }],
      priorityClassName: 'system-cluster-critical',
      imagePullSecrets: [{ name: 'registry-credentials' }],
      affinity: { podAntiAffinity: expect.anything() },
    });
    const [daemonSet] = find(rendered, 'DaemonSet') as (Obj & {
      spec: { template: { spec: Record<string, unknown> } };
    })[];
    expect(daemonSet?.spec.template.spec).toMatchObject({
      nodeSelector: { 'kubernetes.io/os': 'linux' },
      priorityClassName: 'system-node-critical',
      imagePullSecrets: [{ name: 'registry-credentials' }],
    });
    const own = render(
      'webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].key=pool',
      'webhook.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[0].operator=Exists',
    );
    const [d2] = find(own, 'Deployment') as (Obj & { spec: { template: { spec: { affinity: object } } } })[];
    expect(Object.keys(d2?.spec.template.spec.affinity ?? {})).toEqual(['nodeAffinity']);
    expect(find(render('webhook.replicas=1'), 'PodDisruptionBudget')).toEqual([]);
  });

  it("a certificate of the user's own: no Secret made, the caBundle given, and none without it", () => {
    const rendered = render('webhook.tls.existingSecret=my-webhook-tls', 'webhook.tls.caBundle=Q0EgUEVN');
    expect(find(rendered, 'Secret')).toEqual([]);
    const [webhooks] = find(rendered, 'MutatingWebhookConfiguration') as (Obj & {
      webhooks: { clientConfig: { caBundle: string } }[];
    })[];
    expect(webhooks?.webhooks.map((w) => w.clientConfig.caBundle)).toEqual(['Q0EgUEVN', 'Q0EgUEVN']);
    expect(JSON.stringify(find(rendered, 'Deployment'))).toContain('"secretName":"my-webhook-tls"');
    const missing = template(...set('webhook.tls.existingSecret=my-webhook-tls'));
    expect(missing.status).not.toBe(0);
    expect(missing.stderr).toContain('webhook.tls.caBundle: the base64 PEM of the CA that signed');
  });

  it('webhook.namespaceSelector chooses the injected namespaces', () => {
    const rendered = render(
      'webhook.namespaceSelector.matchExpressions[0].key=team',
      'webhook.namespaceSelector.matchExpressions[0].operator=In',
      'webhook.namespaceSelector.matchExpressions[0].values[0]=payments',
    );
    const [config] = find(rendered, 'MutatingWebhookConfiguration') as (Obj & {
      webhooks: { namespaceSelector: unknown }[];
    })[];
    expect(config?.webhooks[0]?.namespaceSelector).toEqual({
      matchExpressions: [{ key: 'team', operator: 'In', values: ['payments'] }],
    });
  });

  it('a workload kind config-sync does not restart is refused at render, naming it', () => {
    const run = template(
      ...set(
        'agent.namespaces[0].namespace=shop',
        'agent.namespaces[0].workload.kind=Job',
        'agent.namespaces[0].workload.name=x',
      ),
    );
    expect(run.status).not.toBe(0);
    expect(run.stderr).toContain(
      "at '/agent/namespaces/0/workload/kind': value must be one of 'Deployment', 'StatefulSet', 'DaemonSet', 'Rollout'",
    );
  });

  // values.schema.json: a value the webhook or the agent would refuse at start (and, with
  // failurePolicy Ignore, Pods made without the sidecar, silently) fails at install instead.
  it('bad values fail helm lint --strict and install, each named: a typo of a key, a duration, a mode', () => {
    const lint = helm(
      'lint',
      '--strict',
      chart,
      ...set('sidecar.grace=abc', 'webhook.replica=3', 'sidecar.onDrift=reload', 'webhook.replicas=0'),
    );
    expect(lint.status).not.toBe(0);
    for (const wanted of [
      "at '/webhook': additional properties 'replica' not allowed",
      "at '/sidecar/grace': 'abc' does not match pattern",
      "at '/sidecar/onDrift': value must be one of '', 'restart', 'alert-only'",
      "at '/webhook/replicas': minimum: got 0, want 1",
    ])
      expect(lint.stdout + lint.stderr).toContain(wanted);
    const install = helm(
      'install',
      'bad-values',
      chart,
      '--dry-run=client',
      ...set('nodeAgent.kubeletRoot=var/lib'),
    );
    expect(install.status).not.toBe(0);
    expect(install.stderr).toContain("at '/nodeAgent/kubeletRoot': 'var/lib' does not match pattern '^/'");
    const good = helm('lint', '--strict', chart, ...set('sidecar.grace=1m30s', 'sidecar.onDrift=alert-only'));
    expect(good.status, good.stdout).toBe(0);
  });

  it('two workloads of one namespace: one ServiceAccount, Role and RoleBinding there, covering both', () => {
    const rendered = render(
      'agent.namespaces[0].namespace=shop',
      'agent.namespaces[0].configMaps={web-config,shared}',
      'agent.namespaces[0].workload.kind=Deployment',
      'agent.namespaces[0].workload.name=web',
      'agent.namespaces[1].namespace=shop',
      'agent.namespaces[1].configMaps={shared,db-config}',
      'agent.namespaces[1].secrets={db-password}',
      'agent.namespaces[1].workload.kind=StatefulSet',
      'agent.namespaces[1].workload.name=db',
      'agent.namespaces[2].namespace=shop',
      'agent.namespaces[2].workloads[0].kind=Deployment',
      'agent.namespaces[2].workloads[0].name=worker',
    );
    for (const kind of ['ServiceAccount', 'Role', 'RoleBinding'])
      expect(find(rendered, kind), kind).toHaveLength(1);
    const [role] = find(rendered, 'Role') as (Obj & {
      rules: { resources: string[]; resourceNames?: string[] }[];
    })[];
    const names = (resource: string) => role?.rules.find((r) => r.resources[0] === resource)?.resourceNames;
    expect(names('configmaps')).toEqual(['web-config', 'shared', 'db-config']);
    expect(names('secrets')).toEqual(['db-password']);
    expect(names('deployments')).toEqual(['web', 'worker']);
    expect(names('statefulsets')).toEqual(['db']);
    const lint = helm('lint', '--strict', chart, ...set('agent.namespaces[0].namespace=shop'));
    expect(lint.stdout + lint.stderr).toContain("at '/agent/namespaces/0': missing property 'workload'");
  });
});

describe('helm install, upgrade, uninstall', () => {
  const system = useNamespace('helm-system');
  const app = useNamespace('helm-app');
  const release = 'cs-helm';
  const values = () => [
    '-n',
    system.name,
    ...set(
      'webhook.injectLabel=config-sync.io/helm-test',
      'admissionPolicies.enabled=false',
      `agent.namespaces[0].namespace=${app.name}`,
      'agent.namespaces[0].configMaps[0]=web-config',
      'agent.namespaces[0].workload.kind=Deployment',
      'agent.namespaces[0].workload.name=web',
    ),
  ];
  const tlsSecret = () =>
    JSON.parse(
      kubectl('-n', system.name, 'get', 'secret', `${release}-config-sync-webhook-tls`, '-o', 'json'),
    ) as {
      data: Record<string, string>;
    };
  const caBundles = () =>
    (
      JSON.parse(
        kubectl('get', 'mutatingwebhookconfiguration', `${release}-config-sync-inject`, '-o', 'json'),
      ) as {
        webhooks: { clientConfig: { caBundle: string } }[];
      }
    ).webhooks.map((w) => w.clientConfig.caBundle);

  it('installs into a namespace under Pod Security restricted, with no warnings; the certificate fits the Service', () => {
    for (const mode of ['enforce', 'warn', 'audit'])
      kubectl(
        'label',
        'namespace',
        system.name,
        `pod-security.kubernetes.io/${mode}=restricted`,
        '--overwrite',
      );
    const run = helm('install', release, chart, ...values());
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const secret = tlsSecret();
    const cert = new X509Certificate(Buffer.from(secret.data['tls.crt'] as string, 'base64'));
    const ca = new X509Certificate(Buffer.from(secret.data['ca.crt'] as string, 'base64'));
    expect(cert.verify(ca.publicKey)).toBe(true);
    expect(cert.checkHost(`${release}-config-sync-webhook.${system.name}.svc`)).toBeDefined();
    expect(caBundles()).toEqual([secret.data['ca.crt'], secret.data['ca.crt']]);
    expect(kubectl('-n', app.name, 'get', 'role,rolebinding,serviceaccount', '-o', 'name')).toContain(
      'role.rbac.authorization.k8s.io/config-sync-agent',
    );
    const deployment = JSON.parse(
      kubectl('-n', system.name, 'get', 'deployment', `${release}-config-sync-webhook`, '-o', 'json'),
    ) as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
    expect(deployment.spec.template.spec.containers[0]?.args).toEqual([
      'webhook',
      '--listen',
      ':8443',
      '--metrics-listen',
      ':9464',
      '--image',
      'config-sync:0.1.0',
    ]);
  });

  it('upgrade: a new serving certificate from the same CA, so the caBundle stays valid; sidecar defaults reach the webhook', () => {
    const before = tlsSecret();
    const run = helm('upgrade', release, chart, ...values(), '--set', 'sidecar.grace=2m');
    expect(run.stderr).toBe('');
    expect(run.status).toBe(0);
    const after = tlsSecret();
    expect(after.data['tls.crt']).not.toBe(before.data['tls.crt']);
    expect(after.data['ca.crt']).toBe(before.data['ca.crt']);
    expect(caBundles()).toEqual([before.data['ca.crt'], before.data['ca.crt']]);
    const cert = new X509Certificate(Buffer.from(after.data['tls.crt'] as string, 'base64'));
    expect(
      cert.verify(new X509Certificate(Buffer.from(after.data['ca.crt'] as string, 'base64')).publicKey),
    ).toBe(true);
    const args = kubectl(
      '-n',
      system.name,
      'get',
      'deployment',
      `${release}-config-sync-webhook`,
      '-o',
      'jsonpath={.spec.template.spec.containers[0].args}',
    );
    expect(args).toContain('"--sidecar-grace","2m"');
  });

  it('uninstall leaves nothing behind', () => {
    const run = helm('uninstall', release, '-n', system.name, '--wait');
    expect(run.status).toBe(0);
    const selector = `app.kubernetes.io/instance=${release}`;
    expect(kubectl('-n', system.name, 'get', 'all,secret,configmap', '-l', selector, '-o', 'name')).toBe('');
    expect(
      kubectl('-n', app.name, 'get', 'role,rolebinding,serviceaccount', '-l', selector, '-o', 'name'),
    ).toBe('');
    expect(kubectl('get', 'mutatingwebhookconfiguration', '-l', selector, '-o', 'name')).toBe('');
    expect(kubectl('-n', system.name, 'get', 'secret', '-o', 'name')).not.toContain('sh.helm.release');
  });
});
