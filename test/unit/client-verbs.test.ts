import { describe, expect, it } from 'vitest';
import { verbOf } from '../../src/kube/transport.ts';

describe('verbOf: requests counted by the verb the API server audits', () => {
  it.each([
    ['GET', '/api/v1/namespaces/x/configmaps?fieldSelector=metadata.name%3Dapp', 'list'],
    [
      'GET',
      '/api/v1/namespaces/x/configmaps?fieldSelector=metadata.name%3Dapp&watch=true&resourceVersion=5',
      'watch',
    ],
    ['GET', '/api/v1/namespaces/x/configmaps/app', 'get'],
    ['GET', '/api/v1/namespaces/x/pods/p/status', 'get'],
    ['GET', '/apis/apps/v1/namespaces/x/deployments/web', 'get'],
    ['GET', '/apis/apps/v1/namespaces/x/replicasets', 'list'],
    ['GET', '/api/v1/namespaces', 'list'],
    ['GET', '/api/v1/namespaces/x', 'get'],
    ['PATCH', '/apis/apps/v1/namespaces/x/deployments/web', 'patch'],
    ['POST', '/api/v1/namespaces/x/events', 'create'],
  ])('%s %s -> %s', (method, path, verb) => {
    expect(verbOf(method, path)).toBe(verb);
  });
});
