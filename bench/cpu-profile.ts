// Where a node process spent its CPU in a window of time, from the profile node's --cpu-prof
// writes at exit: for the bench's BENCH_CPU_PROF, which profiles the agent in a real Pod.
//
// The profile holds a call tree (nodes, each a function at a position of a script, with its
// children) and a list of samples: for each, the node that was on top of the stack, and the
// microseconds since the sample before (timeDeltas). The samples' clock is V8's monotonic clock
// (CLOCK_MONOTONIC on Linux), the same as process.hrtime's in any process of the machine, so a
// window measured by the bench selects the samples taken in it.
//
// Two views of the window's samples, each sample counted for the time until the next one:
//  (1) self time by function: the function on top of the stack;
//  (2) by product function: the nearest caller on the stack that is config-sync's own source
//      (mapped through the bundle's source maps), so the time a library or node itself spends on
//      the agent's behalf is charged to the agent's function that asked for it. Samples with no
//      such caller are grouped by what they are ((garbage collector), (program), a library).
// Idle samples ((idle)) are counted apart: they are the thread waiting, not working.
import fs from 'node:fs';
import { SourceMap } from 'node:module';
import path from 'node:path';

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
  readonly columnNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[];
}

export interface CpuProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples: readonly number[];
  readonly timeDeltas: readonly number[];
}

/** Where a frame is in the source: `bundleDir` holds the bundle's scripts and their .map files. */
function sourceLocator(bundleDir: string, scriptRoot: string) {
  const maps = new Map<string, SourceMap | undefined>();
  return (frame: CallFrame): { where: string; ours: boolean } => {
    const url = frame.url.replace(/^file:\/\//, '');
    if (!url.startsWith(scriptRoot)) {
      const where = url ? `${url}:${frame.lineNumber + 1}` : '';
      return { where: `${frame.functionName || '(anonymous)'}${where ? ` ${where}` : ''}`, ours: false };
    }
    const script = url.slice(scriptRoot.length);
    if (!maps.has(script)) {
      const file = path.join(bundleDir, `${script}.map`);
      maps.set(
        script,
        fs.existsSync(file) ? new SourceMap(JSON.parse(fs.readFileSync(file, 'utf8'))) : undefined,
      );
    }
    const entry = maps.get(script)?.findEntry(frame.lineNumber, frame.columnNumber);
    if (!entry || !('originalSource' in entry))
      return {
        where: `${frame.functionName || '(anonymous)'} ${script}:${frame.lineNumber + 1}`,
        ours: false,
      };
    const source = entry.originalSource.replace(/^.*?\/(src|node_modules)\//, '$1/');
    const name = (entry as { name?: string }).name || frame.functionName || '(anonymous)';
    return { where: `${name} ${source}:${entry.originalLine + 1}`, ours: source.startsWith('src/') };
  };
}

export interface ProfileSummary {
  /** Milliseconds of samples in the window that were not idle. */
  readonly busyMs: number;
  readonly idleMs: number;
  /** (1) and (2), largest first, in milliseconds. */
  readonly selfByFunction: readonly (readonly [string, number])[];
  readonly byProductFunction: readonly (readonly [string, number])[];
}

/**
 * The window [fromUs, toUs] of `profile` (microseconds of the monotonic clock), with frames of
 * scripts under `scriptRoot` (the bundle's directory as the process saw it, e.g. /app/) mapped
 * through the .map files in `bundleDir`.
 */
export function summarizeProfile(
  profile: CpuProfile,
  fromUs: number,
  toUs: number,
  scriptRoot: string,
  bundleDir: string,
): ProfileSummary {
  const locate = sourceLocator(bundleDir, scriptRoot);
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parentOf = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parentOf.set(c, n.id);
  const located = new Map<number, { where: string; ours: boolean }>();
  const at = (id: number) => {
    let l = located.get(id);
    if (!l) {
      l = locate((byId.get(id) as ProfileNode).callFrame);
      located.set(id, l);
    }
    return l;
  };
  // (2) The nearest frame of our own source from `id` up, or what the top frame is.
  const productOf = (id: number): string => {
    for (let n: number | undefined = id; n !== undefined; n = parentOf.get(n)) {
      const l = at(n);
      if (l.ours) return l.where;
    }
    const top = at(id).where;
    const library = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(top)?.[1];
    return library ? `(library ${library}, no caller of ours)` : top.replace(/ node:.*$/, ' (node)');
  };
  const self = new Map<string, number>();
  const product = new Map<string, number>();
  let busyUs = 0;
  let idleUs = 0;
  let t = profile.startTime;
  for (let i = 0; i < profile.samples.length; i += 1) {
    t += profile.timeDeltas[i] ?? 0;
    if (t < fromUs || t > toUs) continue;
    const us = profile.timeDeltas[i + 1] ?? 0;
    const id = profile.samples[i] as number;
    const top = at(id).where;
    if (top.startsWith('(idle)')) {
      idleUs += us;
      continue;
    }
    busyUs += us;
    self.set(top, (self.get(top) ?? 0) + us);
    const p = productOf(id);
    product.set(p, (product.get(p) ?? 0) + us);
  }
  const ms = (m: Map<string, number>) =>
    [...m].map(([k, us]) => [k, us / 1000] as const).sort((a, b) => b[1] - a[1]);
  return {
    busyMs: busyUs / 1000,
    idleMs: idleUs / 1000,
    selfByFunction: ms(self),
    byProductFunction: ms(product),
  };
}

/** The summary as text: the `top` largest of each view, with their share of the busy time. */
export function formatProfileSummary(s: ProfileSummary, perUpdate: number, top = 25): string {
  const line = ([what, ms]: readonly [string, number]) =>
    `  ${(ms / perUpdate).toFixed(3).padStart(8)} ms/update ${((100 * ms) / s.busyMs).toFixed(1).padStart(5)} %  ${what}`;
  return [
    `busy ${(s.busyMs / perUpdate).toFixed(2)} ms per update (${s.busyMs.toFixed(0)} ms over ${perUpdate}), idle ${s.idleMs.toFixed(0)} ms`,
    'by product function (nearest caller of our own source):',
    ...s.byProductFunction.slice(0, top).map(line),
    'self time by function:',
    ...s.selfByFunction.slice(0, top).map(line),
  ].join('\n');
}
