// Test identities with real RBAC: namespaces, ServiceAccounts with Roles, and tokens minted by the
// TokenRequest API, optionally bound to a Pod so the API reports that pod's name in the token's
// userInfo.extra (what the agent's admission policy will match on).
import {
  AuthenticationV1Api,
  CoreV1Api,
  KubeConfig,
  RbacAuthorizationV1Api,
  type V1PolicyRule,
} from '@kubernetes/client-node';
import type { ControlPlaneInfo } from './control-plane.ts';
import { waitFor } from './wait.ts';

/** A client as the cluster admin (system:masters). */
export function adminKubeConfig(info: ControlPlaneInfo): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromFile(info.adminKubeconfig);
  return kc;
}

/** A client that presents `token`, as an in-cluster workload would. */
export function tokenKubeConfig(info: ControlPlaneInfo, token: string, namespace?: string): KubeConfig {
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'test', server: info.server, caData: Buffer.from(info.caPem).toString('base64') }],
    users: [{ name: 'test-user', token }],
    contexts: [{ name: 'test', cluster: 'test', user: 'test-user', ...(namespace ? { namespace } : {}) }],
    currentContext: 'test',
  });
  return kc;
}

/**
 * Creates a namespace with a generated name and waits until the controller-manager has given it
 * its `default` ServiceAccount (Pods are refused by admission until then).
 */
export async function createTestNamespace(kc: KubeConfig, prefix: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const ns = await core.createNamespace({
    body: { metadata: { generateName: `${prefix}-`, labels: { 'config-sync.io/test': 'true' } } },
  });
  const name = ns.metadata?.name;
  if (!name) throw new Error('namespace created without a name');
  await waitFor(
    async () => (await core.readNamespacedServiceAccount({ name: 'default', namespace: name })) && true,
    { what: `ServiceAccount default in namespace ${name}` },
  );
  return name;
}

export async function deleteNamespace(kc: KubeConfig, name: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).deleteNamespace({ name });
}

export interface IdentitySpec {
  readonly namespace: string;
  readonly name: string;
  /** Rules of a Role bound to the ServiceAccount; none means no Role at all. */
  readonly rules?: readonly V1PolicyRule[];
  /** Where the Role and RoleBinding go; the ServiceAccount's namespace by default. */
  readonly roleNamespace?: string;
  /** Create a Pod of this name running as the ServiceAccount and bind the token to it. */
  readonly boundPodName?: string;
  /** Bind the token to this existing Pod (which must run as the ServiceAccount). */
  readonly bindToPod?: { readonly name: string; readonly uid: string };
  /** The ServiceAccount exists already: only mint a token (and make the Role, if rules are given). */
  readonly existingServiceAccount?: boolean;
  readonly expirationSeconds?: number;
  readonly audiences?: readonly string[];
}

export interface Identity {
  readonly namespace: string;
  readonly serviceAccount: string;
  /** `system:serviceaccount:<namespace>:<name>` */
  readonly username: string;
  readonly token: string;
  readonly pod?: { readonly name: string; readonly uid: string };
}

/** A Role `name` of `rules` in `namespace`, and its RoleBinding to `serviceAccount`. */
export async function grantRole(
  kc: KubeConfig,
  grant: {
    readonly namespace: string;
    readonly name: string;
    readonly serviceAccount: { readonly namespace: string; readonly name: string };
    readonly rules: readonly V1PolicyRule[];
  },
): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const { namespace, name } = grant;
  await rbac.createNamespacedRole({ namespace, body: { metadata: { name }, rules: [...grant.rules] } });
  await rbac.createNamespacedRoleBinding({
    namespace,
    body: {
      metadata: { name },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', ...grant.serviceAccount }],
    },
  });
}

export async function createServiceAccountIdentity(kc: KubeConfig, spec: IdentitySpec): Promise<Identity> {
  const core = kc.makeApiClient(CoreV1Api);
  const { namespace, name } = spec;
  if (!spec.existingServiceAccount) {
    await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } });
  }

  if (spec.rules) {
    await grantRole(kc, {
      namespace: spec.roleNamespace ?? namespace,
      name,
      serviceAccount: { namespace, name },
      rules: spec.rules,
    });
  }

  let pod: Identity['pod'] = spec.bindToPod;
  if (spec.boundPodName) {
    // The API only binds a token to a Pod that runs as the same ServiceAccount. The image is never
    // pulled: there is no kubelet, the Pod stays Pending.
    const created = await core.createNamespacedPod({
      namespace,
      body: {
        metadata: { name: spec.boundPodName },
        spec: {
          serviceAccountName: name,
          automountServiceAccountToken: false,
          containers: [{ name: 'app', image: 'config-sync.invalid/app:never-pulled' }],
        },
      },
    });
    const uid = created.metadata?.uid;
    if (!uid) throw new Error(`pod ${spec.boundPodName} created without a uid`);
    pod = { name: spec.boundPodName, uid };
  }

  const request = await core.createNamespacedServiceAccountToken({
    name,
    namespace,
    body: {
      spec: {
        audiences: spec.audiences ? [...spec.audiences] : [],
        expirationSeconds: spec.expirationSeconds ?? 3600,
        ...(pod ? { boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: pod.name, uid: pod.uid } } : {}),
      },
    },
  });
  const token = request.status?.token;
  if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
  return {
    namespace,
    serviceAccount: name,
    username: `system:serviceaccount:${namespace}:${name}`,
    token,
    ...(pod ? { pod } : {}),
  };
}

/** What the API server says about the caller (SelfSubjectReview). */
export async function whoAmI(kc: KubeConfig) {
  const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
  return review.status?.userInfo ?? {};
}
