import { readFile } from 'node:fs/promises';
import { UsageError } from '../errors.js';

/** A file the user named: its bytes, or a usage error (exit 2) that names it. */
export async function readInputFile(file: string, what: string): Promise<Buffer> {
  try {
    return await readFile(file);
  } catch (err) {
    throw new UsageError(`Cannot read ${what} "${file}": ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}.`);
  }
}
