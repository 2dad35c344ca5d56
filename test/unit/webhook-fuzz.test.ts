// The webhook must not fall over: any caller that reaches its port can send any body. The
// built `config-sync webhook` runs as a child process; it gets the bodies that used to kill it,
// then a few thousand random mutations of a valid review (seeded, so a failure replays), and
// must answer each with 400 or an allowed AdmissionReview, and still serve afterwards.
import { type ChildProcess, execFileSync, spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEFAULT_SIDECAR } from '../../src/inject/sidecar.ts';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../../src/webhook/body-limits.ts';
import { mutatePod } from '../../src/webhook/mutate.ts';
import { readReview } from '../../src/webhook/review.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';
import { tempDir } from '../cluster/temp-dir.ts';
import { waitFor } from '../cluster/wait.ts';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/config-sync.js');

const validReview = () => ({
  apiVersion: 'admission.k8s.io/v1',
  kind: 'AdmissionReview',
  request: {
    uid: 'u-1',
    namespace: 'web',
    object: {
      kind: 'Pod',
      metadata: { generateName: 'web-', labels: { app: 'web' } },
      spec: {
        serviceAccountName: 'config-sync-agent',
        volumes: [
          { name: 'config', configMap: { name: 'web-config', items: [{ key: 'a', path: 'a' }] } },
          { name: 'creds', secret: { secretName: 'web-secrets' } },
          { name: 'all', projected: { sources: [{ configMap: { name: 'x' } }, { secret: { name: 'y' } }] } },
        ],
        initContainers: [{ name: 'migrate', image: 'm' }],
        containers: [
          {
            name: 'app',
            image: 'x',
            volumeMounts: [
              { name: 'config', mountPath: '/etc/app' },
              { name: 'creds', mountPath: '/etc/creds/p', subPath: 'p' },
              { name: 'all', mountPath: '/etc/all' },
            ],
          },
        ],
      },
    },
  },
});

/** The bodies that killed the webhook process before (issue 12, item 2). */
const KILLERS: [string, unknown][] = [
  ['null', null],
  ['containers: [null]', withSpec({ containers: [null] })],
  ['volumes: [null]', withSpec({ volumes: [null] })],
  ['initContainers: "x"', withSpec({ initContainers: 'x' })],
  ['volumeMounts: [null]', withSpec({ containers: [{ name: 'app', volumeMounts: [null] }] })],
  [
    'projected sources: [null]',
    withSpec({
      volumes: [{ name: 'all', projected: { sources: [null] } }],
      containers: [{ name: 'app', volumeMounts: [{ name: 'all', mountPath: '/etc/all' }] }],
    }),
  ],
];

function withSpec(patch: Record<string, unknown>) {
  const review = validReview();
  Object.assign(review.request.object.spec, patch);
  return review;
}

/** mulberry32: a small seeded PRNG, so a failing mutation can be replayed from its seed. */
function prng(seed: number): () => number {
  let a = seed;
  return () => {
    a = (a + 0x6d2b79f5) | 0;
    let t = Math.imul(a ^ (a >>> 15), 1 | a);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const ODD_VALUES: unknown[] = [
  null,
  0,
  -1,
  1e308,
  '',
  'x',
  true,
  [],
  {},
  [null],
  [[]],
  [{}],
  { a: null },
  '💥',
];

/** A copy of the valid review with one to three random places replaced or deleted. */
function mutate(random: () => number): unknown {
  const review = validReview() as unknown as Record<string, unknown>;
  const edits = 1 + Math.floor(random() * 3);
  for (let e = 0; e < edits; e++) {
    // Walk down from the root to a random depth, then replace or delete what is there.
    let parent: Record<string, unknown> | unknown[] = review;
    for (;;) {
      const keys = Object.keys(parent);
      if (keys.length === 0) break;
      const key = keys[Math.floor(random() * keys.length)] as string;
      const child = (parent as Record<string, unknown>)[key];
      const stop = random() < 0.3 || typeof child !== 'object' || child === null;
      if (stop) {
        if (random() < 0.2 && !Array.isArray(parent)) delete (parent as Record<string, unknown>)[key];
        else
          (parent as Record<string, unknown>)[key] = structuredClone(
            ODD_VALUES[Math.floor(random() * ODD_VALUES.length)],
          );
        break;
      }
      parent = child as Record<string, unknown>;
    }
  }
  return review;
}

describe('the nesting check before parsing', () => {
  it('counts arrays and objects, not brackets inside strings or after an escaped quote', () => {
    expect(nestsDeeperThan('[[[1]]]', 3)).toBe(false);
    expect(nestsDeeperThan('[[[[1]]]]', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":{"b":[{}]}}', 3)).toBe(true);
    expect(nestsDeeperThan('{"a":"[[[[[[[[["}', 3)).toBe(false);
    expect(nestsDeeperThan('{"a":"\\"[[[[[[["}', 3)).toBe(false);
    expect(nestsDeeperThan(JSON.stringify(validReview()), MAX_JSON_DEPTH)).toBe(false);
  });
});

describe('the mutation, pure: never throws, always allows', () => {
  it('on 5,000 random mutations of a valid review', () => {
    const random = prng(12);
    for (let i = 0; i < 5000; i++) {
      const body = mutate(random);
      const read = readReview(body);
      if ('invalid' in read) continue;
      const answer = mutatePod(read.review, DEFAULT_SIDECAR).review.response;
      expect(answer.allowed).toBe(true);
    }
  });
});

describe('the webhook process under hostile bodies', () => {
  const dir = tempDir('webhook-fuzz-');
  const cert = path.join(dir, 'tls.crt');
  const key = path.join(dir, 'tls.key');
  let port: number;
  let child: ChildProcess;
  let exited: number | null | undefined;
  /** The webhook's log lines (it logs on stdout). */
  const stderrLines: string[] = [];
  const agent = new https.Agent({ keepAlive: true, rejectUnauthorized: false, maxSockets: 8 });

  function post(body: string): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      const req = https.request(
        {
          host: '127.0.0.1',
          port,
          path: '/mutate',
          method: 'POST',
          agent,
          headers: { 'content-type': 'application/json' },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (c: string) => {
            text += c;
          });
          res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });
  }

  beforeAll(async () => {
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'].concat(
        ['-subj', '/CN=127.0.0.1', '-keyout', key, '-out', cert],
      ),
      { stdio: 'ignore' },
    );
    port = await freeLoopbackPort();
    child = spawn(
      process.execPath,
      [bin, 'webhook', '--listen', `127.0.0.1:${port}`, '--tls-cert-file', cert, '--tls-key-file', key],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    child.stdout?.on('data', (c: Buffer) => stderrLines.push(...c.toString().split('\n')));
    child.once('exit', (code) => {
      exited = code;
    });
    await waitFor(
      async () => {
        if (exited !== undefined) throw new Error(`the webhook exited with ${exited}`);
        return (await fetchHealth()) === 200 || undefined;
      },
      { what: 'the webhook to serve', timeoutMs: 10_000 },
    );
  });

  afterAll(() => {
    child?.kill('SIGTERM');
    agent.destroy();
  });

  function fetchHealth(): Promise<number> {
    return new Promise((resolve) => {
      https
        .get({ host: '127.0.0.1', port, path: '/healthz', agent }, (res) => {
          res.resume();
          resolve(res.statusCode ?? 0);
        })
        .on('error', () => resolve(0));
    });
  }

  it.each(KILLERS)('%s: answered, and the process still serves', async (_what, body) => {
    const answer = await post(JSON.stringify(body));
    if (answer.status === 200) {
      const review = JSON.parse(answer.text) as { response: { allowed: boolean; warnings?: string[] } };
      expect(review.response.allowed).toBe(true);
      expect(review.response.warnings?.[0]).toMatch(/config-sync not injected: the Pod could not be read/);
    } else {
      expect(answer.status).toBe(400);
      expect(answer.text).toMatch(/^not an AdmissionReview: /);
    }
    expect(await fetchHealth()).toBe(200);
    expect(exited).toBeUndefined();
  });

  // Reported in a round of faults: a 4,000,000-byte body of nested `[` took the webhook from 65 to
  // 300 MB (four at once, 600 MB, over its 160Mi limit), and a body over 4 MiB got a connection
  // reset with no answer and no log line.
  it('a body of 4,000,000 nested [: refused unparsed (400), its memory unmoved, still serving', async () => {
    const before = rssOf(child.pid ?? 0);
    const answers = await Promise.all(Array.from({ length: 4 }, () => post('['.repeat(4_000_000))));
    for (const a of answers)
      expect(a).toEqual({ status: 400, text: 'not an AdmissionReview: nested deeper than 64\n' });
    // Four bodies of 4 MB each held at once, and nothing built from them.
    expect(rssOf(child.pid ?? 0) - before).toBeLessThan(64);
    expect(await fetchHealth()).toBe(200);
    expect(exited).toBeUndefined();
  });

  it('a body over 4 MiB: 413, told in the log, still serving', async () => {
    const answer = await post(`{"x":"${'a'.repeat(5 * 1024 * 1024)}"}`).catch((e: Error) => ({
      status: 0,
      text: e.message,
    }));
    expect(answer.status).toBe(413);
    expect(answer.text).toMatch(/over 4194304 bytes; not read/);
    await waitFor(
      () => (stderrLines.some((l) => l.includes('a body over the cap, refused')) ? true : undefined),
      {
        what: 'the log line',
      },
    );
    expect(await fetchHealth()).toBe(200);
    expect(exited).toBeUndefined();
  });

  it('3,000 random mutations of a valid review: each answered 400 or allowed, and still serving', async () => {
    const random = prng(2026);
    const statuses = new Map<number, number>();
    for (let batch = 0; batch < 100; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 30 }, () => post(JSON.stringify(mutate(random)))),
      );
      for (const a of answers) {
        statuses.set(a.status, (statuses.get(a.status) ?? 0) + 1);
        if (a.status === 200) expect(JSON.parse(a.text).response.allowed).toBe(true);
      }
    }
    expect([...statuses.keys()].every((s) => s === 200 || s === 400)).toBe(true);
    expect(statuses.get(200)).toBeGreaterThan(0);
    expect(await fetchHealth()).toBe(200);
    expect(exited).toBeUndefined();
  }, 60_000);
});

/** A process's resident memory in MiB. */
function rssOf(pid: number): number {
  return Number(/^VmRSS:\s+(\d+) kB/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]) / 1024;
}

describe('the webhook with a certificate it cannot use', () => {
  const dir = tempDir('webhook-tls-');
  const pair = (name: string) => {
    const cert = path.join(dir, `${name}.crt`);
    const key = path.join(dir, `${name}.key`);
    execFileSync(
      'openssl',
      ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1'].concat(
        ['-subj', '/CN=127.0.0.1', '-keyout', key, '-out', cert],
      ),
      { stdio: 'ignore' },
    );
    return { cert, key };
  };

  it.each([
    [
      'a certificate that is not PEM',
      () => {
        const { key } = pair('a');
        const cert = path.join(dir, 'garbage.crt');
        fs.writeFileSync(cert, 'not a certificate\n');
        return { cert, key };
      },
    ],
    ['a key that does not match the certificate', () => ({ cert: pair('b').cert, key: pair('c').key })],
  ])('%s: CS_CONFIG_TLS, exit 2, naming both files', async (_what, files) => {
    const { cert, key } = files();
    const port = await freeLoopbackPort();
    const run = spawnSync(
      process.execPath,
      [bin, 'webhook', '--listen', `127.0.0.1:${port}`, '--tls-cert-file', cert, '--tls-key-file', key],
      { encoding: 'utf8', timeout: 10_000 },
    );
    expect(run.status).toBe(2);
    expect(run.stderr).toContain('CS_CONFIG_TLS');
    expect(run.stderr).toContain(cert);
    expect(run.stderr).toContain(key);
    expect(run.stderr).not.toMatch(/at .*\.js:\d+/);
  });
});
