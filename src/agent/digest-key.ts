// The Pod's fingerprint key (src/verify/fingerprint.ts), kept in the state directory so that it
// survives a sidecar restart and dies with the Pod. The directory is an emptyDir the sidecar
// mounts; where there is none (an older manifest, a command run from a laptop), the key is made
// in memory for this process only, and the caller says so.
//
// Steps: (1) read <dir>/fingerprint.key; (2) if absent, write 32 random bytes to a file of this
// process's own and link it to that name, so two processes starting at once (the agent and an
// exec'd `heal`) cannot both make one (the loser reads the winner's key), and a write cut short
// leaves no partial key; (3) a directory that is missing, full or not writable, or a key of the
// wrong size: an in-memory key, and a note that says what to do.
import { createHmac, randomBytes } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { FILE_LIMITS, readRegularFile } from '../kube/regular-file.ts';

export const KEY_FILE = 'fingerprint.key';
const KEY_BYTES = 32;

export interface DigestKey {
  readonly key: Buffer;
  /** Whether it is the Pod's key (kept in the state directory) or this process's own. */
  readonly persistent: boolean;
  /** Why it is not persistent, for a log line. */
  readonly note?: string;
}

export function loadDigestKey(stateDir: string): DigestKey {
  const file = path.join(stateDir, KEY_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    // (1)
    try {
      const key = readRegularFile(file, FILE_LIMITS.token);
      if (key.length === KEY_BYTES) return { key, persistent: true };
      // A key of another size (a write cut short by a full disk, before the key was written
      // whole): it would never be replaced, so every start would use a throwaway key.
      return ephemeral(
        `${file} is ${key.length} bytes, not a ${KEY_BYTES}-byte key`,
        undefined,
        `delete ${file} and restart the agent: a new key is made (env and subPath baselines are taken again once)`,
      );
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return ephemeral(`cannot read ${file}`, error);
    }
    // (2) Written whole under another name first, then linked in place, which fails if another
    // process got there first (EEXIST: read its key). A write that fails (ENOSPC) leaves no
    // partial key behind under the key's name.
    const key = randomBytes(KEY_BYTES);
    const partial = `${file}.${process.pid}.new`;
    try {
      fs.writeFileSync(partial, key, { mode: 0o600 });
      fs.linkSync(partial, file);
      return { key, persistent: true };
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== 'EEXIST')
        return ephemeral(
          `cannot write ${file}`,
          error,
          code === 'ENOSPC' ? `free space in --state-dir ${stateDir} (it holds only this key)` : undefined,
        );
    } finally {
      fs.rmSync(partial, { force: true });
    }
  }
  return ephemeral(`${file} could not be read or made`);
}

// (3)
function ephemeral(why: string, error?: unknown, fix?: string): DigestKey {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return {
    key: randomBytes(KEY_BYTES),
    persistent: false,
    note: `${why}${code ? ` (${code})` : ''}: fingerprints are keyed for this process only, and env and subPath baselines are taken again when the agent restarts; ${fix ?? 'mount an emptyDir at --state-dir'}`,
  };
}

/**
 * The node agent's key for one Pod, derived from the node's key (kept in its state dir on the
 * node) and the Pod's uid: fingerprints of the same value differ from Pod to Pod, as the
 * sidecar's do (each Pod has its own key there), and a restarted node agent derives the same
 * key, so the baselines it recorded on the Pod stay readable.
 */
export function podKey(nodeKey: Buffer, podUid: string): Buffer {
  return createHmac('sha256', nodeKey).update(`config-sync pod key\n${podUid}`).digest();
}
