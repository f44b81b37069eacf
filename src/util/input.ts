import { UsageError } from '../errors.js';
import { jsonProblem, readInputFile } from './files.js';

/** All of standard input, byte for byte. */
export async function readStdinBytes(stdin: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  for await (const chunk of stdin) chunks.push(Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as string));
  return Buffer.concat(chunks);
}

/** All of standard input, as text. */
export async function readStdin(stdin: NodeJS.ReadableStream): Promise<string> {
  return (await readStdinBytes(stdin)).toString('utf8');
}

/** A file's text, or standard input for `-`. */
export async function readInput(stdin: NodeJS.ReadableStream, path: string, what: string): Promise<string> {
  if (path === '-') return readStdin(stdin);
  return (await readInputFile(path, what)).toString('utf8');
}

/** A file (or standard input for `-`) holding JSON, parsed; a usage error (exit 2) if it is not JSON. */
export async function readJsonInput(stdin: NodeJS.ReadableStream, path: string, what: string): Promise<unknown> {
  const text = await readInput(stdin, path, what);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new UsageError(`${what} "${path}" is ${jsonProblem(err)}.`);
  }
}
