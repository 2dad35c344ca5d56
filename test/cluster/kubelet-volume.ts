// Writes ConfigMap and Secret volumes to a directory exactly as kubelet does, so the agent is
// tested against the real on-disk layout without a kubelet.
//
// This is a transcription of kubelet's AtomicWriter.Write (k8s.io/kubernetes v1.36.3,
// pkg/volume/util/atomic_writer.go) and of MakePayload in pkg/volume/configmap/configmap.go and
// pkg/volume/secret/secret.go. It is kept independent of config-sync's own projection code on
// purpose: it is the oracle the product is tested against, so it must not share its bugs.
//
// The layout it produces:
//   <dir>/..2026_12_02_10_00_00.123456789/<path>   the real files, with explicit modes
//   <dir>/..data -> ..2026_12_02_10_00_00.123456789  (relative symlink, swapped by rename)
//   <dir>/<first path element> -> ..data/<first path element>
import { randomInt } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

export interface FileProjection {
  readonly data: Uint8Array;
  readonly mode: number;
}

/** User-visible relative path -> content and mode, as kubelet's payload map. */
export type Payload = Readonly<Record<string, FileProjection>>;

export const DATA_DIR_NAME = '..data';
export const NEW_DATA_DIR_NAME = '..data_tmp';
const MAX_FILE_NAME_LENGTH = 255;
const MAX_PATH_LENGTH = 4096;

export interface WriteResult {
  /** False when the payload already matched the disk and no new directory was made (step 4). */
  readonly wrote: boolean;
  /** The timestamped directory `..data` points at after the write. */
  readonly timestampDir: string;
  /** performance.now() right after the `..data` rename, the instant the new content is visible. */
  readonly swappedAt?: number;
}

/**
 * The AtomicWriter algorithm, steps numbered as in kubelet:
 *  (1) validate the payload; (2) read the `..data` link to find the current timestamped dir;
 *  (3) walk it for paths the new payload no longer has; (4) compare bytes: nothing changed and
 *  nothing to remove -> no new dir; (5) make a new timestamped dir (0700, then chmod 0755); (6) write every file of
 *  the payload into it and chmod it to its mode; (7) ownership (not modelled: tests run as one
 *  user); (8) symlink `..data_tmp` to the new dir; (9) rename `..data_tmp` over `..data` (the
 *  atomic swap); (10) create missing user-visible symlinks; (11) remove user-visible paths no
 *  longer in the payload; (12) remove the old timestamped dir.
 */
export function atomicWrite(targetDir: string, payload: Payload): WriteResult {
  if (!fs.existsSync(targetDir)) throw new Error(`target directory ${targetDir} does not exist`);
  // (1)
  const clean = validatePayload(payload);

  // (2)
  const dataDirPath = path.join(targetDir, DATA_DIR_NAME);
  let oldTsDir = readlinkOrEmpty(dataDirPath);
  const oldTsPath = path.join(targetDir, oldTsDir);

  let toRemove = new Set<string>();
  let shouldWrite = true;
  if (oldTsDir !== '') {
    // (3)
    toRemove = pathsToRemove(clean, oldTsPath);
    // (4)
    if (!shouldWritePayload(clean, oldTsPath) && toRemove.size === 0) {
      // Up to date; kubelet still recreates missing user-visible links (kubernetes#121472) and
      // must not remove the current dir.
      shouldWrite = false;
      oldTsDir = '';
    }
  }

  let timestampDir = readlinkOrEmpty(dataDirPath);
  let swappedAt: number | undefined;
  if (shouldWrite) {
    // (5)
    const tsDir = newTimestampDir(targetDir);
    timestampDir = path.basename(tsDir);
    // (6)
    for (const [userPath, projection] of Object.entries(clean)) {
      const full = path.join(tsDir, userPath);
      fs.mkdirSync(path.dirname(full), { recursive: true, mode: 0o777 });
      fs.writeFileSync(full, projection.data, { mode: projection.mode });
      fs.chmodSync(full, projection.mode); // the umask must not change the mode
    }
    // (7) setPerms: ownership for fsGroup; not modelled.
    // (8)
    const newDataDirPath = path.join(targetDir, NEW_DATA_DIR_NAME);
    fs.symlinkSync(timestampDir, newDataDirPath);
    // (9)
    fs.renameSync(newDataDirPath, dataDirPath);
    swappedAt = performance.now();
  }

  // (10)
  for (const userPath of Object.keys(clean)) {
    const linkName = userPath.split('/')[0] as string;
    const visible = path.join(targetDir, linkName);
    if (readlinkOrEmpty(visible) === '' && !lexists(visible)) {
      fs.symlinkSync(path.join(DATA_DIR_NAME, linkName), visible);
    }
  }

  // (11) only entries of the volume root are links; deeper paths vanish with the old dir.
  for (const p of toRemove) {
    if (!p.includes('/')) fs.rmSync(path.join(targetDir, p), { force: true });
  }

  // (12)
  if (oldTsDir !== '') fs.rmSync(oldTsPath, { recursive: true, force: true });

  return { wrote: shouldWrite, timestampDir, ...(swappedAt === undefined ? {} : { swappedAt }) };
}

function readlinkOrEmpty(file: string): string {
  try {
    return fs.readlinkSync(file);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'EINVAL') return '';
    throw error;
  }
}

function lexists(file: string): boolean {
  try {
    fs.lstatSync(file);
    return true;
  } catch {
    return false;
  }
}

function validatePayload(payload: Payload): Record<string, FileProjection> {
  const clean: Record<string, FileProjection> = {};
  for (const [p, projection] of Object.entries(payload)) {
    validatePath(p);
    clean[path.normalize(p)] = projection;
  }
  return clean;
}

/** kubelet's validatePath: relative, no `..` element, no leading `..`, bounded lengths. */
export function validatePath(p: string): void {
  if (p === '') throw new Error('invalid path: must not be empty');
  if (path.isAbsolute(p)) throw new Error(`invalid path: must be relative path: ${p}`);
  if (p.length > MAX_PATH_LENGTH)
    throw new Error(`invalid path: must be less than or equal to ${MAX_PATH_LENGTH} characters`);
  const items = p.split('/');
  for (const item of items) {
    if (item === '..') throw new Error(`invalid path: must not contain '..': ${p}`);
    if (item.length > MAX_FILE_NAME_LENGTH) {
      throw new Error(
        `invalid path: filenames must be less than or equal to ${MAX_FILE_NAME_LENGTH} characters`,
      );
    }
  }
  const first = items[0] as string;
  if (first.startsWith('..') && first.length > 2)
    throw new Error(`invalid path: must not start with '..': ${p}`);
}

function shouldWritePayload(payload: Record<string, FileProjection>, oldTsPath: string): boolean {
  for (const [userPath, projection] of Object.entries(payload)) {
    const file = path.join(oldTsPath, userPath);
    if (!lexists(file)) return true;
    if (!Buffer.from(projection.data).equals(fs.readFileSync(file))) return true;
  }
  return false;
}

function pathsToRemove(payload: Record<string, FileProjection>, oldTsPath: string): Set<string> {
  if (!fs.existsSync(oldTsPath)) return new Set();
  const current = new Set<string>();
  const walk = (dir: string, prefix: string): void => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      const rel = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
      current.add(rel);
      if (entry.isDirectory()) walk(path.join(dir, entry.name), rel);
    }
  };
  walk(oldTsPath, '');
  // Every ancestor of a new path stays, so non-empty directories are never removed.
  const keep = new Set<string>();
  for (const file of Object.keys(payload)) {
    for (let sub = file; sub !== '' && sub !== '.'; sub = path.dirname(sub)) keep.add(sub);
  }
  return new Set([...current].filter((p) => !keep.has(p)));
}

/** os.MkdirTemp(dir, "..2006_01_02_15_04_05.") : Go appends a random decimal string. */
function newTimestampDir(targetDir: string): string {
  const d = new Date();
  const pad = (n: number, w = 2) => String(n).padStart(w, '0');
  const stamp = `..${d.getUTCFullYear()}_${pad(d.getUTCMonth() + 1)}_${pad(d.getUTCDate())}_${pad(d.getUTCHours())}_${pad(d.getUTCMinutes())}_${pad(d.getUTCSeconds())}.`;
  for (;;) {
    const dir = path.join(targetDir, `${stamp}${randomInt(0, 2 ** 32 - 1)}`);
    try {
      // MkdirTemp makes it 0700; kubelet chmods it 0755 only after: another UID can meet it closed.
      fs.mkdirSync(dir, { mode: 0o700 });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'EEXIST') continue;
      throw error;
    }
    fs.chmodSync(dir, 0o755);
    return dir;
  }
}

// --- payloads (MakePayload) ------------------------------------------------------------------

export interface KeyToPath {
  readonly key: string;
  readonly path: string;
  readonly mode?: number;
}

export interface VolumeSourceOptions {
  readonly items?: readonly KeyToPath[];
  /** kubelet's default is 0644 (ConfigMap and Secret alike). */
  readonly defaultMode?: number;
  readonly optional?: boolean;
}

export interface ConfigMapLike {
  readonly data?: Readonly<Record<string, string>>;
  /** base64, as the API returns it */
  readonly binaryData?: Readonly<Record<string, string>>;
}

export interface SecretLike {
  /** base64, as the API returns it */
  readonly data?: Readonly<Record<string, string>>;
}

export const DEFAULT_MODE = 0o644;

/** configmap.MakePayload: data as UTF-8, binaryData decoded; items select keys and paths. */
export function configMapPayload(cm: ConfigMapLike, options: VolumeSourceOptions = {}): Payload {
  const lookup = (key: string): Uint8Array | undefined => {
    const text = cm.data?.[key];
    if (text !== undefined) return Buffer.from(text, 'utf8');
    const binary = cm.binaryData?.[key];
    return binary === undefined ? undefined : Buffer.from(binary, 'base64');
  };
  const keys = [...Object.keys(cm.data ?? {}), ...Object.keys(cm.binaryData ?? {})];
  return makePayload(keys, lookup, options, 'configmap references non-existent config key');
}

/** secret.MakePayload: data decoded from base64; items select keys and paths. */
export function secretPayload(secret: SecretLike, options: VolumeSourceOptions = {}): Payload {
  const lookup = (key: string): Uint8Array | undefined => {
    const b64 = secret.data?.[key];
    return b64 === undefined ? undefined : Buffer.from(b64, 'base64');
  };
  return makePayload(Object.keys(secret.data ?? {}), lookup, options, 'references non-existent secret key');
}

function makePayload(
  keys: readonly string[],
  lookup: (key: string) => Uint8Array | undefined,
  options: VolumeSourceOptions,
  missingKeyMessage: string,
): Payload {
  const defaultMode = options.defaultMode ?? DEFAULT_MODE;
  const payload: Record<string, FileProjection> = {};
  if (!options.items || options.items.length === 0) {
    for (const key of keys) payload[key] = { data: lookup(key) as Uint8Array, mode: defaultMode };
    return payload;
  }
  for (const item of options.items) {
    const data = lookup(item.key);
    if (data === undefined) {
      if (options.optional) continue;
      throw new Error(`${missingKeyMessage}: ${item.key}`);
    }
    payload[item.path] = { data, mode: item.mode ?? defaultMode };
  }
  return payload;
}

/**
 * A `subPath` mount: kubelet bind-mounts the one file current at container start. Inside the
 * container it is a plain file with no `..data` beside it, and kubelet never updates it.
 */
export function writeSubPathFile(file: string, projection: FileProjection): void {
  fs.mkdirSync(path.dirname(file), { recursive: true });
  fs.writeFileSync(file, projection.data, { mode: projection.mode });
  fs.chmodSync(file, projection.mode);
}
