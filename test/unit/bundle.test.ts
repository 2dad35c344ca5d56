// The shipped bundle's shape, from the metafile scripts/build.mjs writes: the agent's startup
// path (the entry and every chunk it imports statically) holds none of client-node's runtime nor
// undici, so an agent in a Pod never loads them; they sit in a chunk reached only by import(),
// which is what a kubeconfig scope loads. This is where the resident-memory win of the in-cluster
// transport (docs/benchmarks.md) would silently disappear if a static import crept back in.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const dist = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../dist');

interface Metafile {
  outputs: Record<
    string,
    { inputs: Record<string, unknown>; imports: { path: string; kind: string; external?: boolean }[] }
  >;
}

const meta = JSON.parse(fs.readFileSync(path.join(dist, 'meta.json'), 'utf8')) as Metafile;
const HEAVY = /node_modules\/(@kubernetes\/client-node|undici)\//;

/** Every output reachable from `from` through imports of the given kinds. */
function reachable(from: string, kinds: readonly string[]): Set<string> {
  const seen = new Set<string>();
  const queue = [from];
  while (queue.length > 0) {
    const out = queue.pop() as string;
    if (seen.has(out)) continue;
    seen.add(out);
    for (const i of meta.outputs[out]?.imports ?? [])
      if (!i.external && kinds.includes(i.kind) && meta.outputs[i.path]) queue.push(i.path);
  }
  return seen;
}

const heavyInputs = (outputs: Set<string>) =>
  [...outputs].flatMap((o) => Object.keys(meta.outputs[o]?.inputs ?? {}).filter((f) => HEAVY.test(f)));

describe('the bundle', () => {
  it('loads neither client-node nor undici on the startup path', () => {
    const startup = reachable('dist/config-sync.js', ['import-statement']);
    expect(startup.has('dist/config-sync.js')).toBe(true);
    expect(heavyInputs(startup)).toEqual([]);
  });

  it('keeps client-node in a chunk reached through import(), for kubeconfig scopes', () => {
    const all = reachable('dist/config-sync.js', ['import-statement', 'dynamic-import']);
    const lazy = heavyInputs(all);
    expect(lazy.some((f) => f.includes('@kubernetes/client-node/dist/config.js'))).toBe(true);
    for (const out of all) expect(fs.existsSync(path.join(dist, '..', out))).toBe(true);
  });
});
