import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  appStartedBeforeSwap,
  findProcess,
  ReloadError,
  reloadTiming,
  shouldReload,
  triggerReload,
} from '../../src/heal/reload.ts';
import type { Verdict } from '../../src/verify/verdict.ts';
import { tempDir } from '../cluster/temp-dir.ts';

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
    const proc = tempDir('proc-');
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

describe('reloadTiming: a burst costs at most two reloads, the last after the last change', () => {
  const settle = 1000;
  it.each([
    ['the first config seen', { since: 0, previousStableMs: undefined }, 10, { now: true }],
    ['a change after a quiet spell: at once', { since: 5000, previousStableMs: 60_000 }, 5000, { now: true }],
    ['a change 100 ms after the last: wait', { since: 5100, previousStableMs: 100 }, 5100, { at: 6100 }],
    [
      'the same, once it stood for the settle time',
      { since: 5100, previousStableMs: 100 },
      6100,
      { now: true },
    ],
  ] as const)('%s', (_, steadiness, now, expected) => {
    expect(reloadTiming(steadiness, now, settle)).toEqual(expected);
  });

  it('20 changes 100 ms apart: two reloads, the second after the last change', () => {
    const reloads: number[] = [];
    // The config before the burst had stood for a minute.
    let since = -60_000;
    let previous: number | undefined;
    let pendingAt: number | undefined;
    for (let t = 0; t <= 5000; t += 10) {
      const change = t % 100 === 0 && t < 2000;
      if (change) {
        previous = t - since;
        since = t;
        pendingAt = t;
      }
      if (pendingAt === undefined) continue;
      const when = reloadTiming({ since, previousStableMs: previous }, t, settle);
      if ('now' in when) {
        reloads.push(t);
        pendingAt = undefined;
      }
    }
    expect(reloads).toHaveLength(2);
    expect(reloads[0]).toBe(0);
    expect(reloads[1]).toBeGreaterThanOrEqual(1900 + settle);
  });

  it('settle 0: every change at once', () => {
    expect(reloadTiming({ since: 100, previousStableMs: 10 }, 100, 0)).toEqual({ now: true });
  });
});

describe('appStartedBeforeSwap', () => {
  it.each([
    ['the files swapped after the app started: a reload is owed', 1000, 2000, true],
    ['the app started after the last swap: it has the files', 3000, 2000, false],
    ['no container status yet', undefined, 2000, undefined],
    ['no ..data (a subPath file)', 1000, undefined, undefined],
  ] as const)('%s', (_, started, swapped, expected) => {
    expect(appStartedBeforeSwap(started, swapped)).toBe(expected);
  });
});
