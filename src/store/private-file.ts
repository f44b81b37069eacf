import type { Stats } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../errors.js';
import { FileRefusedError, fsReason, readRegularFile } from '../util/files.js';
import { checkStoreFolder, STORE_HINT, trustedOwner } from './paths.js';

/** The most a file of the store folder may hold: they are small (a few KiB; secrets.json ~200 bytes a webhook). */
export const STORE_FILE_LIMIT: number = 16 * 1024 * 1024;

/**
 * Why a file in the store folder is not the user's to trust, in words, or undefined: it belongs to
 * another user (root aside), or others can write to it. Checked on the opened file's stats (fstat).
 * Exported for every reader of the store folder (the processed pairs too).
 */
export function storeFileProblem(st: Stats): string | undefined {
  if (process.platform === 'win32') return undefined;
  if (!trustedOwner(st.uid)) return `it belongs to another user (uid ${st.uid}), so wxhooks did not write it`;
  if ((st.mode & 0o022) !== 0) return `other users can write to it (mode ${(st.mode & 0o777).toString(8)})`;
  return undefined;
}

export interface PrivateFileOptions {
  /** What the file is, for messages: "the secret store", "the settings file". */
  what: string;
  /** It holds a secret (a webhook's, a token, a key): that others can read it is a warning. */
  sensitive?: boolean;
  /** Where a warning goes (the core never prints). */
  warn?: (text: string) => void;
}

/**
 * A file of the store folder, read only if nobody else could have put it there: the folder is checked
 * first (checkStoreFolder: the user's own, and not writable by others unless sticky), then the file is
 * opened without following a symbolic link and without blocking, and the opened file (fstat, not the
 * path) must be a regular file of the user's own (or root's) that no one else can write to. Its bytes,
 * or undefined when it is not there; anything else is a usage error (exit 2) that says what to do.
 * Every reader of the store folder goes through here: secrets, settings, the kept values (inspector
 * token, emulator key, save-dir key).
 */
export async function readPrivateFile(dir: string, name: string, o: PrivateFileOptions): Promise<Buffer | undefined> {
  if (!checkStoreFolder(dir)) return undefined;
  const file = join(dir, name);
  try {
    const { data, stats } = await readRegularFile(file, { maxBytes: STORE_FILE_LIMIT, what: 'a file of the store', check: storeFileProblem });
    if (o.sensitive && process.platform !== 'win32' && (stats.mode & 0o044) !== 0) {
      o.warn?.(`${o.what} ${file} can be read by other users (mode ${(stats.mode & 0o777).toString(8)}): chmod 600 ${file}`);
    }
    return data;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    if (err instanceof FileRefusedError) throw refused(o.what, file, dir, err);
    throw new UsageError(`Cannot read ${o.what} ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
  }
}

function refused(what: string, file: string, dir: string, err: FileRefusedError): UsageError {
  const hint = {
    link: `The store folder holds only wxhooks' own files: replace the link with the file it points to, or remove it (rm ${file}).`,
    not_regular: `Remove it (wxhooks makes its own file again when it needs one).`,
    too_large: `It is not a file wxhooks wrote: move it aside.`,
    not_trusted: err.why.startsWith('it belongs')
      ? `Look at it, then remove it (rm ${file}): wxhooks makes its own again. If other users can add files to ${dir}, point WXHOOKS_CONFIG_DIR at a folder of your own.`
      : `Check what is in it, then chmod go-w ${file} (wxhooks writes its files 0600).`,
  }[err.kind];
  return new UsageError(`Not reading ${what} ${file}: ${err.why}.`, { hint });
}
