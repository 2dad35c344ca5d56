// Reading a file a user or kubelet names (a token, a CA, a kubeconfig, a config file, a key)
// without hanging: regular files only, bounded in size. A FIFO given as a token file blocked the
// open until a writer came (no output, SIGTERM ignored for as long), and `agent --config <fifo>`
// or `check --kubeconfig <fifo>` sat silent for 30-40 s. O_NONBLOCK makes the open of a FIFO
// return at once (it does nothing to a regular file); fstat of the open descriptor then says
// what it really is, before a byte is read.

import fs from 'node:fs';
import { ConfigSyncError } from '../errors.ts';

/**
 * Why a file was not read: what it is instead, or its size. A configuration error (exit 2): the
 * file was named by a flag, the environment, a kubeconfig or kubelet's volume, and must be fixed there.
 */
export class NotARegularFileError extends ConfigSyncError {
  override readonly name = 'NotARegularFileError';
  readonly path: string;
  constructor(file: string, why: string) {
    super('CS_CONFIG_NOT_A_FILE', `${file} ${why}; not read`, {
      hint: 'name a regular file: config-sync reads no FIFO, device or socket, and no file larger than its kind can be',
      details: { path: file },
    });
    this.path = file;
  }
}

/** What a file that is not a regular file is, for an error message: "a FIFO", "a socket", ... */
export function kindOf(st: fs.Stats): string {
  if (st.isFIFO()) return 'a FIFO';
  if (st.isCharacterDevice()) return 'a character device';
  if (st.isBlockDevice()) return 'a block device';
  if (st.isSocket()) return 'a socket';
  if (st.isDirectory()) return 'a directory';
  return 'not a file';
}

/**
 * The bytes of `file` if it is a regular file of at most `maxBytes`; NotARegularFileError if it
 * is anything else or larger; the open's own error (ENOENT, EACCES) otherwise.
 */
export function readRegularFile(file: string, maxBytes: number): Buffer {
  let fd: number;
  try {
    fd = fs.openSync(file, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
  } catch (error) {
    // A socket cannot be opened (ENXIO): say what it is.
    if ((error as NodeJS.ErrnoException).code === 'ENXIO') {
      const st = fs.statSync(file, { throwIfNoEntry: false });
      if (st) throw new NotARegularFileError(file, `is not a regular file (${kindOf(st)})`);
    }
    throw error;
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw new NotARegularFileError(file, `is not a regular file (${kindOf(st)})`);
    if (st.size > maxBytes)
      throw new NotARegularFileError(file, `is ${st.size} bytes, more than the ${maxBytes} this file may be`);
    const buffer = Buffer.alloc(st.size);
    let read = 0;
    while (read < st.size) {
      const n = fs.readSync(fd, buffer, read, st.size - read, null);
      if (n === 0) break;
      read += n;
    }
    return buffer.subarray(0, read);
  } finally {
    fs.closeSync(fd);
  }
}

/** Refuses (NotARegularFileError) a path that is not a regular file of at most `maxBytes`, reading nothing. */
export function assertRegularFile(file: string, maxBytes: number): void {
  const st = fs.statSync(file);
  if (!st.isFile()) throw new NotARegularFileError(file, `is not a regular file (${kindOf(st)})`);
  if (st.size > maxBytes)
    throw new NotARegularFileError(file, `is ${st.size} bytes, more than the ${maxBytes} this file may be`);
}

/** Bounds on the files config-sync reads, each far above a real one. */
export const FILE_LIMITS = {
  /** A service-account token, a namespace file: a few KiB. */
  token: 1024 * 1024,
  /** A CA bundle, a certificate, a key. */
  pem: 4 * 1024 * 1024,
  /** A kubeconfig, a config file. */
  config: 16 * 1024 * 1024,
} as const;
