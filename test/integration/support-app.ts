// The test/cluster/app.ts helpers bound to this test run's control plane, and the CLI runner that
// checks every output for the Secret value.
import type { KubeConfig, V1Deployment } from '@kubernetes/client-node';
import { expect } from 'vitest';
import * as app from '../cluster/app.ts';
import { controlPlane } from './support.ts';

export {
  AgentProcess,
  type AppPod,
  bin,
  type CliRun,
  type LogLine,
  root,
  SECRET_VALUE,
  sample,
  templateAnnotations,
  updateConfig,
  webDeployment,
  writeMount,
} from '../cluster/app.ts';

export const applyRbac = (namespace: string) => app.applyRbac(controlPlane(), namespace);

export const createApp = (
  admin: KubeConfig,
  namespace: string,
  replicas: number,
  deployment?: V1Deployment,
) => app.createApp(controlPlane(), admin, namespace, replicas, deployment);

export const prepareAgentPod = (
  admin: KubeConfig,
  namespace: string,
  name: string,
  data: Record<string, string>,
) => app.prepareAgentPod(controlPlane(), admin, namespace, name, data);

/** Runs the built CLI as a separate process; asserts the Secret value is in none of its output. */
export async function cli(args: string[], env: Record<string, string>): Promise<app.CliRun> {
  const run = await app.runCli(args, env);
  expect(`${run.stdout}${run.stderr}`).not.toContain(app.SECRET_VALUE);
  return run;
}
