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
