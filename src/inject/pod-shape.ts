// The shape of a Pod as far as config-sync reads it, checked before anything reads it: each
// field the sidecar and target code use (src/inject/sidecar.ts, src/discover/targets.ts) must
// be absent or of the type the Pod schema gives it. The API server only ever holds valid Pods;
// this guards what comes from elsewhere: a webhook caller that is not the API server, a
// hand-written manifest given to `inject`.
type Json = Record<string, unknown>;

export const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Why this object is not a Pod config-sync can read, or undefined when it is. */
export function podShapeProblem(object: unknown): string | undefined {
  if (object === undefined) return undefined;
  if (!isObject(object)) return 'the object is not a JSON object';
  if (object.metadata !== undefined && !isObject(object.metadata)) return 'metadata is not an object';
  const spec = object.spec;
  if (spec === undefined) return undefined;
  if (!isObject(spec)) return 'spec is not an object';
  for (const field of ['containers', 'initContainers'] as const) {
    const problem = listOf(spec[field], `spec.${field}`, containerProblem);
    if (problem) return problem;
  }
  return listOf(spec.volumes, 'spec.volumes', volumeProblem);
}

function listOf(
  value: unknown,
  where: string,
  item: (v: Json, where: string) => string | undefined,
): string | undefined {
  if (value === undefined) return undefined;
  if (!Array.isArray(value)) return `${where} is not a list`;
  for (const [i, v] of value.entries()) {
    if (!isObject(v)) return `${where}[${i}] is not an object`;
    const problem = item(v, `${where}[${i}]`);
    if (problem) return problem;
  }
  return undefined;
}

function stringField(o: Json, field: string, where: string, required: boolean): string | undefined {
  const v = o[field];
  if (v === undefined && !required) return undefined;
  return typeof v === 'string' ? undefined : `${where}.${field} is not a string`;
}

function containerProblem(c: Json, where: string): string | undefined {
  return (
    stringField(c, 'name', where, true) ??
    stringField(c, 'restartPolicy', where, false) ??
    listOf(
      c.volumeMounts,
      `${where}.volumeMounts`,
      (m, at) =>
        stringField(m, 'name', at, true) ??
        stringField(m, 'mountPath', at, true) ??
        stringField(m, 'subPath', at, false) ??
        stringField(m, 'subPathExpr', at, false),
    )
  );
}

/** A ConfigMap or Secret reference: a volume's names its Secret `secretName`, a projected source `name`. */
function sourceProblem(s: Json, where: string, secretNameField: 'secretName' | 'name'): string | undefined {
  for (const [kind, nameField] of [
    ['configMap', 'name'],
    ['secret', secretNameField],
  ] as const) {
    const source = s[kind];
    if (source === undefined) continue;
    if (!isObject(source)) return `${where}.${kind} is not an object`;
    const problem =
      stringField(source, nameField, `${where}.${kind}`, false) ??
      listOf(
        source.items,
        `${where}.${kind}.items`,
        (i, at) => stringField(i, 'key', at, true) ?? stringField(i, 'path', at, true),
      );
    if (problem) return problem;
  }
  return undefined;
}

function volumeProblem(v: Json, where: string): string | undefined {
  const problem = stringField(v, 'name', where, true) ?? sourceProblem(v, where, 'secretName');
  if (problem) return problem;
  const projected = v.projected;
  if (projected === undefined) return undefined;
  if (!isObject(projected)) return `${where}.projected is not an object`;
  return listOf(projected.sources, `${where}.projected.sources`, (source, at) =>
    sourceProblem(source, at, 'name'),
  );
}
