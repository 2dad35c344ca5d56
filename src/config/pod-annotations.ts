// A workload's own say over its Pods, from their annotations (kube/annotations.ts, POD_SETTING,
// set on the Pod template): what is checked and what is done about drift, for that Pod only.
// The sidecar reads its own Pod's, the node agent each served Pod's; they win over the agent's
// flags for that Pod, though not over a --grace or --on-drift an operator gives `check` or
// `heal` on its command line. Pure: the Pod is read at the edge.
//
// A value that cannot be read is never replaced by a default in silence: the Pod is still
// checked (with what could be read) and never restarted, and each problem is told (an
// InvalidAnnotation Event, a doctor line, the plan's reason) until the annotation is fixed. A
// restart is the one thing the agent does that cannot be taken back; a typo in `ignore` or
// `on-drift` must not cause one the workload's owner tried to rule out.
//
// Steps of readPodAnnotations:
//  (1) every config-sync.io/ annotation on the Pod must be one config-sync reads or writes: an
//      unknown one is a problem (a typo of ignore would otherwise ignore nothing);
//  (2) ignore: volume/NAME, configmap/NAME, secret/NAME, separated by commas or spaces;
//  (3) secret-env: restart (the default) or ignore;
//  (4) grace: a duration in --grace's range;
//  (5) on-drift: restart, alert-only or reload; reload takes its trigger from the reload-*
//      annotations, else from the agent's flags; the node agent does not reload (its trigger is
//      one app's: node-config.ts);
//  (6) any problem: alert-only for this Pod, saying why.
import { type IgnoreEntry, SELECT_ALL, type TargetSelection } from '../discover/selection.ts';
import type { ReloadTrigger } from '../heal/reload.ts';
import { ANNOTATION, POD_SETTING, SOURCE_RESTART_ANNOTATION } from '../kube/annotations.ts';
import { isObjectName } from '../kube/names.ts';
import { type AgentConfig, parseReloadTrigger } from './agent-config.ts';
import { checkDuration, formatDuration } from './durations.ts';

/** Which agent reads them: the node agent has no reload mode. */
export type AgentKind = 'sidecar' | 'node';

/** What a Pod's annotations say, before they meet an agent's configuration. */
export interface PodAnnotations {
  readonly selection: TargetSelection;
  readonly graceMs?: number;
  readonly mode?: 'restart' | 'alert-only' | 'reload';
  /** Reload mode's trigger from the annotations; none: the agent's own (--reload-*). */
  readonly trigger?: ReloadTrigger;
  /** What the annotations change, one line each (doctor, `heal --dry-run`, the start-up log). */
  readonly lines: readonly string[];
  /** Values that could not be read: each an InvalidAnnotation Event and a doctor line. */
  readonly problems: readonly string[];
}

export interface PodAnnotationSettings {
  /** The agent's configuration for this Pod: its flags, with the annotations applied. */
  readonly config: AgentConfig;
  readonly selection: TargetSelection;
  readonly lines: readonly string[];
  readonly problems: readonly string[];
}

const PREFIX = 'config-sync.io/';
const READ: ReadonlySet<string> = new Set(Object.values(POD_SETTING));
const WRITTEN: ReadonlySet<string> = new Set(Object.values(ANNOTATION));
const IGNORE_KINDS: Readonly<Record<string, IgnoreEntry['kind']>> = {
  volume: 'volume',
  configmap: 'ConfigMap',
  secret: 'Secret',
};

/** Steps (1) to (5): what the annotations say, each value checked. */
export function parsePodAnnotations(
  annotations: Readonly<Record<string, string>> | undefined,
  agent: AgentKind,
): PodAnnotations {
  const given = annotations ?? {};
  const problems: string[] = [];
  const lines: string[] = [];
  const bad = (name: string, value: string, why: string, fix: string) =>
    problems.push(`${name}="${value}" ${why}; ${fix}`);

  // (1)
  for (const name of Object.keys(given)) {
    if (!name.startsWith(PREFIX) || READ.has(name) || WRITTEN.has(name)) continue;
    const fix =
      name === SOURCE_RESTART_ANNOTATION
        ? 'it belongs on the ConfigMap or Secret, not on the Pod template'
        : `the annotations config-sync reads on a Pod are ${[...READ].join(', ')}`;
    bad(name, given[name] ?? '', 'is not an annotation config-sync reads', fix);
  }

  // (2)
  const ignore: IgnoreEntry[] = [];
  const ignoreText = given[POD_SETTING.ignore];
  for (const word of (ignoreText ?? '').split(/[\s,]+/).filter(Boolean)) {
    const [kindWord = '', name = '', ...rest] = word.split('/');
    const kind = IGNORE_KINDS[kindWord.toLowerCase()];
    if (kind && rest.length === 0 && isObjectName(name)) {
      // Named twice is named once: a second copy would be told as matching nothing.
      if (!ignore.some((e) => e.kind === kind && e.name === name)) ignore.push({ kind, name });
    } else
      bad(
        POD_SETTING.ignore,
        ignoreText ?? '',
        `has "${word}", which is not volume/NAME, configmap/NAME or secret/NAME`,
        'write e.g. "volume/cache, configmap/feature-flags"',
      );
  }

  // (3)
  let secretEnv: TargetSelection['secretEnv'] = SELECT_ALL.secretEnv;
  const secretEnvText = given[POD_SETTING.secretEnv];
  if (secretEnvText === 'restart' || secretEnvText === 'ignore') secretEnv = secretEnvText;
  else if (secretEnvText !== undefined)
    bad(
      POD_SETTING.secretEnv,
      secretEnvText,
      'is not restart or ignore',
      'write restart (the default) or ignore',
    );

  // (4)
  let graceMs: number | undefined;
  const graceText = given[POD_SETTING.grace];
  if (graceText !== undefined) {
    const checked = checkDuration('grace', graceText);
    if ('ms' in checked) {
      graceMs = checked.ms;
      lines.push(`grace ${formatDuration(checked.ms)}, from ${POD_SETTING.grace}`);
    } else if (checked.fault === 'not a duration')
      bad(POD_SETTING.grace, graceText, 'is not a duration', 'write e.g. 30s, 2m or 1m30s');
    else
      bad(
        POD_SETTING.grace,
        graceText,
        'is out of range',
        `write ${formatDuration(checked.range.min)} to ${formatDuration(checked.range.max)}`,
      );
  }

  // (5) A reload-* annotation without on-drift changes only how a sidecar in reload mode reloads.
  const reloadGiven = {
    url: given[POD_SETTING.reloadUrl],
    signal: given[POD_SETTING.reloadSignal],
    process: given[POD_SETTING.reloadProcess],
  };
  const reloadAnnotated = Object.values(reloadGiven).some((v) => v !== undefined);
  const modeText = given[POD_SETTING.onDrift];
  let mode: PodAnnotations['mode'];
  let trigger: ReloadTrigger | undefined;
  if (modeText === 'restart' || modeText === 'alert-only') {
    mode = modeText;
    lines.push(`on-drift ${modeText}, from ${POD_SETTING.onDrift}`);
  } else if (modeText === 'reload' && agent === 'node') {
    bad(
      POD_SETTING.onDrift,
      modeText,
      "is not available to the node agent (a reload's trigger is one app's)",
      'write restart or alert-only, or run the sidecar beside this app for reload mode',
    );
  } else if (modeText !== undefined && modeText !== 'reload') {
    bad(POD_SETTING.onDrift, modeText, 'is not restart, alert-only or reload', 'write one of those');
  }
  if (agent === 'sidecar' && (modeText === 'reload' || (modeText === undefined && reloadAnnotated))) {
    const parsed = parseReloadTrigger(reloadGiven, (part) => `${PREFIX}reload-${part}`);
    if ('trigger' in parsed) trigger = parsed.trigger;
    else if (parsed.why !== '')
      problems.push(`${parsed.why}; write a reload URL, or a signal with the process to send it to`);
    if (modeText === 'reload') {
      mode = 'reload';
      lines.push(
        `on-drift reload, from ${POD_SETTING.onDrift}${trigger ? ', trigger from its reload-* annotations' : ", trigger from the agent's --reload-*"}`,
      );
    } else if (trigger) lines.push(`reload trigger from the ${PREFIX}reload-* annotations (in reload mode)`);
  } else if (reloadAnnotated) {
    lines.push(
      `the ${PREFIX}reload-* annotations are read only in reload mode (${POD_SETTING.onDrift}=reload${agent === 'node' ? ', which the node agent does not have' : ''})`,
    );
  }
  return {
    selection: { ignore, secretEnv },
    ...(graceMs === undefined ? {} : { graceMs }),
    ...(mode ? { mode } : {}),
    ...(trigger ? { trigger } : {}),
    lines,
    problems,
  };
}

/**
 * The annotations less what `check` or `heal` was given on its command line (an operator's
 * `--grace 0s` to see the plan now), each with a line that says so.
 */
function outranked(said: PodAnnotations, commandLine: readonly string[]): PodAnnotations {
  const given = new Set(commandLine);
  let lines = [...said.lines];
  const over = (name: string) => {
    lines = lines.filter((l) => !l.includes(`from ${PREFIX}${name}`));
    lines.push(`${PREFIX}${name} is set, and --${name} on the command line wins over it`);
  };
  let out: PodAnnotations = said;
  if (said.graceMs !== undefined && given.has('grace')) {
    const { graceMs: _, ...rest } = out;
    out = rest;
    over('grace');
  }
  if (said.mode !== undefined && given.has('on-drift')) {
    const { mode: _, trigger: __, ...rest } = out;
    out = rest;
    over('on-drift');
  }
  return { ...out, lines };
}

/** The annotations applied to the agent's configuration for this Pod: steps (5) and (6). */
export function readPodAnnotations(
  base: AgentConfig,
  annotations: Readonly<Record<string, string>> | undefined,
  agent: AgentKind,
): PodAnnotationSettings {
  const said = outranked(parsePodAnnotations(annotations, agent), base.commandLine);
  const problems = [...said.problems];
  const verify = said.graceMs === undefined ? base.verify : { ...base.verify, graceMs: said.graceMs };
  const modeFrom = `${POD_SETTING.onDrift}=${said.mode} on the Pod`;
  let heal = base.heal;
  let reload = base.reload;
  if (said.mode === 'restart' || said.mode === 'alert-only') {
    heal = { ...base.heal, mode: said.mode, modeFrom };
    reload = undefined;
  } else if (said.mode === 'reload') {
    const trigger = said.trigger ?? base.reload?.trigger;
    if (trigger) {
      const { fallback } = base.reloadDefaults;
      heal = {
        ...base.heal,
        mode: fallback,
        modeFrom: `--reload-fallback ${fallback}, in reload mode from ${modeFrom}`,
      };
      reload = { trigger, settleMs: base.reloadDefaults.settleMs };
    } else
      problems.push(
        `${POD_SETTING.onDrift}="reload" has no way to tell the app; set ${POD_SETTING.reloadUrl}, or ${POD_SETTING.reloadSignal} with ${POD_SETTING.reloadProcess}`,
      );
  } else if (said.trigger && base.reload) {
    reload = { ...base.reload, trigger: said.trigger };
  }
  // (6)
  if (problems.length > 0) {
    heal = {
      ...base.heal,
      mode: 'alert-only',
      modeFrom: `this Pod's config-sync annotations cannot be read (${problems.join('; ')}), and a Pod whose annotations are wrong is never restarted`,
    };
    reload = undefined;
  }
  return {
    config: { ...base, verify, heal, reload },
    selection: said.selection,
    lines: said.lines,
    problems,
  };
}
