// The built CLI, run as a user runs it: through bin/config-sync.js under the pinned Node 24.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import pkg from '../../package.json' with { type: 'json' };

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../bin/config-sync.js');
const run = (...args: string[]) => spawnSync(process.execPath, [bin, ...args], { encoding: 'utf8' });

describe('config-sync CLI', () => {
  it('--help lists the commands and exits 0', () => {
    const res = run('--help');
    expect(res.status).toBe(0);
    expect(res.stdout).toContain('Usage:');
    expect(res.stdout).toMatch(/^\s+version\s+print the version/m);
  });

  it('no arguments prints the help and exits 2 (usage)', () => {
    const res = run();
    expect(res.status).toBe(2);
    expect(res.stdout).toContain('Usage:');
  });

  it('version prints the package version and the Node running it', () => {
    const res = run('version');
    expect(res.status).toBe(0);
    expect(res.stdout.trim()).toBe(
      `config-sync ${pkg.version} (node ${process.version}, ${process.platform}/${process.arch})`,
    );
  });

  it('version -o json is machine-readable', () => {
    const res = run('version', '-o', 'json');
    expect(res.status).toBe(0);
    expect(JSON.parse(res.stdout)).toMatchObject({
      name: 'config-sync',
      version: pkg.version,
      node: process.version,
    });
  });

  // Every command that takes settings reads --config; a missing file is refused before any
  // request is made (so no cluster is needed here).
  it.each(['agent', 'check', 'heal', 'doctor'])('%s reads --config and refuses a missing file', (command) => {
    const res = run(command, '--config', '/nonexistent/config-sync.yaml');
    expect(res.stderr).toContain(
      'error CS_CONFIG_FILE: config file /nonexistent/config-sync.yaml: no such file',
    );
    expect(res.status).toBe(2);
  });

  it('runs under Node 24 or newer', () => {
    expect(Number(process.versions.node.split('.')[0])).toBeGreaterThanOrEqual(24);
  });

  it.each([
    [['frob'], 'CS_USAGE_UNKNOWN_COMMAND', 'run "config-sync --help"'],
    [['version', '-o', 'yaml'], 'CS_USAGE_BAD_OUTPUT', 'use -o text or -o json'],
    [['version', '--bogus'], 'CS_USAGE_BAD_FLAG', 'run "config-sync version --help"'],
  ])('%j is a usage error with a code and a hint, exit 2', (args, code, hint) => {
    const res = run(...args);
    expect(res.status).toBe(2);
    expect(res.stderr).toContain(`error ${code}:`);
    expect(res.stderr).toContain(`hint: ${hint}`);
    expect(res.stdout).toBe('');
  });
});
