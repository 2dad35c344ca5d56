// The one client of a process, against the real API: a rotated service-account token is used
// from the next request on, and thousands of requests and many watch reconnects open no new
// clients and leak no sockets or file descriptors (scenario S6).
import dc from 'node:diagnostics_channel';
import fs from 'node:fs';
import path from 'node:path';
import type { TLSSocket } from 'node:tls';
import { CoreV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import type { ConfigSyncError } from '../../src/errors.ts';
import type { KubeClient } from '../../src/kube/client.ts';
import { createServiceAccountIdentity, type Identity } from '../cluster/identities.ts';
import { type InClusterLayout, layInClusterDir, rotateInClusterToken } from '../cluster/in-cluster.ts';
import { selfSignedCertificate } from '../cluster/self-signed.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane, inClusterClient, inClusterScope, rejection, useNamespace } from './support.ts';
import { apiServerProxy, CLUSTER_NAME, refuseToResolveClusterName } from './support-proxy.ts';

const ns = useNamespace('client');
const rules = [{ apiGroups: [''], resources: ['configmaps'], verbs: ['get', 'list', 'watch'] }];

/** A ServiceAccount of the test's namespace that may read its ConfigMaps, and nothing else. */
const identityWithRules = (name: string) =>
  createServiceAccountIdentity(ns.admin, { namespace: ns.name, name, rules });

/** Watches app-config until the server ends the watch, and gives the events' types. */
async function watchAppConfigToItsEnd(client: KubeClient, timeoutSeconds: number, inactivityMs: number) {
  const events: string[] = [];
  await client.watch(
    {
      target: { resource: 'configmaps', namespace: ns.name },
      query: { fieldSelector: 'metadata.name=app-config', timeoutSeconds },
      signal: new AbortController().signal,
      inactivityMs,
    },
    ({ type }) => events.push(type),
  );
  return events;
}

const readConfigMap = (client: KubeClient) =>
  client.get<V1ConfigMap>({ resource: 'configmaps', namespace: ns.name, name: 'app-config' });

/** Open sockets and all descriptors of this process, from /proc. */
function descriptors(): { sockets: number; total: number } {
  const fds = fs.readdirSync('/proc/self/fd');
  let sockets = 0;
  for (const fd of fds) {
    try {
      if (fs.readlinkSync(`/proc/self/fd/${fd}`).startsWith('socket:')) sockets += 1;
    } catch {
      // closed between readdir and readlink
    }
  }
  return { sockets, total: fds.length };
}

let agent: Identity;
let layout: InClusterLayout;
beforeAll(async () => {
  await ns.admin.makeApiClient(CoreV1Api).createNamespacedConfigMap({
    namespace: ns.name,
    body: { metadata: { name: 'app-config' }, data: { k: 'v' } },
  });
  agent = await createServiceAccountIdentity(ns.admin, {
    namespace: ns.name,
    name: 'agent',
    rules,
    boundPodName: 'agent-a',
  });
  layout = layInClusterDir(tempDir('client-'), controlPlane(), {
    token: agent.token,
    namespace: ns.name,
  });
});

describe('service-account token rotation', () => {
  it('uses the rotated token from the next request on, even once the old one is revoked', async () => {
    const client = await inClusterClient(layout, ns.name);
    await readConfigMap(client);

    // kubelet rotates: a new token (bound to another pod of the same ServiceAccount) is swapped in.
    const next = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'agent',
      existingServiceAccount: true,
      boundPodName: 'agent-b',
    });
    rotateInClusterToken(layout, controlPlane(), { token: next.token, namespace: ns.name });
    // The old token dies with its pod; a client still sending it would now get 401.
    await ns.admin
      .makeApiClient(CoreV1Api)
      .deleteNamespacedPod({ name: 'agent-a', namespace: ns.name, gracePeriodSeconds: 0 });
    const stale = await createKubeClientWithToken(agent.token);
    await waitFor(async () => (await rejection(readConfigMap(stale))).code === 401 || undefined, {
      what: 'the old token to be rejected',
      timeoutMs: 30_000,
      intervalMs: 250,
    });

    const cm = await readConfigMap(client);
    expect(cm.data).toEqual({ k: 'v' });
  });
});

describe('CA rotation', () => {
  it('a CA swapped in is used from the next request, over a new pool; the same CA swapped in keeps the pool', async () => {
    const id = await createServiceAccountIdentity(ns.admin, {
      namespace: ns.name,
      name: 'agent',
      existingServiceAccount: true,
      boundPodName: 'agent-ca',
    });
    const spec = { token: id.token, namespace: ns.name };
    const caLayout = layInClusterDir(tempDir('ca-'), controlPlane(), spec);
    const client = await inClusterClient(caLayout, ns.name);
    await readConfigMap(client);
    const sockets = connectionCounter();
    try {
      // kubelet swaps the volume in (a token rotation) with the same CA: the same identity.
      rotateInClusterToken(caLayout, controlPlane(), spec);
      await readConfigMap(client);
      expect(sockets.count).toBe(0);
      // A CA that did not sign the API server's certificate: the next request is made with it.
      rotateInClusterToken(caLayout, controlPlane(), { ...spec, caPem: selfSignedCa() });
      expect((await rejection(readConfigMap(client))).message).toMatch(/^TLS to https:\/\/.* failed/);
      expect(sockets.count).toBe(1);
      // And the right one again.
      rotateInClusterToken(caLayout, controlPlane(), spec);
      expect((await readConfigMap(client)).data).toEqual({ k: 'v' });
      expect(sockets.count).toBe(2);
    } finally {
      sockets.stop();
    }
  });
});

/** A CA certificate of its own, which signed nothing the test control plane serves. */
function selfSignedCa(): string {
  const dir = tempDir('other-ca-');
  const files = { cert: path.join(dir, 'ca.pem'), key: path.join(dir, 'key.pem') };
  selfSignedCertificate(files, 'not-the-api-server-ca');
  return fs.readFileSync(files.cert, 'utf8');
}

function createKubeClientWithToken(token: string): Promise<KubeClient> {
  const root = tempDir('token-');
  return inClusterClient(layInClusterDir(root, controlPlane(), { token, namespace: ns.name }), ns.name);
}

/** Counts TCP connections this process opens (every net/tls connect publishes here). */
function connectionCounter(): { readonly count: number; stop(): void } {
  let count = 0;
  const onSocket = () => {
    count += 1;
  };
  dc.subscribe('net.client.socket', onSocket);
  return {
    get count() {
      return count;
    },
    stop: () => dc.unsubscribe('net.client.socket', onSocket),
  };
}

describe('S6: one client, no leaks', () => {
  it('reuses pooled connections: 200 sequential requests open at most one', async () => {
    const client = await inClusterClient(layout, ns.name);
    await readConfigMap(client);
    const counter = connectionCounter();
    try {
      for (let i = 0; i < 200; i += 1) await readConfigMap(client);
    } finally {
      counter.stop();
    }
    // A transport without a keep-alive pool (client-node 2.0.1's) opens one per request: 200 here.
    expect(counter.count).toBeLessThanOrEqual(1);
    expect(client.requests.get).toBe(201);
  });

  it('2000 requests and 50 watch reconnects reuse one client and grow no sockets or descriptors', async () => {
    const fresh = await identityWithRules('agent-s6');
    const client = await createKubeClientWithToken(fresh.token);

    const watchOnce = async () => {
      const events: string[] = [];
      const stop = new AbortController();
      const stream = client.watch(
        {
          target: { resource: 'configmaps', namespace: ns.name },
          query: { fieldSelector: 'metadata.name=app-config' },
          signal: stop.signal,
          inactivityMs: 30_000,
        },
        ({ type }) => events.push(type),
      );
      await waitFor(() => events.length > 0 || undefined, { what: 'the first watch event' });
      stop.abort();
      await stream;
      expect(events[0]).toBe('ADDED');
    };
    await readConfigMap(client);
    await watchOnce();
    const before = descriptors();
    const counter = connectionCounter();
    try {
      for (let batch = 0; batch < 40; batch += 1) {
        await Promise.all(Array.from({ length: 50 }, () => readConfigMap(client)));
      }
      // Over HTTP/2 they are streams of the one connection; over HTTP/1.1, 50 requests at once
      // may open up to 50 pooled connections, then reuse them.
      expect(counter.count).toBeLessThanOrEqual(1);
      for (let i = 0; i < 50; i += 1) await watchOnce();
    } finally {
      counter.stop();
    }

    // Closed connections take a moment to leave the table; poll rather than sleep.
    const after = await waitFor(
      () => {
        const d = descriptors();
        return d.sockets <= before.sockets + 2 && d.total <= before.total + 4 ? d : undefined;
      },
      { what: 'sockets and descriptors back to their level before the load', timeoutMs: 15_000 },
    );
    expect(after.sockets).toBeLessThanOrEqual(before.sockets + 2);
    expect(after.total).toBeLessThanOrEqual(before.total + 4);
  });
});

describe('one connection per agent', () => {
  it('carries its watches and requests as streams of one HTTP/2 connection to the API server', async () => {
    const fresh = await identityWithRules('agent-h2');
    const client = await createKubeClientWithToken(fresh.token);
    const sockets: TLSSocket[] = [];
    const onSocket = (message: unknown) => sockets.push((message as { socket: TLSSocket }).socket);
    dc.subscribe('net.client.socket', onSocket);
    const stop = new AbortController();
    try {
      const seen = [0, 0];
      const watches = seen.map((_, i) =>
        client.watch(
          {
            target: { resource: 'configmaps', namespace: ns.name },
            query: { fieldSelector: 'metadata.name=app-config' },
            signal: stop.signal,
            inactivityMs: 30_000,
          },
          () => {
            seen[i] = (seen[i] ?? 0) + 1;
          },
        ),
      );
      await waitFor(() => (seen.every((n) => n > 0) ? true : undefined), { what: 'both watches' });
      await Promise.all(Array.from({ length: 50 }, () => readConfigMap(client)));
      stop.abort();
      await Promise.all(watches);
    } finally {
      dc.unsubscribe('net.client.socket', onSocket);
    }
    // Over HTTP/1.1 this was a socket per watch and up to 50 for the reads.
    expect(sockets).toHaveLength(1);
    expect(sockets[0]?.alpnProtocol).toBe('h2');
    expect(client.requests.watch).toBe(2);
  });
});

describe('a quiet watch', () => {
  it('is kept open while the API server answers its pings, until the server ends it', async () => {
    const fresh = await identityWithRules('agent-quiet');
    const client = await createKubeClientWithToken(fresh.token);
    await readConfigMap(client);
    expect(client.keepsQuietWatches()).toBe(true);
    const started = performance.now();
    // Nothing changes app-config meanwhile: after its ADDED the watch carries nothing, silent
    // three times over its 1 s limit before the server ends it at 4 s.
    expect(await watchAppConfigToItsEnd(client, 4, 1000)).toEqual(['ADDED']);
    expect(performance.now() - started).toBeGreaterThanOrEqual(3500);
  });
});

describe('refused requests', () => {
  it('name the identity, verb, resource, name and namespace, and the fix', async () => {
    const reader = await identityWithRules('no-secrets');
    const client = await createKubeClientWithToken(reader.token);
    const request = { target: { resource: 'secrets', namespace: ns.name, name: 'db' } };
    // The client explains the refusal itself: the caller gets it ready to show.
    let explained: ConfigSyncError | undefined;
    try {
      await client.get(request.target);
    } catch (e) {
      explained = e as ConfigSyncError;
    }
    if (!explained) throw new Error('expected the read to be refused');
    expect(explained.code).toBe('CS_API_FORBIDDEN');
    expect(explained.message).toBe(`${reader.username} may not get secrets "db" in namespace "${ns.name}"`);
    expect(explained.hint).toContain(`Role and RoleBinding in namespace "${ns.name}"`);
    expect(explained.details).toMatchObject({
      verb: 'get',
      resource: 'secrets',
      namespace: ns.name,
      identity: reader.username,
    });
  });
});

/** A kubeconfig for the test control plane, in `dir`, with the given user and cluster fields. */
function writeKubeconfig(
  dir: string,
  user: Record<string, unknown>,
  clusterFields: Record<string, unknown> = {},
) {
  const file = path.join(dir, 'config');
  const cp = controlPlane();
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [
        {
          name: 'test',
          cluster: {
            server: cp.server,
            'certificate-authority-data': Buffer.from(cp.caPem).toString('base64'),
            ...clusterFields,
          },
        },
      ],
      users: [{ name: 'agent', user }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: 'agent', namespace: ns.name } }],
      'current-context': 'test',
    }),
  );
  return file;
}

/** An ExecCredential as a plugin prints it, handing out `token`. */
const execCredentialJson = (token: string) =>
  JSON.stringify({
    apiVersion: 'client.authentication.k8s.io/v1',
    kind: 'ExecCredential',
    status: { token },
  });

/** A kubeconfig in `dir` whose user runs `dir/plugin.sh`, a shell script of `body`. */
function execPluginKubeconfig(
  dir: string,
  body: string,
  exec: Record<string, unknown> = {},
  clusterFields: Record<string, unknown> = {},
): string {
  const plugin = path.join(dir, 'plugin.sh');
  fs.writeFileSync(plugin, `#!/bin/sh\n${body}\n`, { mode: 0o755 });
  return writeKubeconfig(
    dir,
    { exec: { apiVersion: 'client.authentication.k8s.io/v1', command: plugin, ...exec } },
    clusterFields,
  );
}

/** The operator's scope from a kubeconfig file, as `--kubeconfig` resolves it. */
async function kubeconfigScope(file: string, env: Record<string, string> = {}) {
  const { resolveScope } = await import('../../src/kube/scope.ts');
  const { gatherScopeFacts } = await import('../../src/kube/scope-facts.ts');
  return resolveScope(
    await gatherScopeFacts({ kubeconfig: { value: file, source: '--kubeconfig' } }, env),
    'operator',
  );
}

describe('a kubeconfig whose user runs an exec credential plugin', () => {
  it('sends the token the plugin returns, as the identity it belongs to', async () => {
    const reader = await identityWithRules('exec-reader');
    const file = execPluginKubeconfig(tempDir('client-exec-'), `echo '${execCredentialJson(reader.token)}'`);
    const { createKubeClient } = await import('../../src/kube/client.ts');
    const scope = await kubeconfigScope(file);
    expect(scope.credentials.value.kind).toBe('exec');
    const cm = await readConfigMap(createKubeClient(scope));
    expect(cm.data).toEqual({ k: 'v' });
    // The agent's identity may not read Secrets: the token really was the plugin's.
    const refused = await rejection(createKubeClient(scope).get({ resource: 'secrets', namespace: ns.name }));
    expect(refused.code).toBe(403);
  });
});

describe('a kubeconfig exec plugin whose token the API refuses', () => {
  it('is run again for the next request, as client-go runs it again after a 401', async () => {
    const reader = await identityWithRules('exec-refreshed');
    const dir = tempDir('client-exec-401-');
    // The plugin gives no expiry, so its credential would be kept for the process's life, and
    // it hands out whatever token is in token.txt: first one the API does not know.
    const tokenFile = path.join(dir, 'token.txt');
    const runs = path.join(dir, 'runs');
    fs.writeFileSync(tokenFile, 'not-a-token-the-api-knows');
    const file = execPluginKubeconfig(
      dir,
      `echo run >> ${runs}\nprintf '${execCredentialJson('%s')}' "$(cat ${tokenFile})"`,
    );
    const { createKubeClient } = await import('../../src/kube/client.ts');
    const client = createKubeClient(await kubeconfigScope(file));
    // Two refused at once: the plugin ran once for both, and runs once more after them.
    const refused = await Promise.all([rejection(readConfigMap(client)), rejection(readConfigMap(client))]);
    expect(refused.map((e) => e.code)).toEqual([401, 401]);
    expect(fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean)).toHaveLength(1);
    // The operator logs in again: the plugin now hands out a token the API knows.
    fs.writeFileSync(tokenFile, reader.token);
    expect((await readConfigMap(client)).data).toEqual({ k: 'v' });
    expect(fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
    // Accepted: kept, not run for every request.
    await readConfigMap(client);
    expect(fs.readFileSync(runs, 'utf8').split('\n').filter(Boolean)).toHaveLength(2);
  });
});

describe('a kubeconfig exec plugin that asks for the cluster (provideClusterInfo)', () => {
  it("is told the server, its CA and the cluster's exec extension in KUBERNETES_EXEC_INFO, as client-go tells it; one that does not ask is not", async () => {
    const reader = await identityWithRules('exec-cluster-info');
    // Per-cluster settings for the plugin (client-go's reserved extension name), beside one that
    // is not the plugin's.
    const extensions = [
      { name: 'example.com/not-the-plugins', extension: { ignored: true } },
      { name: 'client.authentication.k8s.io/exec', extension: { audience: '06e3fbd18de8', tiers: [1, 2] } },
    ];
    const infoOf = async (provideClusterInfo: boolean) => {
      const dir = tempDir('client-exec-info-');
      const info = path.join(dir, 'exec-info.json');
      const file = execPluginKubeconfig(
        dir,
        `printf '%s' "$KUBERNETES_EXEC_INFO" > ${info}\necho '${execCredentialJson(reader.token)}'`,
        { provideClusterInfo },
        { extensions },
      );
      const { createKubeClient } = await import('../../src/kube/client.ts');
      expect((await readConfigMap(createKubeClient(await kubeconfigScope(file)))).data).toEqual({ k: 'v' });
      return JSON.parse(fs.readFileSync(info, 'utf8')) as {
        spec: { interactive: boolean; cluster?: Record<string, unknown> };
      };
    };
    const cp = controlPlane();
    const asked = await infoOf(true);
    expect(asked.spec.interactive).toBe(false);
    expect(asked.spec.cluster?.server).toBe(cp.server);
    expect(
      Buffer.from(String(asked.spec.cluster?.['certificate-authority-data']), 'base64').toString('utf8'),
    ).toBe(cp.caPem);
    expect(asked.spec.cluster?.config).toEqual({ audience: '06e3fbd18de8', tiers: [1, 2] });
    expect((await infoOf(false)).spec).toEqual({ interactive: false });
  });
});

describe("a kubeconfig cluster's proxy-url", () => {
  it('carries every request and watch through one tunnel (HTTP CONNECT), over HTTP/2', async () => {
    const reader = await identityWithRules('proxied-reader');
    const proxy = await apiServerProxy();
    try {
      const file = writeKubeconfig(
        tempDir('client-proxy-'),
        { token: reader.token },
        { 'proxy-url': `http://127.0.0.1:${proxy.port}` },
      );
      const { createKubeClient } = await import('../../src/kube/client.ts');
      const client = createKubeClient(await kubeconfigScope(file));
      const reads = await Promise.all([1, 2, 3].map(() => readConfigMap(client)));
      expect(reads.map((cm) => cm.data)).toEqual([{ k: 'v' }, { k: 'v' }, { k: 'v' }]);
      expect(await watchAppConfigToItsEnd(client, 1, 30_000)).toEqual(['ADDED']);
      const apiServer = new URL(controlPlane().server);
      // One tunnel for the reads and the watch: every one a stream of the HTTP/2 connection in it.
      expect(proxy.tunnels).toEqual([`${apiServer.hostname}:${apiServer.port}`]);
      // The tunnel is end to end: a ping is answered by the API server, so quiet watches are kept.
      expect(client.keepsQuietWatches()).toBe(true);
    } finally {
      proxy.close();
    }
  });
});

describe('HTTPS_PROXY and NO_PROXY, as client-go reads them', () => {
  refuseToResolveClusterName();
  it('the agent in a Pod goes through HTTPS_PROXY to the kubernetes Service', async () => {
    const proxy = await apiServerProxy();
    try {
      const { createKubeClient } = await import('../../src/kube/client.ts');
      const env = {
        KUBERNETES_SERVICE_HOST: CLUSTER_NAME,
        HTTPS_PROXY: `http://127.0.0.1:${proxy.port}`,
        NO_PROXY: 'localhost,127.0.0.1,.internal',
      };
      const scope = await inClusterScope(layout, ns.name, env);
      expect(scope.proxy?.source).toBe('HTTPS_PROXY');
      const client = createKubeClient(scope);
      expect((await readConfigMap(client)).data).toEqual({ k: 'v' });
      expect(await watchAppConfigToItsEnd(client, 1, 30_000)).toEqual(['ADDED']);
      expect(proxy.tunnels).toEqual([`${CLUSTER_NAME}:${controlPlane().port}`]);
      expect(client.keepsQuietWatches()).toBe(true);

      // NO_PROXY naming the Service: straight to it (not requested here: nothing resolves the name).
      expect((await inClusterScope(layout, ns.name, { ...env, NO_PROXY: '.svc' })).proxy).toBeUndefined();
      // A loopback server is never proxied, whatever NO_PROXY says: the proxy sees no new tunnel.
      const loopback = await inClusterScope(layout, ns.name, { ...env, ...layout.env, NO_PROXY: '' });
      expect(loopback.proxy).toBeUndefined();
      expect((await readConfigMap(createKubeClient(loopback))).data).toEqual({ k: 'v' });
      expect(proxy.tunnels).toHaveLength(1);
    } finally {
      proxy.close();
    }
  });

  it('a proxy that refuses the tunnel is named in the error, with where it came from and the fix', async () => {
    // A proxy that wants credentials it was not given.
    const proxy = await apiServerProxy('407 Proxy Authentication Required');
    try {
      const port = proxy.port;
      const { createKubeClient } = await import('../../src/kube/client.ts');
      const reader = await identityWithRules('refused-by-proxy');
      const file = writeKubeconfig(
        tempDir('client-proxy-env-'),
        { token: reader.token },
        {
          server: `https://${CLUSTER_NAME}:${controlPlane().port}`,
        },
      );
      const scope = await kubeconfigScope(file, { HTTPS_PROXY: `http://ops:pa55word@127.0.0.1:${port}` });
      const error = (await readConfigMap(createKubeClient(scope)).catch(
        (e: unknown) => e,
      )) as ConfigSyncError;
      expect(error.code).toBe('CS_API_PROXY');
      expect(error.message).toContain(`through the proxy http://ops@127.0.0.1:${port} (from HTTPS_PROXY)`);
      expect(error.message).toContain('407');
      expect(error.message).toContain('get configmaps "app-config"');
      expect(error.hint).toContain(`add ${CLUSTER_NAME} to NO_PROXY`);
      expect(
        JSON.stringify({ message: error.message, hint: error.hint, details: error.details }),
      ).not.toContain('pa55word');
    } finally {
      proxy.close();
    }
  });
});
