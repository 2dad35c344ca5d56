import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  EXEC_EXTENSION,
  execExtensionOf,
  execExtensionOfCluster,
  parseRawKubeconfig,
  tokenFileOf,
} from '../../src/kube/kubeconfig-raw.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kubeconfig-raw-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A kubeconfig file in its own directory under `dir`, of `clusters` and `users` entries. */
function kubeconfigFile(name: string, doc: Record<string, unknown>): string {
  fs.mkdirSync(path.join(dir, name), { recursive: true });
  const file = path.join(dir, name, 'config');
  fs.writeFileSync(file, JSON.stringify({ apiVersion: 'v1', kind: 'Config', ...doc }));
  return file;
}

describe('parseRawKubeconfig', () => {
  it('names each user and cluster entry as written, the first of a name winning', () => {
    const raw = parseRawKubeconfig(
      [
        'clusters:',
        '- name: a',
        '  cluster: {server: "https://a:6443"}',
        '- name: a',
        '  cluster: {server: "https://second:6443"}',
        'users:',
        '- name: u',
        '  user: {tokenFile: t}',
      ].join('\n'),
    );
    expect(raw.clusters.get('a')).toEqual({ server: 'https://a:6443' });
    expect(raw.users.get('u')).toEqual({ tokenFile: 't' });
  });

  it('reads text that is not YAML, or lists that are not lists, as empty', () => {
    for (const text of ['clusters: [', 'clusters: 3\nusers: {a: 1}', '', 'null']) {
      const raw = parseRawKubeconfig(text);
      expect([raw.clusters.size, raw.users.size]).toEqual([0, 0]);
    }
  });
});

describe("a cluster's exec extension", () => {
  it('is the value of its extensions entry named client.authentication.k8s.io/exec, whatever its shape', () => {
    expect(EXEC_EXTENSION).toBe('client.authentication.k8s.io/exec');
    const cluster = {
      server: 'https://a:6443',
      extensions: [
        { name: 'other.example.com/thing', extension: { no: 1 } },
        { name: EXEC_EXTENSION, extension: { audience: '06e3fbd18de8', nested: { list: [1, 'x'] } } },
      ],
    };
    expect(execExtensionOfCluster(cluster)).toEqual({ audience: '06e3fbd18de8', nested: { list: [1, 'x'] } });
    expect(execExtensionOfCluster({ extensions: [{ name: EXEC_EXTENSION, extension: 'plain' }] })).toBe(
      'plain',
    );
  });

  it('is absent without such an entry, or without extensions', () => {
    expect(execExtensionOfCluster({ extensions: [{ name: 'other', extension: {} }] })).toBeUndefined();
    expect(execExtensionOfCluster({ extensions: 'nope' })).toBeUndefined();
    expect(execExtensionOfCluster({ server: 'https://a' })).toBeUndefined();
    expect(execExtensionOfCluster(undefined)).toBeUndefined();
    expect(execExtensionOfCluster({ extensions: [null, { name: EXEC_EXTENSION }] })).toBeUndefined();
  });
});

describe('a KUBECONFIG list: each name from the first file that defines it, whole', () => {
  const withExtension = (audience: string) => ({
    server: 'https://a:6443',
    extensions: [{ name: EXEC_EXTENSION, extension: { audience } }],
  });
  const first = kubeconfigFile('first', {
    clusters: [
      { name: 'a', cluster: withExtension('first') },
      { name: 'plain', cluster: { server: 'https://plain:6443' } },
    ],
    users: [
      { name: 'with-file', user: { tokenFile: 'token' } },
      { name: 'without', user: { token: 'inline' } },
    ],
  });
  const second = kubeconfigFile('second', {
    clusters: [
      { name: 'a', cluster: withExtension('second') },
      { name: 'plain', cluster: withExtension('second') },
      { name: 'only-second', cluster: withExtension('only-second') },
    ],
    users: [
      { name: 'with-file', user: { tokenFile: '/abs/token' } },
      { name: 'without', user: { tokenFile: 'later' } },
      { name: 'only-second', user: { tokenFile: 'sub/token' } },
    ],
  });

  it("takes a cluster's exec extension from the first file defining the cluster, even where it has none", () => {
    expect(execExtensionOf([first, second], 'a')).toEqual({ audience: 'first' });
    // kubectl merges a cluster whole: the second file's extension is not consulted.
    expect(execExtensionOf([first, second], 'plain')).toBeUndefined();
    expect(execExtensionOf([first, second], 'only-second')).toEqual({ audience: 'only-second' });
    expect(execExtensionOf([first, second], 'nowhere')).toBeUndefined();
  });

  it("takes a user's tokenFile from the first file defining the user, resolved against that file's directory", () => {
    expect(tokenFileOf([first, second], 'with-file')).toBe(path.join(dir, 'first', 'token'));
    expect(tokenFileOf([second, first], 'with-file')).toBe('/abs/token');
    expect(tokenFileOf([first, second], 'without')).toBeUndefined();
    expect(tokenFileOf([first, second], 'only-second')).toBe(path.join(dir, 'second', 'sub', 'token'));
  });

  it('skips a file that is gone since client-node read it', () => {
    expect(execExtensionOf([path.join(dir, 'gone', 'config'), second], 'a')).toEqual({ audience: 'second' });
  });
});
