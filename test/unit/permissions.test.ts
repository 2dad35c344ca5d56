import { describe, expect, it } from 'vitest';
import { requiredAccess, roleAndBinding, rulesFor, subjectFor } from '../../src/kube/permissions.ts';

const ctx = {
  namespace: 'shop',
  podName: 'web-7d9f-abcde',
  sources: [
    { kind: 'ConfigMap' as const, name: 'app-config' },
    { kind: 'Secret' as const, name: 'db' },
  ],
  replicaSet: 'web-7d9f',
  workload: { kind: 'Deployment' as const, name: 'web' },
};

describe('requiredAccess -> rulesFor', () => {
  it('is the least-privilege Role: names pinned where RBAC honours them and they are stable', () => {
    expect(rulesFor(requiredAccess(ctx))).toEqual([
      {
        apiGroups: [''],
        resources: ['configmaps'],
        verbs: ['get', 'list', 'watch'],
        resourceNames: ['app-config'],
      },
      { apiGroups: [''], resources: ['events'], verbs: ['create'] },
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'patch'] },
      { apiGroups: [''], resources: ['pods/status'], verbs: ['patch'] },
      { apiGroups: [''], resources: ['secrets'], verbs: ['get', 'list', 'watch'], resourceNames: ['db'] },
      { apiGroups: ['apps'], resources: ['deployments'], verbs: ['get', 'patch'], resourceNames: ['web'] },
      { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] },
      // The mark the admission policies find the agent by, whatever its ServiceAccount.
      { apiGroups: ['config-sync.io'], resources: ['agents'], verbs: ['restricted'] },
    ]);
  });

  it('the mark in the Role is the one the shipped admission policies look for', async () => {
    const fs = await import('node:fs');
    for (const policy of ['own-pod-policy.yaml', 'own-workload-policy.yaml', 'own-rollout-policy.yaml']) {
      const text = fs.readFileSync(new URL(`../../deploy/sidecar/rbac/${policy}`, import.meta.url), 'utf8');
      expect(text).toContain(
        "authorizer.group('config-sync.io').resource('agents').namespace(request.namespace).check('restricted').allowed()",
      );
    }
    const role = fs.readFileSync(new URL('../../deploy/sidecar/rbac/role.yaml', import.meta.url), 'utf8');
    expect(role).toContain(
      '- apiGroups: ["config-sync.io"]\n    resources: ["agents"]\n    verbs: ["restricted"]',
    );
  });

  it.each([
    ['StatefulSet', 'statefulsets'],
    ['DaemonSet', 'daemonsets'],
  ] as const)('restarts a %s through its own resource', (kind, resource) => {
    const rules = rulesFor(requiredAccess({ namespace: 'x', sources: [], workload: { kind, name: 'db' } }));
    expect(rules).toContainEqual({
      apiGroups: ['apps'],
      resources: [resource],
      verbs: ['get', 'patch'],
      resourceNames: ['db'],
    });
  });

  it('checks every need in the scope namespace, by name where one is known', () => {
    const needs = requiredAccess(ctx);
    expect(new Set(needs.map((n) => n.namespace))).toEqual(new Set(['shop']));
    expect(needs.find((n) => n.resource === 'pods' && n.verb === 'get')?.name).toBe('web-7d9f-abcde');
  });
});

describe('subjects and the fix', () => {
  it.each([
    ['system:serviceaccount:shop:agent', { kind: 'ServiceAccount', name: 'agent', namespace: 'shop' }],
    ['jane@example.com', { kind: 'User', name: 'jane@example.com' }],
  ])('%s', (username, subject) => {
    expect(subjectFor(username)).toEqual(subject);
  });

  it('binds the Role to the subject in the same namespace', () => {
    const [role, binding] = roleAndBinding(
      'config-sync-agent',
      'shop',
      requiredAccess(ctx),
      subjectFor('system:serviceaccount:shop:agent'),
    );
    expect(role.metadata).toEqual({ name: 'config-sync-agent', namespace: 'shop' });
    expect(binding.roleRef).toEqual({
      apiGroup: 'rbac.authorization.k8s.io',
      kind: 'Role',
      name: 'config-sync-agent',
    });
    expect(binding.subjects).toEqual([{ kind: 'ServiceAccount', name: 'agent', namespace: 'shop' }]);
  });
});
