// Reload mode: for apps that can re-read their configuration in place. Like configmap-reload,
// config-sync tells the app to reload; unlike it, only once the files on disk match the API
// (never on an intermediate swap, never while kubelet is still propagating), and with a fallback
// when the reload fails or the files never become right.
import fs from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import path from 'node:path';
import pRetry from 'p-retry';
import type { Verdict } from '../verify/verdict.ts';

export type ReloadTrigger =
  | { readonly kind: 'http'; readonly url: string }
  | { readonly kind: 'signal'; readonly signal: NodeJS.Signals; readonly process: string };

/**
 * Pure: reload when every target matches the API and the config the app last loaded (recorded
 * at start, or at the last successful reload) differs from the config on disk now. Anything not
 * in sync waits (Propagating) or is left to the heal planner (Drifted: a reload cannot make the
 * files right, so the fallback restarts or alerts).
 */
export function shouldReload(
  verdicts: readonly Verdict[],
  loadedHash: string | undefined,
  currentHash: string,
): boolean {
  if (loadedHash === undefined) return false;
  return verdicts.length > 0 && verdicts.every((v) => v.state === 'InSync') && currentHash !== loadedHash;
}

/** How long the config (as the API gives it) has looked the same, and how long the one before it did. */
export interface ConfigSteadiness {
  /** When the current config was first seen. */
  readonly since: number;
  /** How long the config before it stood unchanged; undefined for the first one seen. */
  readonly previousStableMs: number | undefined;
}

/**
 * Pure: when to carry out a reload that shouldReload asked for, so that a burst of changes
 * costs at most two reloads and the last one comes after the last change:
 *  (1) a change after a quiet spell (the previous config stood for `settleMs` or more) is
 *      reloaded at once: a single change pays no delay;
 *  (2) a change that follows another within `settleMs` is part of a burst: reload once the
 *      config has stood unchanged for `settleMs`, not before.
 * `settleMs` 0 reloads every change at once.
 */
export function reloadTiming(
  steadiness: ConfigSteadiness,
  now: number,
  settleMs: number,
): { readonly now: true } | { readonly at: number } {
  // (1)
  const afterQuiet = steadiness.previousStableMs === undefined || steadiness.previousStableMs >= settleMs;
  if (afterQuiet) return { now: true };
  // (2)
  const at = steadiness.since + settleMs;
  return now >= at ? { now: true } : { at };
}

/**
 * Whether the app may run an older config than the files hold although nothing changed while
 * the agent watched: its container started before the volume's last `..data` swap (the files
 * changed while the agent was down, or before it started). Then one reload is owed. Undefined
 * when either time is unknown (no container status yet, no `..data`: a subPath file or env).
 */
export function appStartedBeforeSwap(
  appStartedAt: number | undefined,
  lastSwapAt: number | undefined,
): boolean | undefined {
  if (appStartedAt === undefined || lastSwapAt === undefined) return undefined;
  return appStartedAt < lastSwapAt;
}

export class ReloadError extends Error {}

/** Finds the app's process by name in a shared PID namespace: /proc/<pid>/comm, or argv[0]. */
export function findProcess(name: string, proc = '/proc'): number | undefined {
  for (const entry of fs.readdirSync(proc)) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    try {
      const comm = fs.readFileSync(path.join(proc, entry, 'comm'), 'utf8').trim();
      const argv0 = fs.readFileSync(path.join(proc, entry, 'cmdline'), 'utf8').split('\0')[0] ?? '';
      if (comm === name || path.basename(argv0) === name || argv0 === name) return Number(entry);
    } catch {
      // the process ended while we looked
    }
  }
  return undefined;
}

/**
 * Tells the app to reload: an HTTP POST that must answer 2xx (3 attempts, 0.5 s apart, 5 s each),
 * or a signal to the named process. Throws a ReloadError saying why it failed.
 */
/** How long the app may take to answer one reload POST. */
const RELOAD_TIMEOUT_MS = 5000;

/**
 * One empty POST on node:http(s), answered with its status. Not fetch(): the first fetch loads
 * Node's built-in undici (about 13 MiB resident, docs/benchmarks.md) and each call costs more
 * than a plain request, on the path from the swap to the app's reload.
 */
function post(url: string, timeoutMs: number): Promise<number> {
  const target = new URL(url);
  const send = target.protocol === 'https:' ? https.request : http.request;
  return new Promise((resolve, reject) => {
    const request = send(target, { method: 'POST', headers: { 'content-length': '0' } }, (response) => {
      response.resume();
      response.on('end', () => resolve(response.statusCode ?? 0));
      response.on('error', reject);
    });
    request.setTimeout(timeoutMs, () => request.destroy(new Error(`no answer in ${timeoutMs / 1000} s`)));
    request.on('error', reject);
    request.end();
  });
}

export async function triggerReload(trigger: ReloadTrigger, signal?: AbortSignal): Promise<string> {
  if (trigger.kind === 'signal') {
    const pid = findProcess(trigger.process);
    if (pid === undefined) {
      throw new ReloadError(
        `no process named ${trigger.process} (is shareProcessNamespace: true set on the Pod?)`,
      );
    }
    try {
      process.kill(pid, trigger.signal);
    } catch (error) {
      throw new ReloadError(
        `cannot send ${trigger.signal} to ${trigger.process} (pid ${pid}): ${(error as NodeJS.ErrnoException).code}`,
      );
    }
    return `${trigger.signal} sent to ${trigger.process} (pid ${pid})`;
  }
  return pRetry(
    async () => {
      const status = await post(trigger.url, RELOAD_TIMEOUT_MS);
      if (status < 200 || status >= 300) throw new ReloadError(`POST ${trigger.url} answered ${status}`);
      return `POST ${trigger.url} answered ${status}`;
    },
    { retries: 2, minTimeout: 500, factor: 1, ...(signal ? { signal } : {}) },
  ).catch((error: unknown) => {
    throw error instanceof ReloadError
      ? error
      : new ReloadError(`POST ${trigger.url} failed: ${(error as Error).message}`);
  });
}
