// `config-sync inject`: adds the sidecar to the Pods of the workloads config-sync restarts
// (kube/resources.ts, WORKLOADS), bare Pods and Lists of them, in a stream of YAML documents.
// Pure: text in, text out.
//
// Steps:
//  (1) split the stream at top-level `---` lines, as kubectl does, keeping each document's exact
//      text; parse each (a YAML error is reported with its document and line, nothing written);
//  (2) find the Pod specs: the pod template's spec of a workload (where the table says its
//      template is), spec of a Pod, the same in each item of a List. Other workload kinds (Job,
//      CronJob, ReplicaSet) are left alone with a note: config-sync cannot restart them;
//  (3) refuse what cannot work: a Pod spec that runs as another ServiceAccount, that turns the
//      token off, or that has an app container named config-sync; (3b) a config-sync.io/
//      annotation on the template the agent cannot read is a note (the template's annotations
//      are never changed);
//  (4) compute the sidecar; if the Pod already has it exactly, change nothing (idempotent);
//      else add or replace it among the init containers, set the ServiceAccount and add the
//      sidecar's state emptyDir;
//  (5) re-serialize only the documents that changed: every other document keeps its bytes.
import type { V1PodSpec } from '@kubernetes/client-node';
import { type Document, isMap, isSeq, parseDocument } from 'yaml';
import { parsePodAnnotations } from '../config/pod-annotations.ts';
import { ConfigSyncError, type ErrorCode } from '../errors.ts';
import { RESTARTABLE_KINDS, workloadType } from '../kube/resources.ts';
import { checkImageReference } from './image-ref.ts';
import { isObject, podShapeProblem } from './pod-shape.ts';
import {
  configMounts,
  SIDECAR_NAME,
  type SidecarOptions,
  STATE_VOLUME,
  sidecarContainer,
} from './sidecar.ts';

export interface InjectResult {
  readonly output: string;
  /** Pod specs the sidecar was added to or updated in. */
  readonly injected: readonly string[];
  /** Things left alone, and why, for stderr. */
  readonly notes: readonly string[];
}

const NOT_RESTARTABLE = new Set(['Job', 'CronJob', 'ReplicaSet', 'ReplicationController']);

function injectError(code: ErrorCode, message: string, hint: string, origin: string): ConfigSyncError {
  return new ConfigSyncError(code, `${origin}: ${message}`, { hint, details: { origin } });
}

// (1)
function splitDocuments(source: string): string[] {
  const parts: string[] = [];
  let current = '';
  for (const line of source.split(/(?<=\n)/)) {
    if (/^---(\s|$)/.test(line) && current.trim() !== '') {
      parts.push(current);
      current = '';
    }
    current += line;
  }
  if (current !== '') parts.push(current);
  return parts;
}

type Path = (string | number)[];

interface PodSpecRef {
  readonly path: Path;
  readonly what: string;
}

// (2)
function podSpecs(obj: Record<string, unknown>, base: Path, notes: string[], origin: string): PodSpecRef[] {
  const kind = String(obj.kind ?? '');
  const meta = obj.metadata;
  const name = isObject(meta) && typeof meta.name === 'string' ? meta.name : '?';
  if (kind === 'List') {
    const items = obj.items ?? [];
    if (!Array.isArray(items)) {
      throw injectError(
        'CS_INJECT_BAD_LIST',
        `List ${name}: items is not a list`,
        'write items: as a YAML list of objects',
        origin,
      );
    }
    return items.flatMap((item: unknown, i) => {
      if (!isObject(item)) {
        throw injectError(
          'CS_INJECT_BAD_LIST',
          `List ${name}: item ${i} is ${item === null ? 'null' : `a ${typeof item}`}, not an object`,
          'remove the empty item (a stray "-" line) or complete it; nothing was written',
          origin,
        );
      }
      return podSpecs(item, [...base, 'items', i], notes, origin);
    });
  }
  const workload = workloadType(typeof obj.apiVersion === 'string' ? obj.apiVersion : undefined, kind);
  if (workload) return [{ path: [...base, ...workload.podTemplatePath, 'spec'], what: `${kind} ${name}` }];
  if (kind === 'Pod') return [{ path: [...base, 'spec'], what: `Pod ${name}` }];
  if (NOT_RESTARTABLE.has(kind)) {
    notes.push(`${kind} ${name} left alone: config-sync restarts only the Pods of a ${RESTARTABLE_KINDS}`);
  }
  return [];
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

function injectPodSpec(
  doc: Document,
  ref: PodSpecRef,
  options: SidecarOptions,
  origin: string,
  notes: string[],
): boolean {
  const node = doc.getIn(ref.path) as { toJSON(): unknown } | undefined;
  const raw = node && typeof node.toJSON === 'function' ? node.toJSON() : node;
  const where = `${origin}: ${ref.what}`;
  const problem = podShapeProblem({ spec: raw });
  if (problem) {
    throw injectError(
      'CS_INJECT_BAD_POD',
      `${ref.what}: ${problem.replace(/^spec/, ref.path.join('.'))}`,
      'fix the Pod template; nothing was written',
      origin,
    );
  }
  const spec = raw as V1PodSpec | undefined;
  if (!spec || !Array.isArray(spec.containers) || spec.containers.length === 0) {
    throw injectError(
      'CS_INJECT_NO_CONTAINERS',
      `${ref.what} has no containers`,
      'inject takes complete Pod templates',
      origin,
    );
  }
  // (3)
  if (spec.serviceAccountName && spec.serviceAccountName !== options.serviceAccount) {
    throw injectError(
      'CS_INJECT_SERVICE_ACCOUNT',
      `${ref.what} runs as ServiceAccount "${spec.serviceAccountName}", and a Pod has only one: the agent would run as it too`,
      `bind config-sync's Role (deploy/sidecar/rbac) to "${spec.serviceAccountName}" and pass --service-account ${spec.serviceAccountName}`,
      origin,
    );
  }
  if (spec.automountServiceAccountToken === false) {
    throw injectError(
      'CS_INJECT_NO_TOKEN',
      `${ref.what} sets automountServiceAccountToken: false, so the agent could not reach the API`,
      'remove it from the Pod spec (or mount a projected service-account token volume yourself)',
      origin,
    );
  }
  if (spec.containers.some((c) => c.name === SIDECAR_NAME)) {
    throw injectError(
      'CS_INJECT_NAME_TAKEN',
      `${ref.what} has an app container named "${SIDECAR_NAME}"`,
      'rename that container; inject adds the agent as a native sidecar of that name',
      origin,
    );
  }
  // (3b) The template's config-sync annotations pass through unchanged; one the agent cannot
  // read is told here, before it reaches a cluster (config/pod-annotations.ts).
  const annotations = doc.getIn([...ref.path.slice(0, -1), 'metadata', 'annotations']) as
    | { toJSON(): unknown }
    | undefined;
  const given = isMap(annotations) ? (annotations.toJSON() as Record<string, string>) : undefined;
  for (const p of parsePodAnnotations(given, 'sidecar').problems)
    notes.push(`${where}: invalid annotation: ${p}; the agent will report drift there and never restart it`);
  // (4)
  if (configMounts(spec).length === 0) {
    notes.push(`${where}: mounts no ConfigMap or Secret, nothing for config-sync to check; left alone`);
    return false;
  }
  const sidecar = sidecarContainer(spec, options);
  const inits = spec.initContainers ?? [];
  const index = inits.findIndex((c) => c.name === SIDECAR_NAME);
  const saSet = spec.serviceAccountName === options.serviceAccount;
  const hasState = (spec.volumes ?? []).some((v) => v.name === STATE_VOLUME.name);
  if (index >= 0 && same(inits[index], sidecar) && saSet && hasState) return false;
  const sidecarNode = doc.createNode(sidecar);
  const seq = doc.getIn([...ref.path, 'initContainers'], true);
  if (isSeq(seq)) {
    if (index >= 0) seq.set(index, sidecarNode);
    else seq.add(sidecarNode);
  } else {
    doc.setIn([...ref.path, 'initContainers'], doc.createNode([sidecar]));
  }
  if (!saSet) doc.setIn([...ref.path, 'serviceAccountName'], options.serviceAccount);
  if (!hasState) {
    const volumes = doc.getIn([...ref.path, 'volumes'], true);
    if (isSeq(volumes)) volumes.add(doc.createNode(STATE_VOLUME));
    else doc.setIn([...ref.path, 'volumes'], doc.createNode([STATE_VOLUME]));
  }
  return true;
}

export function injectManifests(source: string, origin: string, options: SidecarOptions): InjectResult {
  checkImageReference('inject', options.image);
  const notes: string[] = [];
  const injected: string[] = [];
  let line = 1;
  const out: string[] = [];
  for (const text of splitDocuments(source)) {
    const doc = parseDocument(text);
    const error = doc.errors[0];
    if (error) {
      const at = error.linePos?.[0] ? line + error.linePos[0].line - 1 : line;
      // The library's own position is relative to the document; the stream line replaces it.
      const what = (error.message.split('\n')[0] ?? '').replace(/ at line \d+, column \d+:?$/, '');
      throw injectError('CS_INJECT_YAML', `line ${at}: ${what}`, 'fix the YAML; nothing was written', origin);
    }
    line += text.split('\n').length - 1;
    const root = doc.contents;
    if (!isMap(root)) {
      out.push(text);
      continue;
    }
    const refs = podSpecs(root.toJSON() as Record<string, unknown>, [], notes, origin);
    let changed = false;
    for (const ref of refs) {
      if (injectPodSpec(doc, ref, options, origin, notes)) {
        changed = true;
        injected.push(ref.what);
      }
    }
    // (5)
    out.push(changed ? String(doc) : text);
  }
  return { output: out.join(''), injected, notes };
}
