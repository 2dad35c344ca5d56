// The direction of imports in src/ (docs/architecture.md, "Layers"): kube/ is the ground floor,
// importing only errors.ts and its own files, so that API access never depends on what is built
// on it. A lint of the real tree, and proof that the lint sees a violation.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const src = path.resolve(import.meta.dirname, '../../src');

/** Relative imports of every .ts file in `dir` that leave it, except those `allowed` (paths from src/). */
function importsLeaving(dir: string, allowed: readonly string[], root = src): string[] {
  const found: string[] = [];
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.ts'))) {
    const text = fs.readFileSync(path.join(dir, file), 'utf8');
    for (const m of text.matchAll(/^(?:import|export)[^'"]*from\s+['"](\.[^'"]+)['"]/gm)) {
      const target = path.relative(root, path.resolve(dir, m[1] as string));
      const inside = path.dirname(target) === path.relative(root, dir);
      if (!inside && !allowed.includes(target))
        found.push(`${path.relative(root, path.join(dir, file))} -> ${target}`);
    }
  }
  return found;
}

describe('import direction', () => {
  it('kube/ imports only errors.ts and its own files', () => {
    expect(importsLeaving(path.join(src, 'kube'), ['errors.ts'])).toEqual([]);
  });

  // Every folder of src/ and the folders below it that it may import (besides errors.ts and
  // log.ts): decisions and API access never depend on the commands built on them.
  const MAY_IMPORT: Record<string, readonly string[]> = {
    kube: [],
    metrics: [],
    discover: ['kube'],
    verify: ['kube', 'discover'],
    read: ['kube', 'discover', 'verify'],
    watch: ['kube', 'discover', 'verify', 'read'],
    status: ['kube', 'verify'],
    heal: ['kube', 'discover', 'verify'],
    config: ['kube', 'discover', 'verify', 'heal', 'metrics'],
    inject: ['kube', 'discover', 'config'],
    doctor: ['kube', 'discover', 'verify', 'heal', 'config'],
    fleet: ['kube'],
    webhook: ['kube', 'discover', 'verify', 'read', 'watch', 'inject', 'metrics', 'config'],
    agent: ['kube', 'discover', 'verify', 'read', 'watch', 'status', 'heal', 'metrics', 'config'],
  };

  it('every folder imports only the folders below it; nothing under agent/ imports cli/', () => {
    const folders = fs
      .readdirSync(src, { withFileTypes: true })
      .filter((d) => d.isDirectory() && d.name !== 'cli')
      .map((d) => d.name);
    // A new folder must be placed in the table, so that its direction is decided, not drifted into.
    expect(folders.filter((f) => !(f in MAY_IMPORT))).toEqual([]);
    const upward = folders.flatMap((folder) =>
      importsLeaving(path.join(src, folder), [
        'errors.ts',
        'log.ts',
        ...(MAY_IMPORT[folder] ?? []).flatMap((below) =>
          fs.readdirSync(path.join(src, below)).map((f) => `${below}/${f}`),
        ),
      ]),
    );
    expect(upward).toEqual([]);
  });

  it('the check sees an upward import (a file of kube/ importing verify/)', () => {
    const root = fs.mkdtempSync(path.join(os.tmpdir(), 'imports-'));
    try {
      fs.mkdirSync(path.join(root, 'kube'));
      fs.writeFileSync(
        path.join(root, 'kube/x.ts'),
        "import { a } from './y.ts';\nimport { b } from '../errors.ts';\nimport type { C } from '../verify/source.ts';\n",
      );
      expect(importsLeaving(path.join(root, 'kube'), ['errors.ts'], root)).toEqual([
        'kube/x.ts -> verify/source.ts',
      ]);
    } finally {
      fs.rmSync(root, { recursive: true, force: true });
    }
  });
});
