// No file in src/agent/ over 250 lines: the agent's reconciler grew back into one 588-line
// closure after an earlier split, because every retry feature landed inside it. A new job gets a
// module of its own (a part of the reconciler, with its own state and tests), not a branch in
// the biggest file. Beside the import-direction test, and like it a lint of the real tree.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

const BUDGET = 250;
const agentDir = path.resolve(import.meta.dirname, '../../src/agent');

function linesOf(file: string): number {
  return fs.readFileSync(file, 'utf8').split('\n').length - 1;
}

describe('line budget', () => {
  it(`no file in src/agent/ is over ${BUDGET} lines`, () => {
    const over = fs
      .readdirSync(agentDir)
      .filter((f) => f.endsWith('.ts'))
      .map((f) => ({ file: f, lines: linesOf(path.join(agentDir, f)) }))
      .filter((f) => f.lines > BUDGET);
    expect(over).toEqual([]);
  });

  it('counts lines as wc -l does', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'line-budget-'));
    try {
      const file = path.join(dir, 'x.ts');
      fs.writeFileSync(file, 'a\n'.repeat(BUDGET + 1));
      expect(linesOf(file)).toBe(BUDGET + 1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
