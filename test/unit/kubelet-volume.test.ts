// The kubelet volume writer must produce exactly kubelet's AtomicWriter layout and update
// sequence, since every watch and verify test of the agent stands on it.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  atomicWrite,
  configMapPayload,
  DATA_DIR_NAME,
  NEW_DATA_DIR_NAME,
  secretPayload,
  validatePath,
  writeSubPathFile,
} from '../cluster/kubelet-volume.ts';

const TS_DIR = /^\.\.\d{4}_\d{2}_\d{2}_\d{2}_\d{2}_\d{2}\.\d+$/;
const text = (s: string) => ({ data: Buffer.from(s), mode: 0o644 });

let dir: string;
beforeEach(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kubelet-volume-'));
});
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

const entries = () => fs.readdirSync(dir).sort();
const mode = (p: string) => fs.statSync(p).mode & 0o777;

describe('atomicWrite: first write', () => {
  it('lays out a timestamped dir, a relative ..data link and one relative link per key', () => {
    const result = atomicWrite(dir, { 'app.yaml': text('a: 1\n'), 'log.level': text('info') });
    expect(result.wrote).toBe(true);
    expect(result.timestampDir).toMatch(TS_DIR);
    expect(entries()).toEqual([result.timestampDir, DATA_DIR_NAME, 'app.yaml', 'log.level'].sort());
    expect(fs.readlinkSync(path.join(dir, DATA_DIR_NAME))).toBe(result.timestampDir);
    expect(fs.readlinkSync(path.join(dir, 'app.yaml'))).toBe('..data/app.yaml');
    expect(fs.lstatSync(path.join(dir, result.timestampDir, 'app.yaml')).isFile()).toBe(true);
    expect(fs.readFileSync(path.join(dir, 'app.yaml'), 'utf8')).toBe('a: 1\n');
    expect(mode(path.join(dir, result.timestampDir))).toBe(0o755);
    expect(fs.existsSync(path.join(dir, NEW_DATA_DIR_NAME))).toBe(false);
  });

  it('writes each file with its explicit mode whatever the umask', () => {
    const old = process.umask(0o077);
    try {
      atomicWrite(dir, {
        open: { data: Buffer.from('x'), mode: 0o644 },
        secret: { data: Buffer.from('y'), mode: 0o400 },
      });
    } finally {
      process.umask(old);
    }
    expect(mode(path.join(dir, 'open'))).toBe(0o644);
    expect(mode(path.join(dir, 'secret'))).toBe(0o400);
  });

  it('links only the first element of a nested path', () => {
    atomicWrite(dir, { 'conf/nested/app.conf': text('n') });
    expect(fs.readlinkSync(path.join(dir, 'conf'))).toBe('..data/conf');
    expect(fs.readFileSync(path.join(dir, 'conf/nested/app.conf'), 'utf8')).toBe('n');
  });
});

describe('atomicWrite: updates', () => {
  it('does not touch the disk when the bytes are unchanged (step 4)', () => {
    const first = atomicWrite(dir, { k: text('same') });
    const inode = fs.statSync(path.join(dir, 'k')).ino;
    const second = atomicWrite(dir, { k: text('same') });
    expect(second).toEqual({ wrote: false, timestampDir: first.timestampDir });
    expect(fs.statSync(path.join(dir, 'k')).ino).toBe(inode);
  });

  it('swaps ..data to a new dir, removes the old one and keeps the key links as they were', () => {
    const first = atomicWrite(dir, { changed: text('v1'), unchanged: text('same') });
    const unchangedInode = fs.statSync(path.join(dir, 'unchanged')).ino;
    const linkInode = fs.lstatSync(path.join(dir, 'changed')).ino;
    const second = atomicWrite(dir, { changed: text('v2'), unchanged: text('same') });
    expect(second.wrote).toBe(true);
    expect(second.timestampDir).not.toBe(first.timestampDir);
    expect(fs.existsSync(path.join(dir, first.timestampDir))).toBe(false);
    expect(fs.readlinkSync(path.join(dir, DATA_DIR_NAME))).toBe(second.timestampDir);
    expect(fs.readFileSync(path.join(dir, 'changed'), 'utf8')).toBe('v2');
    // The user-visible link is not recreated; only what it resolves to changes.
    expect(fs.lstatSync(path.join(dir, 'changed')).ino).toBe(linkInode);
    // Every key gets a new inode on every update, changed or not: inode/mtime are not a verdict.
    expect(fs.statSync(path.join(dir, 'unchanged')).ino).not.toBe(unchangedInode);
  });

  it('adds links for new keys and removes links of keys that are gone', () => {
    atomicWrite(dir, { keep: text('1'), drop: text('2') });
    atomicWrite(dir, { keep: text('1'), add: text('3') });
    expect(entries().filter((e) => !e.startsWith('..'))).toEqual(['add', 'keep']);
    expect(fs.readFileSync(path.join(dir, 'add'), 'utf8')).toBe('3');
  });

  it('empties the volume for an empty payload (an optional source that was deleted)', () => {
    atomicWrite(dir, { k: text('1') });
    const result = atomicWrite(dir, {});
    expect(result.wrote).toBe(true);
    expect(entries()).toEqual([result.timestampDir, DATA_DIR_NAME].sort());
    expect(fs.readdirSync(path.join(dir, result.timestampDir))).toEqual([]);
  });

  it('recreates a missing user-visible link even when the data is current (kubernetes#121472)', () => {
    atomicWrite(dir, { k: text('1') });
    fs.rmSync(path.join(dir, 'k'));
    expect(atomicWrite(dir, { k: text('1') }).wrote).toBe(false);
    expect(fs.readlinkSync(path.join(dir, 'k'))).toBe('..data/k');
  });
});

describe('validatePath (kubelet rules)', () => {
  it.each([
    ['', 'must not be empty'],
    ['/etc/passwd', 'must be relative'],
    ['a/../b', "must not contain '..'"],
    ['..hidden', "must not start with '..'"],
    ['x'.repeat(256), 'filenames must be less than or equal to 255'],
  ])('rejects %j', (p, message) => {
    expect(() => validatePath(p)).toThrow(message);
  });

  it('refuses the whole payload before writing anything', () => {
    expect(() => atomicWrite(dir, { good: text('1'), '..data': text('2') })).toThrow();
    expect(entries()).toEqual([]);
  });
});

describe('payloads (MakePayload)', () => {
  it('projects ConfigMap data as UTF-8 and binaryData decoded, at defaultMode 0644', () => {
    const payload = configMapPayload({
      data: { 'app.yaml': 'héllo' },
      binaryData: { 'logo.bin': Buffer.from([0, 1, 255]).toString('base64') },
    });
    expect(Buffer.from(payload['app.yaml']?.data ?? []).toString('utf8')).toBe('héllo');
    expect([...(payload['logo.bin']?.data ?? [])]).toEqual([0, 1, 255]);
    expect(payload['app.yaml']?.mode).toBe(0o644);
  });

  it('writes only the listed items at their paths and modes', () => {
    const payload = configMapPayload(
      { data: { a: '1', b: '2' } },
      { items: [{ key: 'a', path: 'dir/a.conf', mode: 0o600 }], defaultMode: 0o640 },
    );
    expect(Object.keys(payload)).toEqual(['dir/a.conf']);
    expect(payload['dir/a.conf']?.mode).toBe(0o600);
  });

  it('fails a missing item key unless the source is optional', () => {
    const items = [{ key: 'absent', path: 'x' }];
    expect(() => configMapPayload({ data: {} }, { items })).toThrow('non-existent config key: absent');
    expect(configMapPayload({ data: {} }, { items, optional: true })).toEqual({});
    expect(() => secretPayload({ data: {} }, { items })).toThrow('non-existent secret key: absent');
  });

  it('decodes Secret data from base64 with no newline added', () => {
    const payload = secretPayload({ data: { password: Buffer.from('s3cr3t').toString('base64') } });
    expect(Buffer.from(payload.password?.data ?? []).toString()).toBe('s3cr3t');
  });
});

describe('writeSubPathFile', () => {
  it('is a plain file with no ..data beside it', () => {
    const file = path.join(dir, 'etc/app.yaml');
    writeSubPathFile(file, { data: Buffer.from('v1'), mode: 0o644 });
    expect(fs.lstatSync(file).isFile()).toBe(true);
    expect(fs.existsSync(path.join(dir, 'etc', DATA_DIR_NAME))).toBe(false);
  });
});
