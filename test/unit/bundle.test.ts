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

// prom-client's index and what only it loads: the Pushgateway (zlib), the default metrics
// (perf_hooks, v8) and the cluster aggregator (cluster). src/metrics/metrics.ts loads the four
// classes it uses one by one, which keeps those Node modules out of every Pod (about 1.3 MiB).
const PROM_CLIENT_UNUSED =
  /node_modules\/prom-client\/(index\.js|lib\/(pushgateway|defaultMetrics|cluster)\.js|lib\/metrics\/)/;

const inputsMatching = (outputs: Set<string>, pattern: RegExp) =>
  [...outputs].flatMap((o) => Object.keys(meta.outputs[o]?.inputs ?? {}).filter((f) => pattern.test(f)));
const heavyInputs = (outputs: Set<string>) => inputsMatching(outputs, HEAVY);

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

  it("holds prom-client's metric classes but not its index, Pushgateway, default metrics or cluster", () => {
    const all = reachable('dist/config-sync.js', ['import-statement', 'dynamic-import']);
    expect(inputsMatching(all, /node_modules\/prom-client\/lib\/counter\.js/)).toHaveLength(1);
    expect(inputsMatching(all, PROM_CLIENT_UNUSED)).toEqual([]);
  });
});
