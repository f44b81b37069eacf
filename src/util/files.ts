import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
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
