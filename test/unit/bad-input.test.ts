// Bad input, as a new user or an attacker gives it: each a clear error (what was wrong, where it
// came from, how to fix it) with the documented exit code, and no stack trace. The built CLI
// runs as a child process; nothing here needs a cluster, and no request leaves the machine: the
// only servers are on 127.0.0.1 and the test's own.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { inClusterConnection } from '../../src/kube/in-cluster-connection.ts';
import { readVolume } from '../../src/read/volume.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { tempDir } from '../cluster/temp-dir.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/config-sync.js');
const tmp = tempDir('bad-input-');

function run(args: string[], env: Record<string, string> = {}, input?: string) {
  const res = spawnSync(process.execPath, [bin, ...args], {
    encoding: 'utf8',
    env: { PATH: process.env.PATH ?? '', HOME: tmp, ...env },
    input,
    timeout: 20_000,
  });
  return { status: res.status, stdout: res.stdout, stderr: res.stderr };
}

/** A Pod's service-account directory with this token (and a CA that is never used). */
function serviceAccountDir(token: string): string {
  const dir = fs.mkdtempSync(path.join(tmp, 'sa-'));
  fs.writeFileSync(path.join(dir, 'token'), token);
  fs.writeFileSync(path.join(dir, 'ca.crt'), '');
  fs.writeFileSync(path.join(dir, 'namespace'), 'web\n');
  return dir;
}

/** An in-cluster environment whose API server is 127.0.0.1:1, where nothing listens. */
function podEnv(extra: Record<string, string> = {}): Record<string, string> {
  return {
    KUBERNETES_SERVICE_HOST: '127.0.0.1',
    KUBERNETES_SERVICE_PORT: '1',
    CONFIG_SYNC_SERVICE_ACCOUNT_DIR: serviceAccountDir('a-token'),
    ...extra,
  };
}

function expectClearError(res: ReturnType<typeof run>, status: number, code: string, ...mentions: string[]) {
  expect(res.status, res.stderr).toBe(status);
  expect(res.stderr).toContain(`error ${code}:`);
  expect(res.stderr).toMatch(/^hint: /m);
  for (const m of mentions) expect(res.stderr).toContain(m);
  expect(res.stderr).not.toMatch(/\n\s+at /);
}

const mountRoot = fs.mkdtempSync(path.join(tmp, 'mounts-'));
fs.mkdirSync(path.join(mountRoot, 'etc/app'), { recursive: true });

describe('inject', () => {
  it('a List with a null item: CS_INJECT_BAD_LIST, exit 2, nothing written', () => {
    const res = run(['inject'], {}, 'apiVersion: v1\nkind: List\nitems:\n  - null\n');
    expectClearError(res, 2, 'CS_INJECT_BAD_LIST', 'item 0 is null');
    expect(res.stdout).toBe('');
  });

  it('a Deployment whose containers are not a list: CS_INJECT_BAD_POD', () => {
    const res = run(
      ['inject'],
      {},
      'apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers: x\n',
    );
    expectClearError(res, 2, 'CS_INJECT_BAD_POD', 'spec.template.spec.containers is not a list');
  });

  it.each(['bad image ref!!', 'UPPER/case:1', 'a:b:c', ''])('--image %j: CS_USAGE_BAD_IMAGE', (image) => {
    const res = run(['inject', '--image', image], {}, 'kind: ConfigMap\n');
    expectClearError(res, 2, 'CS_USAGE_BAD_IMAGE');
  });
});

describe('the in-cluster environment', () => {
  it('KUBERNETES_SERVICE_PORT=notaport: CS_SCOPE_BAD_SERVICE_ENV, exit 2', () => {
    const res = run(
      ['check', '--watch', '/etc/app=configmap/web'],
      podEnv({ KUBERNETES_SERVICE_PORT: 'notaport' }),
    );
    expectClearError(res, 2, 'CS_SCOPE_BAD_SERVICE_ENV', 'KUBERNETES_SERVICE_PORT=notaport');
  });

  it('an empty token file: refused before any request, never sent as anonymous', () => {
    const res = run(
      ['check', '--watch', '/etc/app=configmap/web'],
      podEnv({ CONFIG_SYNC_SERVICE_ACCOUNT_DIR: serviceAccountDir('\n') }),
    );
    expectClearError(res, 2, 'CS_SCOPE_IN_CLUSTER_EMPTY_TOKEN', 'never sends an anonymous request');
    expect(res.stderr).not.toContain('system:anonymous');
  });

  it('a token emptied later (mid-rotation): the connection refuses to send', async () => {
    const dir = serviceAccountDir('a-token');
    const connection = inClusterConnection('https://127.0.0.1:1', dir);
    await expect(connection()).resolves.toMatchObject({ headers: { authorization: 'Bearer a-token' } });
    fs.writeFileSync(path.join(dir, 'token'), '');
    await expect(connection()).rejects.toMatchObject({ code: 'CS_AUTH_EMPTY_TOKEN' });
  });
});

// Reported in a round of faults: a FIFO where a file is named blocked the open until a writer
// came: no output and SIGTERM ignored for as long (a token file), or 30-40 s of silence (a
// config file, a kubeconfig). Each is refused at once, saying what it is.
describe('a FIFO where a file is named', () => {
  const fifo = (name: string) => {
    const file = path.join(fs.mkdtempSync(path.join(tmp, 'fifo-')), name);
    expect(spawnSync('mkfifo', [file]).status).toBe(0);
    return file;
  };

  it('as the service-account token: CS_CONFIG_NOT_A_FILE at once, naming it', () => {
    const dir = serviceAccountDir('a-token');
    fs.rmSync(path.join(dir, 'token'));
    expect(spawnSync('mkfifo', [path.join(dir, 'token')]).status).toBe(0);
    const t0 = performance.now();
    const res = run(
      ['check', '--watch', '/etc/app=configmap/web'],
      podEnv({ CONFIG_SYNC_SERVICE_ACCOUNT_DIR: dir }),
    );
    expectClearError(
      res,
      2,
      'CS_CONFIG_NOT_A_FILE',
      `${path.join(dir, 'token')} is not a regular file (a FIFO); not read`,
    );
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it('as agent --config: CS_CONFIG_FILE, naming it', () => {
    const file = fifo('config.yaml');
    const res = run(['agent', '--config', file, '--listen', '127.0.0.1:0'], podEnv());
    expectClearError(res, 2, 'CS_CONFIG_FILE', `${file} is not a regular file (a FIFO)`);
  });

  it('as check --kubeconfig: refused, naming it', () => {
    const file = fifo('kubeconfig');
    const res = run(['check', '--kubeconfig', file, '--watch', '/etc/app=configmap/web'], {});
    expect(res.status, res.stderr).toBe(2);
    expect(res.stderr).toContain(`${file} is not a regular file (a FIFO)`);
  });
});

describe('names and namespaces, before any request', () => {
  it.each(['Bad_NS!', '../..'])('-n %j: CS_USAGE_BAD_NAMESPACE naming the value and --namespace', (ns) => {
    const res = run(['check', '-n', ns, '--watch', '/etc/app=configmap/web'], podEnv());
    expectClearError(res, 2, 'CS_USAGE_BAD_NAMESPACE', `"${ns}"`, '--namespace');
  });

  it('POD_NAMESPACE=Bad_NS: names POD_NAMESPACE', () => {
    const res = run(['check', '--watch', '/etc/app=configmap/web'], podEnv({ POD_NAMESPACE: 'Bad_NS' }));
    expectClearError(res, 2, 'CS_USAGE_BAD_NAMESPACE', 'POD_NAMESPACE');
  });

  it('POD_NAME=../x: CS_USAGE_BAD_NAME naming POD_NAME', () => {
    const res = run(['check'], podEnv({ POD_NAME: '../x', CONFIG_SYNC_MOUNT_ROOT: mountRoot }));
    expectClearError(res, 2, 'CS_USAGE_BAD_NAME', '"../x" from POD_NAME');
  });

  it('--watch /etc/app=configmap/../x: CS_USAGE_BAD_WATCH', () => {
    const res = run(['check', '--watch', '/etc/app=configmap/../x'], podEnv());
    expectClearError(res, 2, 'CS_USAGE_BAD_WATCH');
  });
});

describe('durations', () => {
  it.each([
    [['--grace', '-5s'], {}, '--grace -5s is not a duration'],
    [[], { CONFIG_SYNC_GRACE: 'abc' }, 'CONFIG_SYNC_GRACE=abc is not a duration'],
    [['--request-timeout', '0s'], {}, '--request-timeout 0s is out of range'],
  ])('%j %j: CS_USAGE_BAD_DURATION naming where it came from', (args, env, message) => {
    const res = run(['check', '--watch', '/etc/app=configmap/web', ...args], podEnv(env));
    expectClearError(res, 2, 'CS_USAGE_BAD_DURATION', message);
  });

  it.each([
    [['--resync', '1000h'], '--resync 1000h is out of range: --resync takes 1s to 24h'],
    [['--heartbeat', '0'], '--heartbeat 0 is out of range'],
    [['--poll', '0'], '--poll 0 is out of range'],
  ])('agent %j: refused at start', (args, message) => {
    const res = run(['agent', '--watch', '/etc/app=configmap/web', ...args], podEnv());
    expectClearError(res, 2, 'CS_USAGE_BAD_DURATION', message);
  });

  it('--grace below --debounce: works, and a warning says what it means', () => {
    const res = run(
      ['check', '--watch', '/etc/app=configmap/web', '--grace', '1s', '--debounce', '5s'],
      podEnv({ CONFIG_SYNC_MOUNT_ROOT: mountRoot }),
    );
    expect(res.stderr).toContain(
      'warning: --grace 1s is shorter than --debounce 5s: a volume kubelet updates counts as drifted sooner',
    );
  });
});

describe('the mount root', () => {
  it.each([
    ['missing', path.join(tmp, 'no-such-dir')],
    ['a file', path.join(tmp, 'a-file')],
  ])('%s: CS_CONFIG_MOUNT_ROOT, exit 2', (_what, root) => {
    fs.writeFileSync(path.join(tmp, 'a-file'), '');
    const res = run(['check', '--watch', '/etc/app=configmap/web', '--mount-root', root], podEnv());
    expectClearError(res, 2, 'CS_CONFIG_MOUNT_ROOT', root, '--mount-root');
  });
});

describe('agent --listen', () => {
  const blockers: net.Server[] = [];
  afterAll(() => {
    for (const b of blockers) b.close();
  });

  it.each([
    ['garbage', 'CS_USAGE_BAD_FLAG'],
    [':99999', 'CS_USAGE_BAD_FLAG'],
    // TEST-NET-1 (RFC 5737): on no machine. Binding fails locally; nothing is sent.
    ['192.0.2.1:9464', 'CS_CONFIG_LISTEN'],
  ])('%s: %s, exit 2 at once', (listen, code) => {
    const res = run(['agent', '--watch', '/etc/app=configmap/web', '--listen', listen], podEnv());
    expectClearError(res, 2, code, listen);
  });

  it('a port in use: CS_CONFIG_LISTEN, exit 2 at once', async () => {
    const port = await freeLoopbackPort();
    const blocker = net.createServer();
    blockers.push(blocker);
    await new Promise<void>((resolve) => blocker.listen(port, '127.0.0.1', resolve));
    const res = run(
      ['agent', '--watch', '/etc/app=configmap/web', '--listen', `127.0.0.1:${port}`],
      podEnv(),
    );
    expectClearError(res, 2, 'CS_CONFIG_LISTEN', 'EADDRINUSE');
  });
});

describe('an API server that accepts the connection and never answers', () => {
  it('check gives up after --request-timeout: exit 3, saying why', async () => {
    const silent = net.createServer(() => {});
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    const port = (silent.address() as net.AddressInfo).port;
    try {
      const t0 = Date.now();
      const res = await new Promise<{ status: number | null; stdout: string }>((resolve) => {
        const child = spawn(
          process.execPath,
          [bin, 'check', '--watch', '/etc/app=configmap/web', '--request-timeout', '1s'],
          {
            env: {
              PATH: process.env.PATH ?? '',
              HOME: tmp,
              ...podEnv({ KUBERNETES_SERVICE_PORT: String(port), CONFIG_SYNC_MOUNT_ROOT: mountRoot }),
            },
          },
        );
        let stdout = '';
        child.stdout.on('data', (c: Buffer) => {
          stdout += c.toString();
        });
        child.once('exit', (status) => resolve({ status, stdout }));
      });
      expect(res.status).toBe(3);
      expect(res.stdout).toMatch(/no answer in 1 s|ETIMEDOUT/);
      expect(Date.now() - t0).toBeLessThan(15_000);
    } finally {
      silent.close();
    }
  });
});

describe('keys that are not regular files', () => {
  it.each([
    ['a FIFO', (file: string) => spawnSync('mkfifo', [file])],
    ['a link to /dev/zero', (file: string) => fs.symlinkSync('/dev/zero', file)],
  ])('%s: read at once as unreadable, never hanging', (_what, make) => {
    const dir = fs.mkdtempSync(path.join(tmp, 'volume-'));
    make(path.join(dir, 'app.yaml'));
    const observed = readVolume(dir, ['app.yaml'], false);
    expect(observed.error).toMatch(
      /app\.yaml is not a regular file \((a FIFO|a character device)\); not read/,
    );
  });
});

/** A kubeconfig in `dir` with one context `x` whose user `u` is `user`; the server is never asked. */
function kubeconfigWith(dir: string, user: Record<string, unknown>): string {
  const file = path.join(dir, 'config');
  fs.writeFileSync(
    file,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'c', cluster: { server: 'https://127.0.0.1:1' } }],
      users: [{ name: 'u', user }],
      contexts: [{ name: 'x', context: { cluster: 'c', user: 'u' } }],
      'current-context': 'x',
    }),
  );
  return file;
}

describe('a kubeconfig tokenFile that ends with a newline', () => {
  it('is used (client-node drops the key) and trimmed as kubectl trims it', async () => {
    const dir = fs.mkdtempSync(path.join(tmp, 'kubeconfig-'));
    const tokenFile = path.join(dir, 'token');
    fs.writeFileSync(tokenFile, 'a-token\n');
    const file = kubeconfigWith(dir, { tokenFile });
    const { kubeconfigConnection } = await import('../../src/kube/kubeconfig-connection.ts');
    const connection = await kubeconfigConnection([file], 'x')();
    expect(connection.headers).toMatchObject({ Authorization: 'Bearer a-token' });
    const { loadKubeconfig } = await import('../../src/kube/kubeconfig-view.ts');
    const view = loadKubeconfig([file], false);
    expect(view.ok && view.view.users.u).toEqual({ credentials: 'token-file' });
  });
});

describe('a kubeconfig exec credential plugin', () => {
  /** A kubeconfig whose user runs `script` (a shell script) as its exec plugin. */
  function withPlugin(script: string): string {
    const dir = fs.mkdtempSync(path.join(tmp, 'exec-'));
    const plugin = path.join(dir, 'plugin.sh');
    fs.writeFileSync(plugin, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    return kubeconfigWith(dir, {
      exec: {
        apiVersion: 'client.authentication.k8s.io/v1',
        command: plugin,
        args: [dir],
        interactiveMode: 'Never',
      },
    });
  }

  async function connect(file: string) {
    const { kubeconfigConnection } = await import('../../src/kube/kubeconfig-connection.ts');
    return kubeconfigConnection([file], 'x');
  }

  it.each([
    [
      'echo "starting" >&2; echo "error: you must log in first" >&2; exit 3',
      'exited with code 3; its last line on stderr: error: you must log in first',
    ],
    ['exit 1', 'exited with code 1; it wrote nothing on stderr'],
    ['echo "not json"', 'exited 0 but printed no ExecCredential JSON on stdout'],
  ])('%j: CS_AUTH_EXEC_FAILED with its exit code and last stderr line', async (script, said) => {
    const connection = await connect(withPlugin(script));
    const error = await connection().then(
      () => undefined,
      (e: unknown) => e as { code?: string; message?: string; hint?: string },
    );
    expect(error?.code).toBe('CS_AUTH_EXEC_FAILED');
    expect(error?.message).toContain('the credential plugin');
    expect(error?.message).toContain('of kubeconfig user "u"');
    expect(error?.message).toContain(said);
    expect(error?.message).not.toContain('not json');
  });

  /** The plugin's source with a short timing of the test's own; the notices it gave. */
  async function timedSource(script: string, timeoutMs: number, noticeAfterMs: number) {
    const dir = fs.mkdtempSync(path.join(tmp, 'exec-slow-'));
    const plugin = path.join(dir, 'plugin.sh');
    fs.writeFileSync(plugin, `#!/bin/sh\n${script}\n`, { mode: 0o755 });
    const { execCredentialSource } = await import('../../src/kube/exec-credential.ts');
    const notices: string[] = [];
    const source = execCredentialSource({ command: plugin, args: [dir] }, 'u', undefined, Date.now, {
      timeoutMs,
      noticeAfterMs,
      onWaiting: (message) => notices.push(message),
    });
    return { dir, plugin, source, notices };
  }

  it('one that hangs: said to be awaited, then stopped with all it started, and the run fails with its last stderr line', async () => {
    const { dir, plugin, source, notices } = await timedSource(
      'echo "opening a browser to log in" >&2; sleep 60 & echo $! > "$1/sleep.pid"; wait',
      1500,
      200,
    );
    const started = Date.now();
    const error = await source.current().then(
      () => undefined,
      (e: unknown) => e as { code?: string; message?: string },
    );
    expect(Date.now() - started).toBeLessThan(5_000);
    expect(error?.code).toBe('CS_AUTH_EXEC_FAILED');
    expect(error?.message).toContain(
      'did not finish in 1.5 s; its last line on stderr: opening a browser to log in',
    );
    expect(notices).toEqual([
      `waiting for the credential plugin "${plugin}" of kubeconfig user "u" (0.2 s so far; stopped after 1.5 s); if it needs a login, run it yourself first`,
    ]);
    // The `sleep` the script started went with it (its process group was killed).
    const sleepPid = Number(fs.readFileSync(path.join(dir, 'sleep.pid'), 'utf8'));
    const deadline = Date.now() + 3_000;
    const alive = () => {
      try {
        return !fs.readFileSync(`/proc/${sleepPid}/stat`, 'utf8').includes(') Z ');
      } catch {
        return false;
      }
    };
    while (alive() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(alive()).toBe(false);
  });

  it('one that is slow but answers: said to be awaited once, and its token used', async () => {
    const { source, notices } = await timedSource(
      'sleep 0.6; echo \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"slow-token"}}\'',
      10_000,
      200,
    );
    expect(await source.current()).toEqual({ token: 'slow-token' });
    expect(notices).toHaveLength(1);
    expect(notices[0]).toContain('waiting for the credential plugin');
  });

  it('one that answers at once: nothing said', async () => {
    const { source, notices } = await timedSource(
      'echo \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"fast"}}\'',
      10_000,
      2_000,
    );
    expect(await source.current()).toEqual({ token: 'fast' });
    await new Promise((r) => setTimeout(r, 2_200));
    expect(notices).toEqual([]);
  });

  it('a token it returns is sent, and reused until it expires', async () => {
    const file = withPlugin(
      'echo run >> "$1/runs"; echo \'{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"exec-token","expirationTimestamp":"2999-01-01T00:00:00Z"}}\'',
    );
    const connection = await connect(file);
    expect((await connection()).headers).toMatchObject({ Authorization: 'Bearer exec-token' });
    expect((await connection()).headers).toMatchObject({ Authorization: 'Bearer exec-token' });
    expect(fs.readFileSync(path.join(path.dirname(file), 'runs'), 'utf8')).toBe('run\n');
  });
});
