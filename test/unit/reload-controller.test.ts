// Reload mode's effects (src/agent/reload-controller.ts), with the agent's parts it calls passed
// in: a reload that fails falls back to a restart once; a restart refused with 409 (the workload
// changed while planning) or one that failed is not the fallback carried out, so a later pass
// plans it again.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { type HealOutcome, reloadController } from '../../src/agent/reload-controller.ts';
import { createLogger } from '../../src/log.ts';
import { createMetrics } from '../../src/metrics/metrics.ts';
import type { SourceSnapshot, SourceState } from '../../src/verify/source.ts';
import type { Verdict } from '../../src/verify/verdict.ts';
import { freeLoopbackPort } from '../cluster/ports.ts';

const inSync: Verdict[] = [
  { target: 'app:/etc/app', state: 'InSync', reason: 'InSync', message: 'files match', mismatches: [] },
];

describe('the reload fallback', () => {
  it('after a 409 or a failure it stays owed and is planned again; once carried out, never again for that config', async () => {
    let version = '1';
    const lookup = (): SourceState => ({
      state: 'present',
      snapshot: {
        ref: { kind: 'ConfigMap', name: 'app' },
        uid: 'u',
        resourceVersion: version,
        immutable: false,
        changedAt: undefined,
        keys: new Map([['app.yaml', { sha256: version.repeat(64).slice(0, 64), size: 1 }]]),
      },
    });
    const answers: HealOutcome[] = [{ conflict: true }, { failed: true, retryAt: 0 }, {}];
    const acted: Verdict[][] = [];
    const nobody = `http://127.0.0.1:${await freeLoopbackPort()}/-/reload`;
    const controller = reloadController({
      config: { trigger: { kind: 'http', url: nobody }, settleMs: 0 },
      targets: [],
      sources: [{ kind: 'ConfigMap', name: 'app' }],
      volumePath: (t) => t.mountPath,
      lookup,
      starts: () => ({ agent: 0, byContainer: {} }),
      confirm: async () => ({ corrected: false, unconfirmed: new Map() }),
      act: async (verdicts) => {
        acted.push([...verdicts]);
        return answers.shift() ?? {};
      },
      wake: () => {},
      event: async () => {},
      metrics: createMetrics(() => ({})),
      log: createLogger('error', {}, new Writable({ write: (_c, _e, done) => done() })),
      signal: new AbortController().signal,
    });

    const t0 = Date.parse('2026-12-03T12:00:00Z');
    controller.see(t0);
    expect(await controller.afterInSync(inSync, t0)).toEqual({}); // the config the app started with
    version = '2';
    controller.see(t0 + 10_000);
    // The reload POST finds no app: the fallback restart is planned, and answered 409.
    await controller.afterInSync(inSync, t0 + 10_000);
    expect(acted).toHaveLength(1);
    expect(acted[0]?.at(-1)).toMatchObject({ target: 'reload', state: 'Drifted', reason: 'ReloadFailed' });
    // The next pass: still owed, planned again; the restart fails (the API did not answer), so
    // it stays owed, and the pass asks to run again when the failure's backoff ends.
    expect(await controller.afterInSync(inSync, t0 + 11_000)).toEqual({ retryAt: 0 });
    expect(acted).toHaveLength(2);
    // The pass at that time: planned again, carried out.
    await controller.afterInSync(inSync, t0 + 16_000);
    expect(acted).toHaveLength(3);
    // Carried out: not again for this config.
    await controller.afterInSync(inSync, t0 + 17_000);
    expect(acted).toHaveLength(3);
  });
});

describe('the reload on a new config', () => {
  const snapshotOf = (resourceVersion: string, sha: string): SourceSnapshot => ({
    ref: { kind: 'ConfigMap', name: 'app' },
    uid: 'u',
    resourceVersion,
    immutable: false,
    changedAt: undefined,
    keys: new Map([['app.yaml', { sha256: sha.repeat(64), size: 1 }]]),
  });

  it('reloads once per snapshot the cache holds, as the cache hands out the same object', async () => {
    // The source cache keeps one snapshot object per version and replaces it on a change; the
    // controller answers its config digest again while the object is the same.
    let reloads = 0;
    const app = http.createServer((_req, res) => {
      reloads += 1;
      res.end('ok');
    });
    await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
    let held = snapshotOf('1', 'a');
    const controller = reloadController({
      config: {
        trigger: { kind: 'http', url: `http://127.0.0.1:${(app.address() as AddressInfo).port}/-/reload` },
        settleMs: 0,
      },
      targets: [],
      sources: [{ kind: 'ConfigMap', name: 'app' }],
      volumePath: (t) => t.mountPath,
      lookup: (): SourceState => ({ state: 'present', snapshot: held }),
      starts: () => ({ agent: 0, byContainer: {} }),
      confirm: async () => ({ corrected: false, unconfirmed: new Map() }),
      act: async () => ({}),
      wake: () => {},
      event: async () => {},
      metrics: createMetrics(() => ({})),
      log: createLogger('error', {}, new Writable({ write: (_c, _e, done) => done() })),
      signal: new AbortController().signal,
    });
    try {
      const t0 = Date.parse('2026-12-03T12:00:00Z');
      const pass = async (at: number) => {
        controller.see(at);
        controller.confirmLast(true);
        await controller.afterInSync(inSync, at);
      };
      await pass(t0); // the config the app started with
      await pass(t0 + 1000);
      expect(reloads).toBe(0);
      held = snapshotOf('2', 'b');
      await pass(t0 + 2000);
      expect(reloads).toBe(1);
      await pass(t0 + 3000);
      expect(reloads).toBe(1);
      held = snapshotOf('3', 'c');
      await pass(t0 + 4000);
      await pass(t0 + 5000);
      expect(reloads).toBe(2);
    } finally {
      app.close();
    }
  });
});
