// Reads a mounted target from disk and digests it: the edge that verify's pure decide() needs.
//
// A volume kubelet maintains is read through its user-visible names (`key -> ..data/key`), so a
// read sees one consistent version unless kubelet swaps `..data` in the middle of it; a read
// that fails with ENOENT is retried once for that reason (the old timestamped directory was
// removed between readdir and open). The `..data` link target is returned as the volume's
// version marker, for logs.
import fs from 'node:fs';
import path from 'node:path';
import { type KeyDigest, sha256 } from '../verify/source.ts';
import type { VolumeObservation } from '../verify/verdict.ts';

export const DATA_LINK = '..data';

function digestFile(file: string): KeyDigest | 'missing' {
  for (let attempt = 0; ; attempt += 1) {
    try {
      const bytes = fs.readFileSync(file);
      return { sha256: sha256(bytes), size: bytes.byteLength };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && attempt === 0) continue;
      if (code === 'ENOENT' || code === 'ENOTDIR') return 'missing';
      throw error;
    }
  }
}

export interface ReadVolumeResult extends VolumeObservation {
  readonly dataVersion?: string;
}

/**
 * `dir` is where the target is mounted in the agent's view; `expectedPaths` are relative to it.
 * For a subPath target, `dir` is the file itself and the expected path is ''.
 */
export function readVolume(dir: string, expectedPaths: Iterable<string>, subPath: boolean): ReadVolumeResult {
  try {
    if (subPath) return { files: new Map([['', digestFile(dir)]]), extras: [] };
    const files = new Map<string, KeyDigest | 'missing'>();
    const expectedTop = new Set<string>();
    for (const p of expectedPaths) {
      files.set(p, digestFile(path.join(dir, p)));
      expectedTop.add(p.split('/')[0] as string);
    }
    let entries: string[];
    try {
      entries = fs.readdirSync(dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT')
        return { files, extras: [], error: `${dir} does not exist` };
      throw error;
    }
    // kubelet reserves names starting with `..`; anything else that is not expected is a key the
    // API no longer has but the disk still shows.
    const extras = entries.filter((e) => !e.startsWith('..') && !expectedTop.has(e)).sort();
    let dataVersion: string | undefined;
    try {
      dataVersion = fs.readlinkSync(path.join(dir, DATA_LINK));
    } catch {
      dataVersion = undefined;
    }
    return { files, extras, ...(dataVersion ? { dataVersion } : {}) };
  } catch (error) {
    const e = error as NodeJS.ErrnoException;
    return { files: new Map(), extras: [], error: `cannot read ${dir}: ${e.code ?? e.message}` };
  }
}
