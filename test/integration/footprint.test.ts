// Which of Node's own modules the agent loads as it runs in a Pod: in-cluster, in sync, scraped,
// then stopped. Every module Node loads stays resident for the process's life, in every Pod.
// These are ones the agent never uses, which its dependencies or the bundle's interop loaded all
// the same until scripts/build.mjs stopped them (each measured there): node:util's diff and SIGINT
// tracer with worker_threads behind it (esbuild's interop asked every util property for its
// descriptor). A bare `require('node:http')` server, the bench's baseline, loads none of them.
// assert (sonic-boom, for its asynchronous mode) was one of them until the transport spoke
// HTTP/2: node:http2 requires it (lib/internal/http2/core.js), so the build no longer defers
// sonic-boom's, and its cost is in the bench's idle rows.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { useNamespace } from './support.ts';
import { AgentProcess, type AppPod, createApp, sample } from './support-app.ts';

const UNUSED = [
  'NativeModule worker_threads',
  'NativeModule internal/worker',
  'NativeModule internal/util/diff',
  'NativeModule internal/util/trace_sigint',
];

describe("the agent's own Node modules", () => {
  const ns = useNamespace('footprint');

  it('are those it uses: no worker_threads or util diff', async () => {
    const [pod] = (await createApp(ns.admin, ns.name, 1)) as [AppPod];
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'config-sync-footprint-'));
    // Removed whatever the outcome: a failed run must not leave its files in the temp dir.
    try {
      const list = path.join(dir, 'modules.txt');
      const preload = path.join(dir, 'module-list.cjs');
      // process.moduleLoadList names every built-in module and binding the process loaded, in order.
      fs.writeFileSync(
        preload,
        `process.on('exit', () => require('fs').writeFileSync(${JSON.stringify(list)}, process.moduleLoadList.join('\\n')));\n`,
      );
      const agent = AgentProcess.start({ ...pod, env: { ...pod.env, NODE_OPTIONS: `--require ${preload}` } });
      let exitCode: number | null;
      try {
        await agent.waitFor((l) => l.state === 'InSync', 'the first verdict InSync');
        expect(sample(await agent.metrics(), 'config_sync_in_sync')).toBe(1);
      } finally {
        exitCode = await agent.stop();
      }
      expect(exitCode).toBe(0);
      const loaded = fs.readFileSync(list, 'utf8').split('\n');
      // What the agent does use, so that an empty or foreign list cannot pass.
      expect(loaded).toEqual(
        expect.arrayContaining([
          'NativeModule http',
          'NativeModule tls',
          'NativeModule crypto',
          'NativeModule util',
          'NativeModule http2',
        ]),
      );
      expect(loaded.filter((m) => UNUSED.includes(m))).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
