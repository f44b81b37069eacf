import { randomBytes } from 'node:crypto';
import { closeSync, constants, fsyncSync, linkSync, openSync, renameSync, rmSync, writeSync, type Stats } from 'node:fs';
import { type FileHandle, link, mkdir, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { UsageError } from '../errors.js';

const REASONS: Record<string, string> = {
  ENOENT: 'it does not exist',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EEXIST: 'it already exists',
  EISDIR: 'it is a folder',
  EACCES: 'permission denied',
  EPERM: 'not permitted',
  EROFS: 'the file system is read-only',
  ENOSPC: 'the disk is full',
  EDQUOT: 'the disk quota is used up',
  ENAMETOOLONG: 'the path is too long',
  ELOOP: 'too many symbolic links',
};

/** What a file-system error means, in a few words: "permission denied (EACCES)". */
export function fsReason(err: unknown): string {
  const code = (err as NodeJS.ErrnoException | undefined)?.code;
  if (code && REASONS[code]) return `${REASONS[code]} (${code})`;
  return code ?? (err instanceof Error ? err.message : String(err));
}

/**
 * What is wrong with a file that is not valid JSON, without quoting it: JSON.parse's own message shows
 * the file's first bytes, and through a symbolic link the file could be any file on the machine.
 */
export function jsonProblem(err: unknown): string {
  const at = /position (\d+)/.exec((err as Error).message);
  return at ? `not valid JSON at byte ${at[1]}` : 'not valid JSON';
}

/** Why a file was not read: not a regular file, a symbolic link not followed, or over the size allowed. */
export class FileRefusedError extends Error {
  constructor(
    readonly file: string,
    /** In words, for a message: "a FIFO, not a regular file". */
    readonly why: string,
    readonly kind: 'link' | 'not_regular' | 'too_large' | 'not_trusted',
  ) {
    super(`${file}: ${why}`);
    this.name = 'FileRefusedError';
  }
}

/** What a file that is not a regular file is, in words. */
function kindOf(st: Stats): string {
  if (st.isDirectory()) return 'a folder';
  if (st.isFIFO()) return 'a FIFO (a named pipe)';
  if (st.isSocket()) return 'a socket';
  if (st.isCharacterDevice() || st.isBlockDevice()) return 'a device';
  return 'a special file';
}

export interface RegularFileOptions {
  /** The most bytes read: a larger file is refused before any is read. */
  maxBytes: number;
  /** What the limit is, for the message ("a saved delivery"). */
  what: string;
  /** Follow a symbolic link at `file` (default false: O_NOFOLLOW, the link is refused). */
  follow?: boolean;
  /** Refuses the opened file on its stats (its owner, its mode): returns why, in words, or undefined. */
  check?: (st: Stats) => string | undefined;
}

const MiB = 1024 * 1024;
const mib = (n: number) => `${n >= MiB ? Math.round(n / MiB) : (n / MiB).toFixed(1)} MiB`;

/**
 * A file's bytes, read only if it is a regular file of at most `maxBytes`. It is opened without
 * blocking (a FIFO would hang the open, and the process with it) and, unless `follow`, without
 * following a symbolic link (O_NOFOLLOW); what is checked is the opened file (fstat), not the path, so
 * nothing can be put in its place between the check and the read. A refusal is a FileRefusedError;
 * other errors (ENOENT...) are thrown as they are.
 */
export async function readRegularFile(file: string, o: RegularFileOptions): Promise<{ data: Buffer; stats: Stats }> {
  const flags = constants.O_RDONLY | (constants.O_NONBLOCK ?? 0) | (o.follow ? 0 : (constants.O_NOFOLLOW ?? 0));
  let handle: FileHandle;
  try {
    handle = await open(file, flags);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!o.follow && (code === 'ELOOP' || code === 'EMLINK')) throw new FileRefusedError(file, 'a symbolic link, which is not followed', 'link');
    if (code === 'ENXIO') throw new FileRefusedError(file, 'a socket, not a regular file', 'not_regular');
    if (code === 'EISDIR') throw new FileRefusedError(file, 'a folder', 'not_regular');
    throw err;
  }
  try {
    const stats = await handle.stat();
    if (!stats.isFile()) throw new FileRefusedError(file, `${kindOf(stats)}, not a regular file`, 'not_regular');
    const problem = o.check?.(stats);
    if (problem) throw new FileRefusedError(file, problem, 'not_trusted');
    if (stats.size > o.maxBytes) throw new FileRefusedError(file, `${mib(stats.size)}, over the ${mib(o.maxBytes)} ${o.what} may be`, 'too_large');
    // read to the end, but never past the limit: the file may grow after the fstat
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const room = o.maxBytes + 1 - total;
      const buffer = Buffer.allocUnsafe(Math.min(room, Math.max(stats.size - total, 64 * 1024)));
      const { bytesRead } = await handle.read(buffer, 0, buffer.length, null);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
      if (total > o.maxBytes) throw new FileRefusedError(file, `over the ${mib(o.maxBytes)} ${o.what} may be`, 'too_large');
    }
    return { data: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total), stats };
  } finally {
    await handle.close();
  }
}

/** A file the user named: its bytes, or a usage error (exit 2) that names it. */
export async function readInputFile(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new UsageError(`Cannot read ${what} "${file}": ${fsReason(err)}.`);
  }
}

let probes = 0;

/** Creates `dir` if needed and writes (then removes) a file in it, to prove it writable; throws the file system's error. */
export async function proveWritable(dir: string, mode = 0o777): Promise<void> {
  await mkdir(dir, { recursive: true, mode });
  const probe = join(dir, `.wxhooks-write-test-${process.pid}-${++probes}`);
  await writeFile(probe, '', { mode: 0o600 });
  await rm(probe, { force: true });
}

/** A folder the user named for wxhooks to write into: proved writable, else a usage error (exit 2). */
export async function ensureWritableDir(dir: string, what: string): Promise<void> {
  try {
    await proveWritable(dir);
  } catch (err) {
    // mkdir's EEXIST, with `recursive`, means the path is there and is not a folder
    const reason = (err as NodeJS.ErrnoException).code === 'EEXIST' ? 'it is a file, not a folder' : fsReason(err);
    throw new UsageError(`Cannot write to ${what} "${dir}": ${reason}.`);
  }
}

export interface WriteOptions {
  /** The new file's mode (default 0600). */
  mode?: number;
  /** Sync the file, and the folder after the rename, to the disk (default true). */
  sync?: boolean;
}

/** The temporary name a file is written under, beside it, before it takes its own name. */
const temporaryName = (file: string) => `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;

/** Writes a temporary file beside `file`, whole (and synced unless told not to); returns its path. */
async function writeTemporary(file: string, data: string | Buffer | Iterable<string>, options: WriteOptions): Promise<string> {
  const tmp = temporaryName(file);
  const handle = await open(tmp, 'wx', options.mode ?? 0o600);
  try {
    if (typeof data === 'string' || Buffer.isBuffer(data)) await handle.writeFile(data);
    else {
      let chunk = '';
      for (const part of data) {
        chunk += part;
        if (chunk.length >= 64 * 1024) {
          await handle.writeFile(chunk);
          chunk = '';
        }
      }
      if (chunk) await handle.writeFile(chunk);
    }
    if (options.sync !== false) await handle.sync();
  } catch (err) {
    await handle.close();
    await rm(tmp, { force: true });
    throw err;
  }
  await handle.close();
  return tmp;
}

/** Makes a rename in `dir` durable (where the platform can open a folder). */
async function syncFolder(dir: string): Promise<void> {
  try {
    const handle = await open(dir, 'r');
    try {
      await handle.sync();
    } finally {
      await handle.close();
    }
  } catch {
    // Windows cannot open a folder; the rename is atomic all the same
  }
}

/**
 * Replaces `file` atomically: a temporary file beside it, written whole and synced, then renamed over
 * it. A crash at any moment leaves the old file whole or the new one whole, never a mix.
 */
export async function writeFileAtomic(file: string, data: string | Buffer | Iterable<string>, options: WriteOptions = {}): Promise<void> {
  const tmp = await writeTemporary(file, data, options);
  try {
    await rename(tmp, file);
  } catch (err) {
    await rm(tmp, { force: true });
    throw err;
  }
  if (options.sync !== false) await syncFolder(dirname(file));
}

export interface WriteSyncOptions extends WriteOptions {
  /** Only where no file is (a link, which fails with EEXIST rather than replace one); default: replace what is there. */
  exclusive?: boolean;
}

/**
 * writeFileAtomic for the moments that cannot wait for the event loop (a lock's owner file, written while
 * a guard is held for microseconds; a store's file before it is opened): the same temporary file beside
 * `file`, then renamed over it, or with `exclusive` linked where nothing is.
 */
export function writeFileAtomicSync(file: string, data: string | Buffer, options: WriteSyncOptions = {}): void {
  const tmp = temporaryName(file);
  try {
    const fd = openSync(tmp, 'wx', options.mode ?? 0o600);
    try {
      const bytes = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      for (let done = 0; done < bytes.length; ) done += writeSync(fd, bytes, done, bytes.length - done);
      if (options.sync !== false) fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    if (options.exclusive) linkSync(tmp, file);
    else renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
  if (options.sync !== false) syncFolderSync(dirname(file));
}

/** syncFolder, synchronously. */
function syncFolderSync(dir: string): void {
  try {
    const fd = openSync(dir, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
  } catch {
    // Windows cannot open a folder; the rename is atomic all the same
  }
}

/**
 * Creates a new file in `dir` named `name` + `ext`, or `name-2` + `ext`, `name-3` + `ext`... when
 * that is taken: never replaces a file, and the file appears only once written whole (a link, which
 * fails rather than replace). Returns its path.
 */
export async function createNewFile(dir: string, name: string, ext: string, data: string | Buffer, options: WriteOptions = {}): Promise<string> {
  const tmp = await writeTemporary(join(dir, `${name}${ext}`), data, options);
  try {
    for (let n = 1; ; n++) {
      const file = join(dir, `${n === 1 ? name : `${name}-${n}`}${ext}`);
      try {
        await link(tmp, file);
        return file;
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code;
        if (code === 'EEXIST' && n < 10_000) continue;
        if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
        // a file system without hard links: created exclusively in place instead
        await writeFile(file, data, { flag: 'wx', mode: options.mode ?? 0o600 }).catch((e: NodeJS.ErrnoException) => {
          if (e.code !== 'EEXIST') throw e;
        });
        if (
          await readFile(file).then(
            (b) => b.equals(Buffer.from(data)),
            () => false,
          )
        )
          return file;
      }
    }
  } finally {
    await rm(tmp, { force: true });
  }
}

/**
 * Writes new files into one folder, all or none (the relay's deliveries of one moment): each a temporary
 * file beside its place, written whole (and synced unless told not to), then renamed into place, and the
 * folder synced once. If any of them fails, every one is removed again, temporaries included, and the
 * first error is thrown: a full disk leaves nothing behind.
 */
export async function writeFilesAtomic(dir: string, files: readonly (readonly [name: string, data: string | Buffer])[], options: WriteOptions = {}): Promise<void> {
  const written = await Promise.allSettled(files.map(([name, data]) => writeTemporary(join(dir, name), data, options)));
  const temporaries = written.flatMap((w) => (w.status === 'fulfilled' ? [w.value] : []));
  const failed = written.find((w) => w.status === 'rejected');
  if (failed) {
    await Promise.all(temporaries.map((tmp) => rm(tmp, { force: true })));
    throw failed.reason;
  }
  const renamed = await Promise.allSettled(files.map(([name], i) => rename(temporaries[i]!, join(dir, name))));
  const refused = renamed.find((r) => r.status === 'rejected');
  if (refused) {
    await Promise.all(files.map(([name], i) => Promise.all([rm(temporaries[i]!, { force: true }), renamed[i]!.status === 'fulfilled' ? rm(join(dir, name), { force: true }) : undefined])));
    throw refused.reason;
  }
  if (options.sync !== false) await syncFolder(dir);
}
