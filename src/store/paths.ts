import { mkdirSync, statSync, type Stats } from 'node:fs';
import envPaths from 'env-paths';
import { UsageError } from '../errors.js';
import { fsReason, jsonProblem } from '../util/files.js';

/** The platform's own folder for wxhooks' settings and secrets. */
export function defaultConfigDir(): string {
  return envPaths('wxhooks', { suffix: '' }).config;
}

/** The store's folder: `WXHOOKS_CONFIG_DIR`, else the platform's config folder. */
export function configDir(env: Record<string, string | undefined>): string {
  return env.WXHOOKS_CONFIG_DIR || defaultConfigDir();
}

/** The advice for a store folder, or a file in it, that cannot be used. */
export const STORE_HINT: string = `Fix it, or set WXHOOKS_CONFIG_DIR to a folder you can write (unset, it is ${defaultConfigDir()}).`;

/**
 * The settings file could not be read (a file-system error) or parsed (a SyntaxError): a usage error
 * (exit 2) that names it. Used by `config` and by every command that reads `base-url`.
 */
export function settingsFileError(file: string, err: unknown): UsageError {
  if (err instanceof SyntaxError) {
    return new UsageError(`The settings file ${file} is damaged (${err.message === 'not a JSON object' ? err.message : jsonProblem(err)}).`, {
      hint: 'Fix it, or remove it and set what you need again with `wxhooks config set`; --base-url and WX_BASE_URL work without it.',
    });
  }
  return new UsageError(`Cannot use the settings file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
}

/** Whether a file or folder of this owner is the user's own: theirs, or root's (who can change anything of theirs anyway). */
export function trustedOwner(uid: number): boolean {
  const me = process.getuid?.();
  return me === undefined || uid === me || uid === 0;
}

const modeText = (mode: number) => (mode & 0o7777).toString(8);

/**
 * Checks the store folder, if it is there, before any file in it is read or written: it must be the
 * user's own (or root's), and others may write to it only if it is sticky (as /tmp is: they may add
 * files of their own there, which are refused when read, but not replace ours). A usage error (exit 2)
 * otherwise. Returns whether the folder is there.
 */
export function checkStoreFolder(dir: string): boolean {
  let st: Stats;
  try {
    st = statSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw cannotUse(dir, err);
  }
  if (!st.isDirectory()) throw cannotUse(dir, Object.assign(new Error('not a folder'), { code: 'ENOTDIR' }));
  if (process.platform === 'win32') return true;
  if (!trustedOwner(st.uid)) {
    throw new UsageError(`The store folder ${dir} belongs to another user (uid ${st.uid}): what wxhooks would read there (settings, secrets, the inspector's token) could be theirs.`, {
      hint: `Point WXHOOKS_CONFIG_DIR at a folder of your own, or leave it unset (${defaultConfigDir()}).`,
    });
  }
  if ((st.mode & 0o022) !== 0 && (st.mode & 0o1000) === 0) {
    throw new UsageError(
      `Other users can write to the store folder ${dir} (mode ${modeText(st.mode)}), so they could put files of their own in place of wxhooks' (its settings, secrets, the inspector's token).`,
      {
        hint: `chmod 700 ${dir} (or at least chmod go-w), or point WXHOOKS_CONFIG_DIR at a folder of your own. A folder shared on purpose needs the sticky bit (chmod +t), as /tmp has.`,
      },
    );
  }
  return true;
}

function cannotUse(dir: string, err: unknown): UsageError {
  return new UsageError(`Cannot use ${dir}, the folder wxhooks keeps its settings, secrets and processed pairs in: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
}

/**
 * Creates the store folder if it is not there, private (0700). A folder that is already there keeps its
 * mode: the user may have named a shared one (WXHOOKS_CONFIG_DIR=/tmp), whose sticky or setgid bit
 * must not be taken away; it is checked (checkStoreFolder). A usage error (exit 2) if it cannot be used.
 */
export function ensurePrivateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw cannotUse(dir, err);
  }
  checkStoreFolder(dir);
}

/**
 * Whether secrets may be kept in `dir`, checked before the secret store is read or written. The folder
 * must be the user's own (or root's), and no one else may write to it, sticky or not (in a shared folder
 * others could take the lock, or put a file there before ours): otherwise a usage error (exit 2). One that
 * others can read (they can see which webhooks have a secret, though not the 0600 file's content) is
 * used, with a warning (returned).
 */
export function secretFolderWarning(dir: string): string | undefined {
  if (process.platform === 'win32') return undefined;
  let st: Stats;
  try {
    st = statSync(dir);
  } catch {
    return undefined; // not there yet: it is created private (or checkStoreFolder says why it cannot be used)
  }
  const own = trustedOwner(st.uid);
  if (!own || (st.mode & 0o022) !== 0) {
    throw new UsageError(
      `Secrets are not stored in ${dir}: ${own ? 'other users can write to it' : `it belongs to another user (uid ${st.uid})`} (mode ${modeText(st.mode)}), so they could read or replace what is kept there.`,
      { hint: `${own ? `chmod 700 ${dir}, or point` : 'Point'} WXHOOKS_CONFIG_DIR at a folder of your own that only you can write to, or leave it unset (${defaultConfigDir()}).` },
    );
  }
  if ((st.mode & 0o044) !== 0) {
    return `${dir} can be read by other users (mode ${modeText(st.mode)}): they can see which webhooks have a stored secret, though not the secrets (chmod 700 ${dir} to keep even that private).`;
  }
  return undefined;
}
