// The binary cache of test/cluster/build.sh must be keyed by what is built (the wrapper's go.mod
// and go.sum), not by where the checkout is: CI clones afresh into a new folder every run.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, expect, it } from 'vitest';

const clusterDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../cluster');
const temps: string[] = [];
afterEach(() => {
  for (const t of temps.splice(0)) fs.rmSync(t, { recursive: true, force: true });
});

/** A copy of build.sh and the wrapper module in a folder of its own. */
function checkout(): string {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'checkout-'));
  temps.push(root);
  fs.mkdirSync(path.join(root, 'go'));
  fs.copyFileSync(path.join(clusterDir, 'build.sh'), path.join(root, 'build.sh'));
  for (const f of ['go.mod', 'go.sum'])
    fs.copyFileSync(path.join(clusterDir, 'go', f), path.join(root, 'go', f));
  return root;
}

const cacheDir = (root: string) =>
  execFileSync('bash', [path.join(root, 'build.sh'), '--print-cache-dir'], {
    encoding: 'utf8',
    env: { ...process.env, CONFIG_SYNC_CACHE: '/cache' },
  }).trim();

it('gives two checkouts in different folders the same cache directory', () => {
  const a = cacheDir(checkout());
  expect(a).toMatch(/^\/cache\/kube\/v1\.36\.3-[0-9a-f]{12}$/);
  expect(cacheDir(checkout())).toBe(a);
});

it('changes the cache directory when the dependency set changes', () => {
  const root = checkout();
  const before = cacheDir(root);
  fs.appendFileSync(path.join(root, 'go', 'go.sum'), 'example.com/changed v1.0.0 h1:x=\n');
  expect(cacheDir(root)).not.toBe(before);
});
