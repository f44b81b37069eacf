import { chmodSync, mkdirSync } from 'node:fs';
import envPaths from 'env-paths';

/** The store's folder: `WXHOOKS_CONFIG_DIR`, else the platform's config folder. */
export function configDir(env: Record<string, string | undefined>): string {
  return env.WXHOOKS_CONFIG_DIR || envPaths('wxhooks', { suffix: '' }).config;
}

/** Creates the folder if needed, and keeps it private (0700). */
export function ensurePrivateDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  if (process.platform !== 'win32') chmodSync(dir, 0o700);
}
