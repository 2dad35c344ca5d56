// Duration settings: parsed, kept inside a sane range, and any error names the value where the
// user gave it (flag, environment variable, config file), never a flag that was not given.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { agentSettings } from '../../src/config/agent-settings.ts';
import { durationMs, durationSetting } from '../../src/config/durations.ts';
import { resolveSettings } from '../../src/config/settings.ts';
import { ConfigSyncError } from '../../src/errors.ts';
import { tempDir } from '../cluster/temp-dir.ts';

function settle(args: string[], env: Record<string, string> = {}) {
  return resolveSettings('check', agentSettings, args, env);
}

function failure(run: () => unknown): ConfigSyncError {
  try {
    run();
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigSyncError);
    return error as ConfigSyncError;
  }
  throw new Error('expected a ConfigSyncError');
}

describe('durationMs', () => {
  it.each([
    ['90s', 90_000],
    ['1m30s', 90_000],
    ['500ms', 500],
    ['2h', 7_200_000],
    ['0s', 0],
    ['5', 5_000],
  ])('%s -> %d ms', (raw, ms) => {
    expect(durationMs(raw)).toBe(ms);
  });

  it.each(['', 'abc', '-5s', '5 s', '1d', '5s5'])('%j is not a duration', (raw) => {
    expect(durationMs(raw)).toBeUndefined();
  });
});

describe('durationSetting', () => {
  it('takes a value inside the range', () => {
    expect(durationSetting('check', settle(['--grace', '2m']), 'grace')).toBe(120_000);
    expect(durationSetting('check', settle([]), 'request-timeout')).toBe(10_000);
  });

  it.each([
    [['--resync', '1000h'], 'resync', '--resync 1000h is out of range: --resync takes 1s to 24h'],
    [['--heartbeat', '0'], 'heartbeat', '--heartbeat 0 is out of range: --heartbeat takes 10s to 24h'],
    [['--poll', '0s'], 'poll', '--poll 0s is out of range: --poll takes 100ms to 1h'],
    [['--request-timeout', '0s'], 'request-timeout', 'takes 1s to 5m'],
    [['--grace', '-5s'], 'grace', '--grace -5s is not a duration'],
  ])('%j is refused with the range', (args, name, message) => {
    const error = failure(() => durationSetting('agent', settle(args), name));
    expect(error.code).toBe('CS_USAGE_BAD_DURATION');
    expect(error.message).toContain(message);
    expect(error.hint).toMatch(/^give --/);
  });

  it('names the environment variable a bad value came from', () => {
    const error = failure(() => durationSetting('check', settle([], { CONFIG_SYNC_GRACE: 'abc' }), 'grace'));
    expect(error.message).toBe(
      'check: CONFIG_SYNC_GRACE=abc is not a duration (examples: 90s, 1m30s, 500ms)',
    );
  });

  it('names the config file a bad value came from', () => {
    const file = path.join(tempDir('durations-'), 'config.yaml');
    fs.writeFileSync(file, 'grace: -5s\n');
    const error = failure(() => durationSetting('check', settle(['--config', file]), 'grace'));
    expect(error.message).toBe(
      `check: "grace: -5s" in config file ${file} is not a duration (examples: 90s, 1m30s, 500ms)`,
    );
  });
});

describe('a flag value that starts with a dash', () => {
  it('reaches the setting, not the parser: --grace -5s', () => {
    expect(settle(['--grace', '-5s']).get('grace')).toEqual({ value: '-5s', source: '--grace' });
  });

  it('a missing value before another flag is still reported as missing', () => {
    expect(() => settle(['--grace', '--debounce', '1s'])).toThrow(/argument is ambiguous|argument missing/);
  });
});
