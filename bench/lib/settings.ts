// The bench's settings: what the environment asks for (BENCH_*), the environment the image gives
// the agent, and the run's working directory.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SIDECAR_NODE_OPTIONS } from '../../src/inject/sidecar.ts';

/**
 * The environment the image gives the agent: its Dockerfile's ENV lines (NODE_OPTIONS, the
 * malloc settings), but PATH. The bench runs the agent, and every bare `node` it is compared
 * with, under it, as the image runs them.
 */
function imageEnv(): Record<string, string> {
  const dockerfile = fs.readFileSync(path.join(import.meta.dirname, '../../deploy/image/Dockerfile'), 'utf8');
  const env: Record<string, string> = {};
  for (const [, name, value] of dockerfile.matchAll(/^ENV ([A-Za-z_][A-Za-z0-9_]*)=(\S+)$/gm))
    if (name && value !== undefined && name !== 'PATH') env[name] = value;
  if (env.NODE_OPTIONS !== SIDECAR_NODE_OPTIONS)
    throw new Error(
      `deploy/image/Dockerfile sets NODE_OPTIONS=${env.NODE_OPTIONS ?? '(none)'}, the injected sidecar ${SIDECAR_NODE_OPTIONS} (src/inject/sidecar.ts): make them agree`,
    );
  return env;
}

/**
 * The sidecar's runtime environment, given to the agent and to every bare `node` baseline alike:
 * the image's (above), and BENCH_SIDECAR_ENV (a JSON object of environment variables, its
 * NODE_OPTIONS appended to the image's) to measure a candidate setting of the image, e.g.
 * BENCH_SIDECAR_ENV='{"MALLOC_ARENA_MAX":"2","NODE_OPTIONS":"--v8-pool-size=1"}'. Not on the
 * real node, whose rows run the image as shipped.
 */
export const sidecarEnv: Record<string, string> = (() => {
  const image = imageEnv();
  const raw = process.env.BENCH_SIDECAR_ENV;
  let extra: Record<string, string> = {};
  if (raw) {
    try {
      extra = JSON.parse(raw) as Record<string, string>;
    } catch (error) {
      throw new Error(
        `BENCH_SIDECAR_ENV is not JSON (${(error as Error).message}); give an object, e.g. '{"MALLOC_ARENA_MAX":"2"}'`,
      );
    }
    if (
      typeof extra !== 'object' ||
      extra === null ||
      Array.isArray(extra) ||
      Object.values(extra).some((v) => typeof v !== 'string')
    )
      throw new Error(
        'BENCH_SIDECAR_ENV must be a JSON object of strings, e.g. \'{"MALLOC_ARENA_MAX":"2"}\'',
      );
  }
  const { NODE_OPTIONS: more, ...rest } = extra;
  return {
    ...image,
    ...rest,
    NODE_OPTIONS: more ? `${image.NODE_OPTIONS} ${more}` : (image.NODE_OPTIONS as string),
  };
})();
/** A whole number from the environment, or its default; anything else is an error naming it. */
function wholeNumberFromEnv(name: string, fallback: number, min: number, max: number): number {
  const given = process.env[name];
  const value = Number(given ?? fallback);
  if (!Number.isInteger(value) || value < min || value > max)
    throw new Error(`${name}=${given}: give a whole number from ${min} to ${max}`);
  return value;
}
export const idleSeconds = wholeNumberFromEnv('BENCH_IDLE_SECONDS', 60, 1, 3600);
/**
 * How long the real node's busy agent compares every second (BENCH_COMPARE_SECONDS, the idle
 * window unless set): 1500 is about a day of compares at the default `--resync 1m`.
 */
export const compareSeconds = wholeNumberFromEnv('BENCH_COMPARE_SECONDS', idleSeconds, 1, 7200);
/** The port of the app container in the real node's reload rows (bench/reload-app.mjs). */
export const APP_PORT = 8080;
/**
 * Samples of the reload and restart rows (BENCH_LATENCY_SAMPLES). With 100, p99 was the second
 * slowest sample, and the same build measured from -0.0 to +4.1 ms over the raw baseline in runs
 * in a row on this 2-core machine; with 300, three samples lie above it.
 */
export const latencySamples = wholeNumberFromEnv('BENCH_LATENCY_SAMPLES', 300, 1, 100_000);
/**
 * Changes of the restart row made after a quiet spell of QUIET_SECONDS each
 * (BENCH_QUIET_SAMPLES, default 3): longer than kube-apiserver's 90 s idle close of an HTTP/1.1
 * connection.
 */
export const quietSamples = wholeNumberFromEnv('BENCH_QUIET_SAMPLES', 3, 0, 100);
export const QUIET_SECONDS = 100;
/**
 * Keys of the reload row's ConfigMap (BENCH_RELOAD_KEYS): without the payload hashed ahead the
 * agent read every file before it told the app, so its figure grew with the keys.
 */
export const reloadKeys = wholeNumberFromEnv('BENCH_RELOAD_KEYS', 100, 1, 100);
/**
 * BENCH_CPU_PROF=<dir>: the agent of both reload rows runs under node's --cpu-prof (on the real
 * node, into an emptyDir of its Pod); after each variant's updates it is stopped (SIGTERM, so
 * the profile is written) and the profile is copied to <dir>, with a summary of the samples
 * taken during the updates alone (agentProfile, bench/cpu-profile.ts). The profiler's own cost
 * is in that run's CPU rows, so they are not figures to quote.
 */
export const cpuProfDir = process.env.BENCH_CPU_PROF ? path.resolve(process.env.BENCH_CPU_PROF) : undefined;
/** node's options that make a process write its CPU profile, at exit, into the directory after them. */
export const CPU_PROF_OPTIONS = '--cpu-prof --cpu-prof-dir=';
/** BENCH_ONLY=reload,restart runs only those measures (hash, idle, file, api, reload, restart, node). */
export const only = (measure: string) =>
  !process.env.BENCH_ONLY || process.env.BENCH_ONLY.split(',').includes(measure);
export const work = fs.mkdtempSync(path.join(os.tmpdir(), 'config-sync-bench-'));
