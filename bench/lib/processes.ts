// The processes the bench measures: their memory and CPU from /proc, their readiness and
// metrics, and agents started with the sidecar's environment.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import { createInterface } from 'node:readline';
import type { InClusterLayout } from '../../test/cluster/in-cluster.ts';
import { waitFor } from '../../test/cluster/wait.ts';
import { sidecarEnv } from './settings.ts';
import { fmt, type Resident, type Row } from './table.ts';

/** A process's RSS (VmRSS) and its anonymous part (RssAnon), from one read of /proc/<pid>/status. */
export function processMemory(pid: number): Resident {
  const status = fs.readFileSync(`/proc/${pid}/status`, 'utf8');
  const mib = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1]) / 1024;
  return { total: mib('VmRSS'), anonymous: mib('RssAnon') };
}
/**
 * CPU time of a process in seconds, in nanoseconds' precision: the sum over its threads of the
 * first field of /proc/<pid>/task/<tid>/schedstat (time on a CPU). /proc/<pid>/stat counts in
 * clock ticks (10 ms), and a whole idle minute of the agent is a few ticks, so one tick more or
 * less moved the figure by 0.017 points. A thread that ended takes its time with it; the agent's
 * and bare node's threads live as long as the process.
 */
export function cpuSeconds(pid: number): number {
  let nanos = 0;
  for (const tid of fs.readdirSync(`/proc/${pid}/task`))
    nanos += Number(fs.readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'utf8').split(' ')[0]);
  return nanos / 1e9;
}
/**
 * How long the process's main thread (its JavaScript) has waited for a core, in seconds: the
 * run-queue wait of /proc/<pid>/task/<pid>/schedstat (runnable, not running). On a machine whose
 * cores are busy a latency can be this wait rather than the process's own work.
 */
export function mainThreadWaitSeconds(pid: number): number {
  return Number(fs.readFileSync(`/proc/${pid}/task/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e9;
}
/**
 * A counter of seconds (cpuSeconds and mainThreadWaitSeconds by PID, containerCpuSeconds by
 * container) read now for the agent and its baseline; the function returned gives what each
 * added since, in ms per sample.
 */
export function perSampleMs<K>(
  counter: (key: K) => number,
  keys: { readonly agent: K; readonly raw: K },
): (samples: number) => { agent: number; raw: number } {
  const before = { agent: counter(keys.agent), raw: counter(keys.raw) };
  return (samples) => ({
    agent: ((counter(keys.agent) - before.agent) * 1000) / samples,
    raw: ((counter(keys.raw) - before.raw) * 1000) / samples,
  });
}
/** The passes an agent made (config_sync_duration_seconds_count), from its metrics text. */
export function passesOf(metrics: string): number {
  return Number(/^config_sync_duration_seconds_count\S* (\S+)$/m.exec(metrics)?.[1] ?? Number.NaN);
}

/** A report row: how many passes the agent made per update (each reads and compares every target). */
export function passesRow(what: string, passes: number, updates: number): Row {
  return { what, ours: fmt(passes / updates, 2), baseline: '', relation: '', target: '(report)', ok: true };
}

/**
 * A counter of the agent's /metrics summed by one of its labels, over its other labels: each
 * sample line `name{...label="value"...} n`.
 */
function counterBy(metrics: string, name: string, label: string): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const [, value, n] of metrics.matchAll(
    new RegExp(`^${name}\\{[^}]*\\b${label}="(\\w+)"[^}]*\\} (\\S+)$`, 'gm'),
  ))
    if (value) sums[value] = (sums[value] ?? 0) + Number(n);
  return sums;
}
/** The agent's API requests so far, by verb (`get`, `list`, `watch`, `patch`, ...). */
export const apiRequestsByVerb = (metrics: string) =>
  counterBy(metrics, 'config_sync_api_requests_total', 'verb');
/** The agent's API watch restarts so far, by reason (`closed`, `error`, `gone`, `resync`), all sources. */
export const watchRestartsByReason = (metrics: string) =>
  counterBy(metrics, 'config_sync_api_watch_restarts_total', 'reason');
export async function ready(port: number): Promise<void> {
  await waitFor(
    async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 || undefined;
      } catch {
        return undefined;
      }
    },
    { what: `readiness on ${port}`, timeoutMs: 30_000, intervalMs: 5 },
  );
}

/** An agent process whose JSON log lines are collected as they come. */
export function spawnAgent(
  args: readonly string[],
  env: Record<string, string>,
): { child: ReturnType<typeof spawn>; lines: Record<string, unknown>[] } {
  const child = spawn(process.execPath, [...args], {
    stdio: ['ignore', 'pipe', 'inherit'],
    env: { PATH: process.env.PATH ?? '', ...sidecarEnv, ...env },
  });
  const lines: Record<string, unknown>[] = [];
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (l) => {
    try {
      lines.push(JSON.parse(l) as Record<string, unknown>);
    } catch {
      // not JSON
    }
  });
  return { child, lines };
}

/** The environment of an agent in a Pod whose service-account volume is `layout`. */
export function inPodEnv(
  layout: InClusterLayout,
  home: string,
  namespace: string,
  pod?: string,
): Record<string, string> {
  return {
    HOME: home,
    ...layout.env,
    CONFIG_SYNC_SERVICE_ACCOUNT_DIR: layout.serviceAccountDir,
    POD_NAMESPACE: namespace,
    ...(pod ? { POD_NAME: pod } : {}),
  };
}

export async function metricsOf(url: string): Promise<string> {
  return (await fetch(url, { signal: AbortSignal.timeout(5000) })).text();
}
