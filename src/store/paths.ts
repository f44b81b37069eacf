import { chmodSync, mkdirSync } from 'node:fs';
import envPaths from 'env-paths';
import { UsageError } from '../errors.js';
import { fsReason } from '../util/files.js';

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
    return new UsageError(`The settings file ${file} is damaged (${err.message}).`, {
      hint: 'Fix it, or remove it and set what you need again with `wxhooks config set`; --base-url and WX_BASE_URL work without it.',
    });
  }
  return new UsageError(`Cannot use the settings file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
}

/** Creates the folder if needed, and keeps it private (0700); a usage error (exit 2) if it cannot be used. */
export function ensurePrivateDir(dir: string): void {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    if (process.platform !== 'win32') chmodSync(dir, 0o700);
  } catch (err) {
    throw new UsageError(`Cannot use ${dir}, the folder wxhooks keeps its settings, secrets and processed pairs in: ${fsReason(err)}.`, {
      hint: STORE_HINT,
      cause: err,
    });
  }
}
