import { mkdirSync } from 'node:fs';
import { join, resolve } from 'node:path';

/** Where the browser tests leave their screenshots (kept after the run, not committed). */
export const ARTIFACTS = resolve(import.meta.dirname, '../../artifacts');

export function artifact(name: string): string {
  mkdirSync(ARTIFACTS, { recursive: true });
  return join(ARTIFACTS, name);
}

export { launchBrowser } from '../../scripts/harness.js';
