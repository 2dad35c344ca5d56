// The Pod's fingerprint key (src/verify/fingerprint.ts), kept in the state directory so that it
// survives a sidecar restart and dies with the Pod. The directory is an emptyDir the sidecar
// mounts; where there is none (an older manifest, a command run from a laptop), the key is made
// in memory for this process only, and the caller says so.
//
// Steps: (1) read <dir>/fingerprint.key; (2) if absent, write 32 random bytes with O_EXCL
// (`wx`), so two processes starting at once (the agent and an exec'd `heal`) cannot both
// write: the loser reads the winner's key; (3) a directory that is missing or not writable:
// an in-memory key.
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
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'ENOENT') return ephemeral(`cannot read ${file}`, error);
    }
    // (2)
    try {
      const key = randomBytes(KEY_BYTES);
      fs.writeFileSync(file, key, { mode: 0o600, flag: 'wx' });
      return { key, persistent: true };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') return ephemeral(`cannot write ${file}`, error);
    }
  }
  return ephemeral(`${file} is not a ${KEY_BYTES}-byte key`);
}

// (3)
function ephemeral(why: string, error?: unknown): DigestKey {
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  return {
    key: randomBytes(KEY_BYTES),
    persistent: false,
    note: `${why}${code ? ` (${code})` : ''}: fingerprints are keyed for this process only, and env and subPath baselines are taken again when the agent restarts; mount an emptyDir at --state-dir`,
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
