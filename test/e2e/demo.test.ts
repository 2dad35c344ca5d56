// `npm run demo` is one of the README's two fresh-clone commands: it must run to the end. It
// starts a control plane of its own (and, as root, a real node), so it is independent of this
// run's. This file is in the e2e project: the node is one per machine, and e2e files take turns.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { expect, it } from 'vitest';
import { root } from '../cluster/app.ts';
import { nodeUnsupported } from '../cluster/node.ts';
import { waitFor } from '../cluster/wait.ts';

it('the demo runs every step and ends with exactly one restart', async () => {
  const child = spawn(process.execPath, [path.join(root, 'scripts/demo.ts')], {
    cwd: root,
    env: { ...process.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    out += c.toString();
  });
  let closed = false;
  child.once('close', () => {
    closed = true;
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  // The last lines may still be in the pipes at 'exit': wait until both have ended ('close').
  // The demo's own processes log to files, so nothing it left running holds them open.
  await waitFor(() => closed || undefined, {
    what: "the demo's output to end after it exited",
    timeoutMs: 30_000,
    intervalMs: 20,
    onTimeout: () => `its output so far:\n${out.slice(-2000)}`,
  });
  expect(out, out).toContain('Exactly 1 restart for 2 agents that saw the same drift. Done.');
  for (let n = 1; n <= 8; n += 1) expect(out).toContain(`[${n}/8]`);
  expect(out).toMatch(/InSync again; propagation measured \d+\.\d+ s/);
  expect(out).toContain('| plan: restart Deployment web');
  if (nodeUnsupported()) {
    expect(out).toContain('deduped: a sibling already restarted Deployment web');
  } else {
    // The real node: kubelet's own propagation, the heal through kubectl exec, a real rollout.
    expect(out).toContain('config-sync demo, on a real node');
    expect(out).toMatch(/kubelet, syncFrequency 1s/);
    expect(out).toMatch(/rolled out by controller-manager and kubelet: .* InSync/);
  }
  expect(code).toBe(0);
}, 240_000);

// `npm run demo:node-agent`, the README's demo of the node agent: on the real node only.
it.skipIf(nodeUnsupported() !== undefined)(
  'the node agent demo runs every step and ends with exactly one restart',
  async () => {
    const child = spawn(process.execPath, [path.join(root, 'scripts/demo-node-agent.ts')], {
      cwd: root,
      env: { ...process.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    const code = await new Promise<number | null>((resolve) => child.once('close', resolve));
    for (let n = 1; n <= 7; n += 1) expect(out, out).toContain(`[${n}/7]`);
    expect(out).toContain('API watches held by the node agent: 2');
    expect(out).toContain(
      'Exactly 1 restart for 2 Pods that held the same stale file, from one agent on the node. Done.',
    );
    expect(code).toBe(0);
  },
  300_000,
);
