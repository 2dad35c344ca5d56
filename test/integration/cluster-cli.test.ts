// `npm run cluster:up` / `cluster:down` as a person uses them: up prints a KUBECONFIG that works,
// down stops the supervisor and every component.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, expect, it } from 'vitest';
import { waitFor } from '../cluster/wait.ts';
import { controlPlane } from './support.ts';

const cli = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../cluster/cli.ts');
const stateDir = fs.mkdtempSync(path.join(os.tmpdir(), 'cluster-cli-'));
// The node is the e2e project's (test/e2e/cleanup.test.ts runs `up` with one): one fits a machine.
const env = { ...process.env, CONFIG_SYNC_CLUSTER_DIR: stateDir, CONFIG_SYNC_NODE: '0' };
const run = (command: string) => execFileSync(process.execPath, [cli, command], { encoding: 'utf8', env });

afterAll(() => {
  run('down');
  fs.rmSync(stateDir, { recursive: true, force: true });
});

it('up prints a working KUBECONFIG, a second up reuses it, down stops everything', async () => {
  const out = run('up');
  const kubeconfig = out.match(/^export KUBECONFIG=(.+)$/m)?.[1];
  expect(kubeconfig).toBeDefined();
  expect(out).toContain(`kubectl: ${controlPlane().kubectl}`);
  const namespace = execFileSync(
    controlPlane().kubectl,
    ['--kubeconfig', kubeconfig ?? '', 'get', 'ns', 'default', '-o', 'name'],
    {
      encoding: 'utf8',
    },
  );
  expect(namespace.trim()).toBe('namespace/default');

  expect(run('up')).toContain('already running');

  const state = JSON.parse(fs.readFileSync(path.join(stateDir, 'state.json'), 'utf8')) as {
    supervisorPid: number;
    info: { pids: Record<string, number> };
  };
  expect(run('down')).toContain('control plane stopped');
  const pids = [state.supervisorPid, ...Object.values(state.info.pids)];
  await waitFor(
    () =>
      pids.every((pid) => {
        try {
          return fs.readFileSync(`/proc/${pid}/stat`, 'utf8').includes(') Z ');
        } catch {
          return true;
        }
      }) || undefined,
    { what: 'supervisor and components to end' },
  );
  expect(run('down')).toContain('no control plane running');
}, 120_000);
