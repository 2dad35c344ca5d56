// The agent's configuration, made once at the edge. Flags, environment and the config file
// (settings.ts resolves each, with its origin) become one typed, validated AgentConfig for the
// agent and the one-shot commands that act like it (check, heal). Every default is stated once,
// in the setting definitions (agent-settings.ts); every value is checked here, and an error names the value
// where the user gave it. Nothing after this reads a setting by name.
//
// Steps of agentConfig:
//  (1) durations, each against its range (durations.ts);
//  (2) what to do about drift: --on-drift, the reload trigger and its fallback -> heal and reload;
//  (3) the mount root must be a directory;
//  (4) explicit --watch targets must name a path; the Pod name must be a name;
//  (5) settings that work but may not mean what was intended become warnings.
import fs from 'node:fs';
import { constants as osConstants } from 'node:os';
import { parseWatchSpec, type WatchSpec } from '../discover/watch-spec.ts';
import { ConfigSyncError } from '../errors.ts';
import type { HealMode, HealPolicy } from '../heal/planner.ts';
import { type PolicyConfig, parseRestartWindow } from '../heal/policy.ts';
import type { ReloadTrigger } from '../heal/reload.ts';
import { isObjectName } from '../kube/names.ts';
import type { Sourced } from '../kube/scope.ts';
import type { ScopeFlags } from '../kube/scope-facts.ts';
import { parseListen } from '../metrics/server.ts';
import type { VerifyWindows } from '../verify/verdict.ts';
import { durationSetting } from './durations.ts';
import { defaulted, type Settings, scopeFlags } from './settings.ts';

/** Which Pod is the agent's own, and which of its containers to serve (agent, check, heal, doctor). */
export interface PodSelection {
  /** Its own Pod, with where the name came from; none outside a Pod (explicit --watch only). */
  readonly name: Sourced<string> | undefined;
  /** The agent's own container, never a target. */
  readonly selfContainer: string;
  /** Only these app containers; empty: all but the agent's. */
  readonly containers: readonly string[];
}

/** Tells the app to reload, and how long a config must stand before a reload that follows another. */
export interface ReloadConfig {
  readonly trigger: ReloadTrigger;
  readonly settleMs: number;
}

export interface AgentConfig {
  /** The command it was made for (agent, check, heal): errors name it. */
  readonly command: string;
  readonly scope: ScopeFlags;
  readonly requestTimeoutMs: number;
  readonly pod: PodSelection;
  /** Explicit targets (--watch PATH=kind/NAME), which need no Pod. */
  readonly watch: readonly (WatchSpec & { readonly path: string })[];
  /** Where the app's mount paths are in the agent's filesystem. */
  readonly mountRoot: string;
  /** The agent's own emptyDir, which holds the Pod's fingerprint key. */
  readonly stateDir: string;
  /** The windows of the verdict (verify/verdict.ts): kubelet's propagation, and the debounce. */
  readonly verify: VerifyWindows;
  readonly heal: HealPolicy;
  /** The policy gate before a restart (heal/policy.ts). */
  readonly policy: PolicyConfig;
  /** Reload mode; undefined in restart and alert-only mode. */
  readonly reload: ReloadConfig | undefined;
  /** --reload-fallback and --reload-settle, for a Pod whose annotation asks for reload mode. */
  readonly reloadDefaults: { readonly fallback: HealMode; readonly settleMs: number };
  /** Settings that work but may not mean what was intended: the agent logs them, check and heal print them. */
  readonly warnings: readonly string[];
  /**
   * The settings a Pod's annotations may replace (grace, on-drift) that `check` or `heal` was given on its command
   * line: an operator's `heal --dry-run --grace 0s` means that grace, whatever the Pod says. The
   * long-running agent has none: there the workload's annotation wins over its flags.
   */
  readonly commandLine: readonly string[];
}

/** The settings a Pod's annotations may replace (config/pod-annotations.ts). */
const ANNOTATED_SETTINGS = ['grace', 'on-drift'];

/** The long-running agent's loop, endpoints and log level. */
export interface LoopConfig {
  readonly listen: string;
  readonly logLevel: 'debug' | 'info' | 'warn' | 'error';
  readonly resyncMs: number;
  readonly pollMs: number;
  readonly heartbeatMs: number;
}

export function podSelection(settings: Settings): PodSelection {
  return {
    name: settings.string('pod'),
    // The node agent has no container of its own in the Pods it serves, nor this setting.
    selfContainer: settings.string('self-container')?.value ?? '',
    containers: settings.list('container'),
  };
}

export function agentConfig(command: string, settings: Settings): AgentConfig {
  // (1)
  const duration = (name: string) => durationSetting(command, settings, name);
  const requestTimeoutMs = duration('request-timeout');
  const verify = { graceMs: duration('grace'), debounceMs: duration('debounce') };
  const minRestartIntervalMs = duration('min-restart-interval');
  const settleMs = duration('reload-settle');

  // (2)
  const usage = (what: string, hint: string) =>
    new ConfigSyncError('CS_USAGE_BAD_FLAG', `${command}: ${what}`, { hint });
  const onDrift = defaulted(settings, 'on-drift').value;
  if (onDrift !== 'restart' && onDrift !== 'alert-only' && onDrift !== 'reload') {
    throw usage(
      `--on-drift ${onDrift} is not restart, alert-only or reload`,
      'use --on-drift restart (default), alert-only or reload',
    );
  }
  const reload = onDrift === 'reload' ? { trigger: reloadTrigger(settings, usage), settleMs } : undefined;
  const fallback = defaulted(settings, 'reload-fallback').value;
  if (fallback !== 'restart' && fallback !== 'alert-only') {
    throw usage(
      `--reload-fallback ${fallback} is not restart or alert-only`,
      'use --reload-fallback restart (default) or alert-only',
    );
  }
  const heal: HealPolicy =
    onDrift === 'reload'
      ? { mode: fallback, minRestartIntervalMs, modeFrom: `--reload-fallback ${fallback}, in reload mode` }
      : { mode: onDrift, minRestartIntervalMs };

  // (3) The node agent has no mount root: it reads kubelet's directories (node-config.ts).
  const mountRoot = settings.string('mount-root') ?? { value: '/', source: 'default' };
  if (!isDirectory(mountRoot.value)) {
    throw new ConfigSyncError(
      'CS_CONFIG_MOUNT_ROOT',
      `${command}: the mount root ${mountRoot.value} (from ${mountRoot.source}) is not a directory`,
      {
        hint: "--mount-root is where the app's mount paths are in the agent's filesystem: / in the sidecar, the directory that holds etc/... elsewhere",
        details: { path: mountRoot.value },
      },
    );
  }

  // (4)
  const watch = settings.list('watch').map((raw) => {
    const spec = parseWatchSpec(raw);
    if (!spec.path) {
      throw new ConfigSyncError('CS_USAGE_BAD_WATCH', `--watch ${raw}: ${command} needs the mount path too`, {
        hint: 'write PATH=configmap/NAME, e.g. --watch /etc/app=configmap/app-config',
      });
    }
    return { ...spec, path: spec.path };
  });
  const pod = podSelection(settings);
  if (pod.name && !isObjectName(pod.name.value)) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_NAME',
      `${command}: Pod name "${pod.name.value}" from ${pod.name.source} is not a Pod name`,
      {
        hint: 'in a pod, set POD_NAME from the downward API (fieldRef: metadata.name); elsewhere pass the name --pod as kubectl get pods shows it',
        details: { name: pod.name.value, source: pod.name.source },
      },
    );
  }

  // (4b) The policy gate.
  const policy = policyConfig(command, settings);

  // (5) A grace shorter than the debounce turns the two windows around. --grace 0s is the one
  // exception: it says "do not wait for kubelet at all", which `heal --dry-run --grace 0s` uses
  // on purpose to see the plan now.
  const warnings: string[] = [];
  if (verify.graceMs > 0 && verify.graceMs < verify.debounceMs) {
    warnings.push(
      `--grace ${defaulted(settings, 'grace').value} is shorter than --debounce ${defaulted(settings, 'debounce').value}: a volume kubelet updates counts as drifted sooner than a subPath file, env var or immutable source, which kubelet never updates`,
    );
  }

  return {
    command,
    scope: scopeFlags(settings),
    requestTimeoutMs,
    pod,
    watch,
    mountRoot: mountRoot.value,
    stateDir: defaulted(settings, 'state-dir').value,
    verify,
    heal,
    policy,
    reload,
    reloadDefaults: { fallback, settleMs },
    warnings,
    commandLine:
      command === 'check' || command === 'heal'
        ? ANNOTATED_SETTINGS.filter((name) => settings.string(name)?.source === `--${name}`)
        : [],
  };
}

/** --policy-url, --policy-failure, --restart-window, --only-when-settled -> the policy gate's configuration. */
function policyConfig(command: string, settings: Settings): PolicyConfig {
  const url = settings.string('policy-url');
  if (url && !/^https?:\/\/[^/]+\/v1\/data\/\S*$/.test(url.value)) {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_FLAG',
      `${command}: --policy-url ${url.value} (from ${url.source}) is not an OPA Data API URL`,
      {
        hint: 'write http(s)://HOST:PORT/v1/data/<package path>, e.g. http://127.0.0.1:8181/v1/data/configsync/restart',
      },
    );
  }
  const failure = defaulted(settings, 'policy-failure');
  if (failure.value !== 'closed' && failure.value !== 'open') {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_FLAG',
      `${command}: --policy-failure ${failure.value} (from ${failure.source}) is not closed or open`,
      { hint: 'use --policy-failure closed (default: no restart when the policy cannot decide) or open' },
    );
  }
  const window = settings.string('restart-window');
  return {
    restartWindow: window ? parseRestartWindow(window.value) : undefined,
    onlyWhenSettled: settings.boolean('only-when-settled'),
    opa: url ? { url: url.value, failure: failure.value } : undefined,
  };
}

export function loopConfig(settings: Settings): LoopConfig {
  const logLevel = defaulted(settings, 'log-level').value;
  if (logLevel !== 'debug' && logLevel !== 'info' && logLevel !== 'warn' && logLevel !== 'error') {
    throw new ConfigSyncError(
      'CS_USAGE_BAD_FLAG',
      `agent: --log-level ${logLevel} is not debug, info, warn or error`,
      { hint: 'use --log-level info (default)' },
    );
  }
  const listen = defaulted(settings, 'listen').value;
  parseListen(listen);
  const duration = (name: string) => durationSetting('agent', settings, name);
  return {
    listen,
    logLevel,
    resyncMs: duration('resync'),
    pollMs: duration('poll'),
    heartbeatMs: duration('heartbeat'),
  };
}

/** --reload-url, or --reload-signal with --reload-process: exactly one way to tell the app. */
function reloadTrigger(
  settings: Settings,
  usage: (what: string, hint: string) => ConfigSyncError,
): ReloadTrigger {
  const parsed = parseReloadTrigger(
    {
      url: settings.string('reload-url')?.value,
      signal: settings.string('reload-signal')?.value,
      process: settings.string('reload-process')?.value,
    },
    (name) => `--reload-${name}`,
  );
  if ('why' in parsed)
    throw usage(
      parsed.why || '--on-drift reload needs a way to tell the app',
      'pass --reload-url http://127.0.0.1:PORT/PATH, or --reload-signal SIGHUP with --reload-process NAME',
    );
  return parsed.trigger;
}

/**
 * A URL, or a signal with the process to send it to: exactly one way to tell the app, from the
 * flags or a Pod's annotations (pod-annotations.ts). `name` says how each part is written where
 * it was given. `why` is empty when none is given at all.
 */
export function parseReloadTrigger(
  given: {
    readonly url?: string | undefined;
    readonly signal?: string | undefined;
    readonly process?: string | undefined;
  },
  name: (part: 'url' | 'signal' | 'process') => string,
): { trigger: ReloadTrigger } | { why: string } {
  const { url, signal, process: proc } = given;
  if (url && signal) return { why: `${name('url')} and ${name('signal')} are both set` };
  if (url) {
    if (!/^https?:\/\//.test(url)) return { why: `${name('url')} ${url} is not an http(s) URL` };
    return { trigger: { kind: 'http', url } };
  }
  if (signal) {
    if (!/^SIG[A-Z0-9]+$/.test(signal) || !(signal in osConstants.signals))
      return { why: `${name('signal')} ${signal} is not a signal` };
    if (!proc) return { why: `${name('signal')} needs ${name('process')}` };
    return { trigger: { kind: 'signal', signal: signal as NodeJS.Signals, process: proc } };
  }
  return { why: '' };
}

function isDirectory(dir: string): boolean {
  try {
    return fs.statSync(dir).isDirectory();
  } catch {
    return false;
  }
}
