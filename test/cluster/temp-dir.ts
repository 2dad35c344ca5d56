// Temporary directories for a test file, removed once its tests are done. Some hold a
// ServiceAccount token or a kubeconfig, and a run makes dozens: left in /tmp, they piled up on
// every machine the suite ran on.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll } from 'vitest';

const made: string[] = [];

// Registered when a test file imports this module, at collection: vitest evaluates it again for
// every test file (isolated modules), so each file removes its own directories.
afterAll(() => {
  for (const dir of made.splice(0)) fs.rmSync(dir, { recursive: true, force: true });
});

/** A new directory under the system's temporary directory, named `<prefix>XXXXXX`. */
export function tempDir(prefix: string): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  made.push(dir);
  return dir;
}
