import { join } from 'node:path';
import { writeFileAtomic } from '../util/files.js';
import { ensurePrivateDir } from './paths.js';
import { readPrivateFile } from './private-file.js';

/**
 * A value kept in the store folder, if it is there and the user's own (readPrivateFile: another user's
 * file there is refused, exit 2, never used); undefined if there is none, or it is damaged.
 */
export async function readKept(dir: string, name: string, warn?: (text: string) => void): Promise<string | undefined> {
  const bytes = await readPrivateFile(dir, name, { what: 'the kept value', sensitive: true, warn });
  if (!bytes) return undefined;
  try {
    const value = (JSON.parse(bytes.toString('utf8')) as { value?: unknown } | null)?.value;
    return typeof value === 'string' && value ? value : undefined;
  } catch {
    return undefined; // damaged: a new one
  }
}

/**
 * A value wxhooks makes once and keeps in the store folder (a file of its own, 0600): the emulator's
 * key, the inspector's token, the key `listen --save-dir` marks what it saves with. Read when it is there
 * (and `fresh` is not asked), else made and kept; if it cannot be kept, it is still used, and `kept` says
 * so. A file there that another user could have put there is refused (exit 2), never used.
 */
export async function keptValue(dir: string, name: string, make: () => string, fresh = false): Promise<{ value: string; kept: boolean; problem?: string; warning?: string }> {
  let warning: string | undefined;
  if (!fresh) {
    const value = await readKept(dir, name, (text) => (warning = text));
    if (value) return { value, kept: true, warning };
  }
  const value = make();
  try {
    ensurePrivateDir(dir);
    await writeFileAtomic(join(dir, name), `${JSON.stringify({ value })}\n`);
    return { value, kept: true };
  } catch (err) {
    return { value, kept: false, problem: (err as Error).message };
  }
}
