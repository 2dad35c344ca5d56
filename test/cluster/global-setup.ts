// vitest globalSetup of the integration project: one control plane per test run, shared by every
// test file (each file works in a namespace of its own), stopped when the run ends.
import type { TestProject } from 'vitest/node';
import { resolveAssets } from './assets.ts';
import { ControlPlane, type ControlPlaneInfo } from './control-plane.ts';

declare module 'vitest' {
  export interface ProvidedContext {
    controlPlane: ControlPlaneInfo;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const t0 = Date.now();
  const assets = resolveAssets();
  const log = (line: string) => process.stderr.write(`[cluster] ${line}\n`);
  log(`binaries ready in ${Date.now() - t0} ms`);
  const plane = await ControlPlane.start({
    assets,
    keepData: process.env.CONFIG_SYNC_KEEP_CLUSTER === '1',
    log,
  });
  project.provide('controlPlane', plane.info);
  return async () => {
    await plane.stop();
    log('stopped');
  };
}
