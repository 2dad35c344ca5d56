// A control plane that cannot start says which component failed and shows the tail of its log,
// without needing the real binaries.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';
import { ControlPlane } from '../cluster/control-plane.ts';

const failing = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../fixtures/fails-at-once.sh');
let base: string | undefined;
afterEach(() => {
  if (base) fs.rmSync(base, { recursive: true, force: true });
});

it('names the component that failed and prints the tail of its log', async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'cp-fail-'));
  const start = ControlPlane.start({
    baseDir: base,
    assets: { etcd: failing, kubeApiserver: failing, kubeControllerManager: failing, kubectl: failing },
  });
  await expect(start).rejects.toThrow(/gave up waiting for etcd \/health: etcd exited \(code 1/);
  await expect(start).rejects.toThrow(
    /--- etcd \(.*etcd\.log\) ---\nlisten tcp 127\.0\.0\.1:2379: bind: address already in use/,
  );
});
