import { mkdirSync, statSync } from 'node:fs';
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
export const STORE_HINT = `Fix it, or set WXHOOKS_CONFIG_DIR to a folder you can write (unset, it is ${defaultConfigDir()}).`;

/**
 * The settings file could not be read (a file-system error) or parsed (a SyntaxError): a usage error
 * (exit 2) that names it. Used by `config` (through conf) and by every command that reads `base-url`.
 */
export function settingsFileError(file: string, err: unknown): UsageError {
  if (err instanceof SyntaxError) {
    return new UsageError(`The settings file ${file} is damaged (${jsonProblem(err)}).`, {
      hint: 'Fix it, or remove it and set what you need again with `wxhooks config set`; --base-url and WX_BASE_URL work without it.',
    });
  }
  return new UsageError(`Cannot use the settings file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
}

/**
 * Creates the store folder if it is not there, private (0700). A folder that is already there keeps its
 * mode: the user may have named a shared one (WXHOOKS_CONFIG_DIR=/tmp), whose sticky or setgid bit
 * must not be taken away. A usage error (exit 2) if it cannot be used.
 */
export function ensurePrivateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (err) {
    throw new UsageError(`Cannot use ${dir}, the folder wxhooks keeps its settings, secrets and processed pairs in: ${fsReason(err)}.`, {
      hint: STORE_HINT,
      cause: err,
    });
  }
}

/**
 * Whether secrets may be kept in `dir`. A folder others cannot read: yes. One they can read (they can see
 * which webhooks have a secret, though not the 0600 file's content): yes, with a warning (returned),
 * only if it is the user's own and no one else can write to it (else another user could replace the file,
 * or the lock). Otherwise a usage error (exit 2): secrets are not stored there.
 */
export function secretFolderWarning(dir: string): string | undefined {
  if (process.platform === 'win32') return undefined;
  let st;
  try {
    st = statSync(dir);
  } catch {
    return undefined; // not there yet: it is created private
  }
  const othersRead = (st.mode & 0o044) !== 0;
  if (!othersRead) return undefined;
  const own = typeof process.getuid !== 'function' || st.uid === process.getuid();
  const othersWrite = (st.mode & 0o022) !== 0;
  if (own && !othersWrite) {
    return `${dir} can be read by other users (mode ${(st.mode & 0o777).toString(8)}): they can see which webhooks have a stored secret, though not the secrets (chmod 700 ${dir} to keep even that private).`;
  }
  throw new UsageError(
    `Secrets are not stored in ${dir}: ${own ? 'other users can write to it' : 'it belongs to another user'} (mode ${(st.mode & 0o7777).toString(8)}), so they could read or replace what is kept there.`,
    { hint: `Point WXHOOKS_CONFIG_DIR at a folder of your own that only you can read, or leave it unset (${defaultConfigDir()}).` },
  );
}
