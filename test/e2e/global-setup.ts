// vitest globalSetup of the e2e project: everything a real node needs that is built once per
// run (the Debian packages, the binaries, the images from this checkout). Each e2e file starts
// its own control plane and node from these (test/e2e/support.ts: useNode), one file at a time:
// one node fits a machine, and a file of its own is how the cleanup test sees a whole lifecycle.
// Where the machine cannot run a node (not root, not Linux), nothing is built: the tests skip
// with that reason, which .ci/run counts in its summary.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { TestProject } from 'vitest/node';
import {
  buildNodeImages,
  type ControlPlaneAssets,
  ensureNodePackages,
  resolveAssets,
  resolveNodeAssets,
} from '../cluster/assets.ts';
import { type NodeAssets, nodeUnsupported } from '../cluster/node.ts';

export interface E2eAssets {
  readonly assets: ControlPlaneAssets;
  readonly nodeAssets: NodeAssets;
  readonly imagesDir: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    e2e: E2eAssets | { unsupported: string };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const log = (line: string) => process.stderr.write(`[e2e] ${line}\n`);
  const unsupported = nodeUnsupported();
  if (unsupported) {
    log(`skipping the real-node tests: ${unsupported}`);
    project.provide('e2e', { unsupported });
    return async () => {};
  }
  let t = Date.now();
  ensureNodePackages();
  const assets = resolveAssets();
  const nodeAssets = resolveNodeAssets();
  log(`packages and binaries ready in ${Date.now() - t} ms`);
  t = Date.now();
  const imagesDir = buildNodeImages(fs.mkdtempSync(path.join(os.tmpdir(), 'config-sync-e2e-images-')));
  log(`images built in ${Date.now() - t} ms`);
  project.provide('e2e', { assets, nodeAssets, imagesDir });
  return async () => {
    fs.rmSync(imagesDir, { recursive: true, force: true });
  };
}
