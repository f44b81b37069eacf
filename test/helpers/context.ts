import { Readable } from 'node:stream';
import { main, parseArgs, type Io } from '../../src/cli.js';
import type { Context, Out } from '../../src/context.js';
import { cleanEnv, tempDir } from './cli.js';

/** A stream that keeps what is written, and says it is a terminal when told to. */
export interface Buffered extends Out {
  text: string;
}

export function buffered(isTTY = false): Buffered {
  const out: Buffered = { text: '', isTTY, write: (chunk) => (out.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')) };
  return out;
}

export interface TestOptions {
  env?: Record<string, string | undefined>;
  /** What stdin holds (default: nothing, not a terminal). */
  stdin?: string;
  /** stdout and stderr are terminals. */
  tty?: boolean;
  /** The clock. */
  now?: () => number;
}

/** The I/O of an in-process run: buffers for stdout and stderr, the given variables (and a store folder of its own). */
export function testIo(options: TestOptions = {}): Io & { stdout: Buffered; stderr: Buffered } {
  const stdin = Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin)]) as NodeJS.ReadableStream & { isTTY?: boolean };
  return {
    env: cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), WXHOOKS_RETRY_BASE_MS: '5', ...options.env }),
    stdout: buffered(options.tty),
    stderr: buffered(options.tty),
    stdin,
    interrupted: new Promise(() => undefined),
    now: options.now,
  };
}

/** Runs the CLI in-process, as the binary would but without a process: the exit code and what it printed. */
export async function runInProcess(args: string[], options: TestOptions = {}): Promise<{ code: number; stdout: string; stderr: string }> {
  const io = testIo(options);
  const code = await main(['node', 'wxhooks', ...args], io);
  return { code, stdout: io.stdout.text, stderr: io.stderr.text };
}

/** What argv would run: the run function, and its arguments as parsed (positionals, then the options). */
export async function parsed(args: string[], options: TestOptions = {}) {
  return parseArgs(['node', 'wxhooks', ...args], testIo(options));
}

/** A command's context, for calling its runXxx directly. */
export function testContext(options: TestOptions & { json?: boolean; timeoutMs?: number } = {}): Context & { stdout: Buffered; stderr: Buffered } {
  const io = testIo(options);
  return {
    env: io.env,
    stdout: io.stdout,
    stderr: io.stderr,
    stdin: io.stdin,
    global: { json: Boolean(options.json), verbose: false, timeoutMs: options.timeoutMs ?? 5000, color: true },
    interrupted: new Promise(() => undefined),
    setRecoveryHint: () => undefined,
    given: () => false,
    now: options.now ?? Date.now,
  };
}
