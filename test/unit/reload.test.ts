import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { findProcess, ReloadError, shouldReload, triggerReload } from '../../src/heal/reload.ts';
import type { Verdict } from '../../src/verify/verdict.ts';

const v = (state: Verdict['state']): Verdict => ({
  target: 'app:/etc/app',
  state,
  reason: 'InSync',
  message: '',
  mismatches: [],
});

describe('shouldReload', () => {
  it.each([
    ['in sync, config changed since the app loaded it', [v('InSync')], 'old', 'new', true],
    ['in sync, same config', [v('InSync')], 'same', 'same', false],
    ['still propagating: wait for the files', [v('InSync'), v('Propagating')], 'old', 'new', false],
    ['drifted: a reload cannot fix the files', [v('Drifted')], 'old', 'new', false],
    ['nothing known yet of what the app loaded', [v('InSync')], undefined, 'new', false],
  ] as const)('%s', (_, verdicts, loaded, current, expected) => {
    expect(shouldReload(verdicts, loaded, current)).toBe(expected);
  });
});

describe('triggerReload over HTTP', () => {
  let server: http.Server | undefined;
  afterEach(() => new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve())));

  async function serve(statuses: number[]): Promise<{ url: string; calls: string[] }> {
    const calls: string[] = [];
    server = http.createServer((req, res) => {
      calls.push(req.method ?? '');
      res.writeHead(statuses[Math.min(calls.length - 1, statuses.length - 1)] ?? 200).end();
    });
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
    return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/-/reload`, calls };
  }

  it('POSTs and accepts a 2xx', async () => {
    const { url, calls } = await serve([200]);
    expect(await triggerReload({ kind: 'http', url })).toBe(`POST ${url} answered 200`);
    expect(calls).toEqual(['POST']);
  });

  it('retries a failure, then succeeds', async () => {
    const { url, calls } = await serve([503, 200]);
    await triggerReload({ kind: 'http', url });
    expect(calls).toHaveLength(2);
  });

  it('gives up after three attempts with the status it got', async () => {
    const { url, calls } = await serve([500]);
    await expect(triggerReload({ kind: 'http', url })).rejects.toThrow(
      new ReloadError(`POST ${url} answered 500`),
    );
    expect(calls).toHaveLength(3);
  });
});

describe('findProcess (a shared PID namespace)', () => {
  it('matches comm or the basename of argv[0]', () => {
    const proc = fs.mkdtempSync(path.join(os.tmpdir(), 'proc-'));
    const add = (pid: number, comm: string, argv0: string) => {
      fs.mkdirSync(path.join(proc, String(pid)));
      fs.writeFileSync(path.join(proc, String(pid), 'comm'), `${comm}\n`);
      fs.writeFileSync(path.join(proc, String(pid), 'cmdline'), `${argv0}\0--flag\0`);
    };
    add(10, 'sh', '/bin/sh');
    add(11, 'nginx', 'nginx: master process');
    add(12, 'node', '/usr/local/bin/my-app');
    fs.mkdirSync(path.join(proc, 'self'));
    expect(findProcess('nginx', proc)).toBe(11);
    expect(findProcess('my-app', proc)).toBe(12);
    expect(findProcess('postgres', proc)).toBeUndefined();
  });

  it('a missing process is a clear error that mentions shareProcessNamespace', async () => {
    await expect(
      triggerReload({ kind: 'signal', signal: 'SIGHUP', process: 'no-such-app-here' }),
    ).rejects.toThrow('no process named no-such-app-here (is shareProcessNamespace: true set on the Pod?)');
  });
});
