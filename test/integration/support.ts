// Shared by integration test files: the control plane started by globalSetup, and a namespace of
// the file's own, created before its tests and deleted after.
import type { KubeConfig } from '@kubernetes/client-node';
import { afterAll, beforeAll, inject } from 'vitest';
import { ConfigSyncError } from '../../src/errors.ts';
import { apiStatus } from '../../src/kube/api-errors.ts';
import { createKubeClient, type KubeClient } from '../../src/kube/client.ts';
import { resolveScope, type Scope } from '../../src/kube/scope.ts';
import { gatherScopeFacts } from '../../src/kube/scope-facts.ts';
import type { ControlPlaneInfo } from '../cluster/control-plane.ts';
import { adminKubeConfig, createTestNamespace, deleteNamespace } from '../cluster/identities.ts';
import type { InClusterLayout } from '../cluster/in-cluster.ts';

export function controlPlane(): ControlPlaneInfo {
  return inject('controlPlane');
}

/** Registers hooks that give the calling file its own namespace; read `.name` inside tests. */
export function useNamespace(prefix: string): { readonly name: string; readonly admin: KubeConfig } {
  const state = { name: '', admin: undefined as KubeConfig | undefined };
  beforeAll(async () => {
    state.admin = adminKubeConfig(controlPlane());
    state.name = await createTestNamespace(state.admin, prefix);
  });
  afterAll(async () => {
    if (state.admin && state.name) await deleteNamespace(state.admin, state.name);
  });
  return {
    get name() {
      return state.name;
    },
    get admin() {
      if (!state.admin) throw new Error('useNamespace: read .admin inside a test or hook');
      return state.admin;
    },
  };
}

/**
 * The status code of a rejected call, and the API's own message: from config-sync's client (its
 * explained error keeps both) or from client-node.
 */
export async function rejection(call: Promise<unknown>): Promise<{ code: number; message: string }> {
  try {
    await call;
  } catch (error) {
    if (error instanceof ConfigSyncError) {
      return {
        code: apiStatus(error) ?? 0,
        message: typeof error.cause === 'string' ? error.cause : error.message,
      };
    }
    const e = error as { code?: number; body?: unknown };
    const body =
      typeof e.body === 'string'
        ? (JSON.parse(e.body) as { message?: string })
        : (e.body as { message?: string });
    return { code: e.code ?? 0, message: body?.message ?? String(error) };
  }
  throw new Error('expected the API call to be rejected, but it succeeded');
}

/** The scope the agent resolves in a Pod whose service-account volume is `layout`. */
/** `more`: variables of the Pod's environment beside the in-cluster ones, or in their place. */
export async function inClusterScope(
  layout: InClusterLayout,
  namespace: string,
  more: Record<string, string> = {},
): Promise<Scope> {
  const env = { ...layout.env, POD_NAMESPACE: namespace, ...more };
  return resolveScope(await gatherScopeFacts({ serviceAccountDir: layout.serviceAccountDir }, env), 'agent');
}

/** config-sync's own client, as the agent in that Pod builds it. */
export async function inClusterClient(layout: InClusterLayout, namespace: string): Promise<KubeClient> {
  return createKubeClient(await inClusterScope(layout, namespace));
}
