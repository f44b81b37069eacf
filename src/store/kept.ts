import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir } from './paths.js';

/**
 * A value wxhooks makes once and keeps in the store folder (a file of its own, 0600): the emulator's
 * key, the inspector's token. Read when it is there (and `fresh` is not asked), else made and kept; if
 * it cannot be kept, it is still used, and `kept` says so.
 */
export async function keptValue(dir: string, name: string, make: () => string, fresh = false): Promise<{ value: string; kept: boolean; problem?: string }> {
  const file = join(dir, name);
  if (!fresh) {
    try {
      const value = (JSON.parse(await readFile(file, 'utf8')) as { value?: unknown }).value;
      if (typeof value === 'string' && value) return { value, kept: true };
    } catch {
      // none yet, or not ours: a new one
    }
  }
  const value = make();
  try {
    ensurePrivateDir(dir);
    await writeFileAtomic(file, `${JSON.stringify({ value })}\n`);
    return { value, kept: true };
  } catch (err) {
    return { value, kept: false, problem: (err as Error).message };
  }
}
