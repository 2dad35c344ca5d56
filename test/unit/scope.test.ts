// Scope resolution is where the namespace/identity confusion is decided: every precedence rule,
// every disagreement and every refusal is pinned here, without a cluster.
import { describe, expect, it } from 'vitest';
import { ConfigSyncError } from '../../src/errors.ts';
import {
  type KubeconfigView,
  requireNamespace,
  resolveScope,
  type ScopeFacts,
} from '../../src/kube/scope.ts';

const SA = '/var/run/secrets/kubernetes.io/serviceaccount';

function view(
  files: string[],
  contextNamespace?: string,
  extra: Partial<KubeconfigView> = {},
): KubeconfigView {
  return {
    files,
    currentContext: 'dev',
    contexts: {
      dev: { cluster: 'c', user: 'u', namespace: contextNamespace },
      other: { cluster: 'c', user: 'u', namespace: 'other-ns' },
    },
    clusters: { c: { server: `https://${files[0]?.replace(/\W/g, '')}.example:6443` } },
    users: { u: { credentials: 'token' } },
    ...extra,
  };
}

function facts(over: Partial<ScopeFacts> = {}): ScopeFacts {
  return {
    flags: {},
    env: {},
    serviceAccount: { dir: SA, token: 'missing', namespace: undefined },
    kubeconfigs: {},
    homeKubeconfigPath: '/home/me/.kube/config',
    ...over,
  };
}

const inPod = (namespace = 'team-a'): Partial<ScopeFacts> => ({
  env: { KUBERNETES_SERVICE_HOST: '10.0.0.1', KUBERNETES_SERVICE_PORT: '443', POD_NAMESPACE: namespace },
  serviceAccount: { dir: SA, token: 'present', namespace },
});

function errorOf(fn: () => unknown): ConfigSyncError {
  try {
    fn();
  } catch (error) {
    if (error instanceof ConfigSyncError) return error;
    throw error;
  }
  throw new Error('expected a ConfigSyncError');
}

describe('cluster source precedence', () => {
  const flagFile = { ok: true as const, view: view(['/flag']) };
  const envFile = { ok: true as const, view: view(['/env']) };
  const homeFile = { ok: true as const, view: view(['/home']) };

  it.each([
    ['--kubeconfig beats everything', { flag: flagFile, env: envFile, home: homeFile }, true, '/flag'],
    ['KUBECONFIG beats in-cluster', { env: envFile, home: homeFile }, true, '/env'],
    ['in-cluster beats ~/.kube/config', { home: homeFile }, true, 'in-cluster'],
    ['~/.kube/config last', { home: homeFile }, false, '/home'],
  ] as [string, ScopeFacts['kubeconfigs'], boolean, string][])('%s', (_, kubeconfigs, podLike, expected) => {
    const f = facts({
      ...(podLike ? inPod() : {}),
      kubeconfigs,
      flags: kubeconfigs.flag ? { kubeconfig: { value: '/flag', source: '--kubeconfig' } } : {},
      env: { ...(podLike ? inPod().env : {}), ...(kubeconfigs.env ? { KUBECONFIG: '/env' } : {}) },
    });
    const { cluster } = resolveScope(f, 'operator');
    const got = cluster.value.kind === 'in-cluster' ? 'in-cluster' : cluster.value.files[0];
    expect(got).toBe(expected);
  });

  it('in-cluster: server from KUBERNETES_SERVICE_HOST/PORT, credentials from the token file', () => {
    const scope = resolveScope(facts(inPod()), 'agent');
    expect(scope.cluster.value).toEqual({
      kind: 'in-cluster',
      server: 'https://10.0.0.1:443',
      serviceAccountDir: SA,
    });
    expect(scope.credentials.value).toEqual({ kind: 'service-account-token-file', tokenFile: `${SA}/token` });
  });

  it('brackets an IPv6 service host', () => {
    const f = facts(inPod());
    const scope = resolveScope({ ...f, env: { ...f.env, KUBERNETES_SERVICE_HOST: 'fd00::1' } }, 'agent');
    expect(scope.cluster.value.server).toBe('https://[fd00::1]:443');
  });

  it('an unreadable --kubeconfig is an error, not a reason to try the next source', () => {
    const e = errorOf(() =>
      resolveScope(
        facts({
          ...inPod(),
          flags: { kubeconfig: { value: '/nope', source: '--kubeconfig' } },
          kubeconfigs: { flag: { ok: false, path: '/nope', reason: '/nope: no such file' } },
        }),
        'agent',
      ),
    );
    expect(e.code).toBe('CS_SCOPE_KUBECONFIG_UNREADABLE');
    expect(e.message).toContain('/nope: no such file');
    expect(e.hint).toContain('does not silently try another source');
  });

  it('S5: nothing configured is an error that names every source and refuses localhost:8080', () => {
    const e = errorOf(() => resolveScope(facts(), 'operator'));
    expect(e.code).toBe('CS_SCOPE_NO_CLUSTER');
    expect(e.domain).toBe('config');
    expect(e.message).toContain('/home/me/.kube/config');
    expect(e.hint).toContain('never falls back to http://localhost:8080');
  });

  it('in a pod without a token (automount off) is an error with the fix', () => {
    const f = facts(inPod());
    const e = errorOf(() =>
      resolveScope({ ...f, serviceAccount: { ...f.serviceAccount, token: 'missing' } }, 'agent'),
    );
    expect(e.code).toBe('CS_SCOPE_IN_CLUSTER_NO_TOKEN');
    expect(e.hint).toContain('automountServiceAccountToken');
  });

  it('--context with an in-cluster source is a usage error', () => {
    const e = errorOf(() =>
      resolveScope(
        { ...facts(inPod()), flags: { context: { value: 'prod', source: '--context' } } },
        'agent',
      ),
    );
    expect(e.code).toBe('CS_USAGE_CONTEXT_IN_CLUSTER');
    expect(e.domain).toBe('usage');
  });

  it('--context picks a context; an unknown one lists the ones there are', () => {
    const f = facts({ kubeconfigs: { home: { ok: true, view: view(['/home'], 'ns-dev') } } });
    const picked = resolveScope(
      { ...f, flags: { context: { value: 'other', source: '--context' } } },
      'operator',
    );
    expect(picked.cluster.value).toMatchObject({ kind: 'kubeconfig', context: 'other' });
    expect(picked.cluster.source).toContain('--context other');
    expect(picked.namespace).toEqual({ value: 'other-ns', source: 'kubeconfig context "other"' });
    const e = errorOf(() =>
      resolveScope({ ...f, flags: { context: { value: 'gone', source: '--context' } } }, 'operator'),
    );
    expect(e.code).toBe('CS_SCOPE_CONTEXT_NOT_FOUND');
    expect(e.hint).toBe('use one of: dev, other');
  });

  it('a context whose cluster has no server is an error, not localhost', () => {
    const v = view(['/home'], undefined, { clusters: { c: { server: '' } } });
    const e = errorOf(() =>
      resolveScope(facts({ kubeconfigs: { home: { ok: true, view: v } } }), 'operator'),
    );
    expect(e.code).toBe('CS_SCOPE_NO_SERVER');
  });

  it('a user with no credentials is an error, not an anonymous request', () => {
    const v = view(['/home'], undefined, { users: { u: { credentials: 'none' } } });
    const e = errorOf(() =>
      resolveScope(facts({ kubeconfigs: { home: { ok: true, view: v } } }), 'operator'),
    );
    expect(e.code).toBe('CS_SCOPE_NO_CREDENTIALS');
  });
});

describe('namespace', () => {
  const kube = (contextNamespace?: string) => ({
    home: { ok: true as const, view: view(['/home'], contextNamespace) },
  });

  it.each([
    [
      '--namespace first',
      { flags: { namespace: { value: 'flag-ns', source: '--namespace' } } },
      'flag-ns',
      '--namespace',
    ],
    ['then POD_NAMESPACE', { env: { POD_NAMESPACE: 'pod-ns' } }, 'pod-ns', 'POD_NAMESPACE'],
    [
      'then the service-account file',
      { serviceAccount: { dir: SA, token: 'missing' as const, namespace: 'sa-ns\n' } },
      'sa-ns',
      `${SA}/namespace`,
    ],
    ['then the context', {}, 'ctx-ns', 'kubeconfig context "dev"'],
  ])('%s', (_, over, value, source) => {
    const scope = resolveScope(facts({ kubeconfigs: kube('ctx-ns'), ...over }), 'operator');
    expect(scope.namespace).toEqual({ value, source });
  });

  it('keeps the origin of a flag-level setting (CONFIG_SYNC_NAMESPACE)', () => {
    const scope = resolveScope(
      facts({ kubeconfigs: kube(), flags: { namespace: { value: 'x', source: 'CONFIG_SYNC_NAMESPACE' } } }),
      'operator',
    );
    expect(scope.namespace?.source).toBe('CONFIG_SYNC_NAMESPACE');
  });

  it('S2: the context points elsewhere than --namespace: chosen, and the disagreement reported', () => {
    const scope = resolveScope(
      facts({
        kubeconfigs: kube('ctx-ns'),
        flags: { namespace: { value: 'team-a', source: '--namespace' } },
      }),
      'agent',
    );
    expect(scope.namespace?.value).toBe('team-a');
    expect(scope.disagreements).toEqual([
      expect.objectContaining({
        severity: 'warning',
        message: 'namespace "team-a" from --namespace differs from "ctx-ns" from kubeconfig context "dev"',
      }),
    ]);
  });

  it('S3: POD_NAMESPACE against the service-account file stops the agent', () => {
    const f = facts(inPod('team-a'));
    const conflicting = { ...f, env: { ...f.env, POD_NAMESPACE: 'team-b' } };
    const e = errorOf(() => resolveScope(conflicting, 'agent'));
    expect(e.code).toBe('CS_SCOPE_NAMESPACE_CONFLICT');
    expect(e.message).toContain(`"team-b" from POD_NAMESPACE differs from "team-a" from ${SA}/namespace`);
    expect(e.hint).toContain('fieldRef: metadata.namespace');
    // A person running doctor sees it as a finding, not a crash.
    expect(resolveScope(conflicting, 'operator').disagreements[0]?.severity).toBe('warning');
  });

  it('S4: no namespace anywhere stops the agent and never becomes "default"', () => {
    const e = errorOf(() => resolveScope(facts({ kubeconfigs: kube() }), 'agent'));
    expect(e.code).toBe('CS_SCOPE_NO_NAMESPACE');
    expect(e.hint).toContain('never assumes "default"');
    const scope = resolveScope(facts({ kubeconfigs: kube() }), 'operator');
    expect(scope.namespace).toBeUndefined();
    expect(() => requireNamespace(scope)).toThrow(/no namespace from any source/);
  });

  it('-n "": an empty --namespace is a usage error naming the flag, not "no --namespace"', () => {
    const e = errorOf(() =>
      resolveScope(
        facts({ ...inPod('shop'), flags: { namespace: { value: '', source: '--namespace' } } }),
        'operator',
      ),
    );
    expect(e.code).toBe('CS_USAGE_BAD_NAMESPACE');
    expect(e.message).toBe('the namespace from --namespace is empty');
    expect(e.hint).toContain('leave the flag out');
  });

  it('agreeing sources are not a disagreement', () => {
    expect(resolveScope(facts(inPod('same')), 'agent').disagreements).toEqual([]);
  });
});

describe('proxy', () => {
  it('in a Pod: HTTPS_PROXY carries the connection unless NO_PROXY names the service address', () => {
    const f = facts(inPod());
    const proxied = resolveScope({ ...f, env: { ...f.env, HTTPS_PROXY: 'http://proxy.corp:3128' } }, 'agent');
    expect(proxied.proxy?.shown).toBe('http://proxy.corp:3128');
    expect(proxied.proxy?.source).toBe('HTTPS_PROXY');
    const straight = resolveScope(
      { ...f, env: { ...f.env, HTTPS_PROXY: 'http://proxy.corp:3128', NO_PROXY: '10.0.0.0/16,.svc' } },
      'agent',
    );
    expect(straight.proxy).toBeUndefined();
  });

  it("from a kubeconfig: the cluster's proxy-url, named by its cluster, over the environment", () => {
    const v = view(['/k']);
    const withProxy: KubeconfigView = {
      ...v,
      clusters: { c: { server: 'https://k.example:6443', proxyUrl: 'socks5://bastion:1080' } },
    };
    const scope = resolveScope(
      facts({
        flags: { kubeconfig: { value: '/k', source: '--kubeconfig' } },
        kubeconfigs: { flag: { ok: true, view: withProxy } },
        env: { HTTPS_PROXY: 'http://env-proxy:3128' },
      }),
      'operator',
    );
    expect(scope.proxy?.shown).toBe('socks5://bastion:1080');
    expect(scope.proxy?.source).toBe('kubeconfig cluster "c" proxy-url');
  });

  it('from a kubeconfig without proxy-url: the environment, as kubectl', () => {
    const scope = resolveScope(
      facts({
        flags: { kubeconfig: { value: '/k', source: '--kubeconfig' } },
        kubeconfigs: { flag: { ok: true, view: view(['/k']) } },
        env: { https_proxy: 'proxy.corp:8080' },
      }),
      'operator',
    );
    expect(scope.proxy?.shown).toBe('http://proxy.corp:8080');
    expect(scope.proxy?.source).toBe('https_proxy');
  });

  it('a proxy URL config-sync cannot use is an error before any request, naming its source', () => {
    const f = facts(inPod());
    const e = errorOf(() =>
      resolveScope({ ...f, env: { ...f.env, HTTPS_PROXY: 'gopher://proxy:70' } }, 'agent'),
    );
    expect(e.code).toBe('CS_SCOPE_BAD_PROXY');
    expect(e.message).toContain('HTTPS_PROXY');
    expect(e.hint).toContain('HTTPS_PROXY');
  });
});

describe('a refusal of a request of no namespace', () => {
  it('says to grant a ClusterRole (or ask within one namespace), never a Role in namespace ""', async () => {
    const { explainApiError } = await import('../../src/kube/api-errors.ts');
    const { ApiStatusError } = await import('../../src/kube/transport.ts');
    const scope = resolveScope(facts(inPod('shop')), 'operator');
    const refusal = new ApiStatusError(
      403,
      {
        kind: 'Status',
        reason: 'Forbidden',
        message:
          'pods is forbidden: User "system:serviceaccount:shop:config-sync-agent" cannot list resource "pods"',
      },
      'GET',
      '/api/v1/pods',
    );
    const across = explainApiError(refusal, { verb: 'list', resource: 'pods' }, scope);
    expect(across.code).toBe('CS_API_FORBIDDEN');
    expect(across.hint).toMatch(/ClusterRole and ClusterRoleBinding .*or ask within one namespace \(-n\)/);
    expect(across.hint).not.toContain('namespace ""');
    const within = explainApiError(refusal, { verb: 'list', resource: 'pods', namespace: 'shop' }, scope);
    expect(within.hint).toContain('a Role and RoleBinding in namespace "shop"');
  });
});
