// The error codes are listed once (src/error-codes.ts): every code the source reports is there,
// every entry is used, each has its domain, trigger and fix, and docs/errors.md is what the table
// renders.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ERRORS_PAGE, renderErrorsReference } from '../../scripts/errors-doc.ts';
import { ERROR_CODES } from '../../src/error-codes.ts';
import { ConfigSyncError, exitCodeFor } from '../../src/errors.ts';

const src = path.resolve(import.meta.dirname, '../../src');

/** Every CS_ code written in the source, but the table's own file. */
function codesInSource(): Set<string> {
  const found = new Set<string>();
  for (const entry of fs.readdirSync(src, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile() || !entry.name.endsWith('.ts') || entry.name === 'error-codes.ts') continue;
    const text = fs.readFileSync(path.join(entry.parentPath, entry.name), 'utf8');
    for (const m of text.matchAll(/'(CS_[A-Z0-9_]+)'/g)) found.add(m[1] as string);
  }
  return found;
}

// The proxy tunnel's own failure is never shown: the client reports it as CS_API_PROXY.
const NEVER_SHOWN = ['CS_PROXY_TUNNEL'];

describe('the error codes', () => {
  it('every code the source reports is in the table, and every entry is used', () => {
    const used = codesInSource();
    expect([...used].filter((c) => !(c in ERROR_CODES) && !NEVER_SHOWN.includes(c))).toEqual([]);
    expect(Object.keys(ERROR_CODES).filter((c) => !used.has(c))).toEqual([]);
  });

  it('each says when and how to fix it, and its domain sets the exit code', () => {
    for (const [code, info] of Object.entries(ERROR_CODES)) {
      expect(code).toMatch(/^CS_[A-Z]+(_[A-Z0-9]+)*$/);
      expect(info.when.length, code).toBeGreaterThan(10);
      expect(info.fix.length, code).toBeGreaterThan(5);
    }
    expect(exitCodeFor(new ConfigSyncError('CS_USAGE_BAD_FLAG', 'x'))).toBe(2);
    expect(exitCodeFor(new ConfigSyncError('CS_CONFIG_FILE', 'x'))).toBe(2);
    expect(exitCodeFor(new ConfigSyncError('CS_API_UNREACHABLE', 'x'))).toBe(3);
    expect(exitCodeFor(new ConfigSyncError('CS_API_FORBIDDEN', 'x'))).toBe(3);
    expect(exitCodeFor(new Error('x'))).toBe(4);
  });

  it('docs/errors.md is the table as rendered (npm run errors:doc)', () => {
    expect(fs.readFileSync(ERRORS_PAGE, 'utf8')).toBe(renderErrorsReference());
  });
});
