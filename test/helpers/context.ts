import { Readable } from 'node:stream';
import { main, parseArgs, type Io } from '../../src/cli.js';
import type { Context, Out } from '../../src/context.js';
import type { StopReason } from '../../src/errors.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
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
  /** stdin is a terminal. */
  stdinTTY?: boolean;
  /** The clocks (default: the machine's). */
  clock?: Clock;
  /** Resolves to stop a long-running command, as a signal or a closed stdout would. */
  interrupted?: Promise<StopReason>;
  /** Builds the service client in place of the usual one (see Context). */
  serviceFactory?: Context['serviceFactory'];
}

/** The I/O of an in-process run: buffers for stdout and stderr, the given variables (and a store folder of its own). */
export function testIo(options: TestOptions = {}): Io & { stdout: Buffered; stderr: Buffered } {
  const stdin = Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin)]) as NodeJS.ReadableStream & { isTTY?: boolean };
  if (options.stdinTTY) stdin.isTTY = true;
  return {
    env: cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...options.env }),
    stdout: buffered(options.tty),
    stderr: buffered(options.tty),
    stdin,
    interrupted: options.interrupted ?? new Promise(() => undefined),
    clock: options.clock,
    serviceFactory: options.serviceFactory,
    retryBaseMs: 5,
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
    interrupted: options.interrupted ?? new Promise(() => undefined),
    setRecoveryHint: () => undefined,
    given: () => false,
    clock: options.clock ?? systemClock,
    retryBaseMs: 5,
  };
}

/** A long-running command (listen, emulator) run in this process: its output as it comes, and a way to stop it as a signal would. */
export interface InProcessRun {
  io: ReturnType<typeof testIo>;
  /** stdout's lines so far, each parsed as JSON when it is. */
  lines(): unknown[];
  /** The first stdout line (parsed) that `match` accepts, as soon as it is written; rejects if the command ends first. */
  waitFor<T = Record<string, unknown>>(match: (value: T) => boolean): Promise<T>;
  /** Resolves once stderr holds `text`; rejects if the command ends first. */
  waitForStderr(text: string): Promise<void>;
  /** Resolves with the exit code when the command ends. */
  done: Promise<number>;
  /** Stops it (SIGINT unless told), and resolves with its exit code. */
  stop(why?: StopReason): Promise<number>;
}

export function startInProcess(args: string[], options: TestOptions = {}): InProcessRun {
  let stop: (why: StopReason) => void = () => undefined;
  const interrupted = new Promise<StopReason>((resolve) => (stop = resolve));
  const io = testIo({ ...options, interrupted });
  const wakers = new Set<() => void>();
  for (const out of [io.stdout, io.stderr]) {
    const write = out.write;
    out.write = (chunk) => {
      const r = write(chunk);
      for (const wake of wakers) wake();
      return r;
    };
  }
  let ended = false;
  const done = main(['node', 'wxhooks', ...args], io).finally(() => {
    ended = true;
    for (const wake of wakers) wake();
  });
  const lines = () =>
    io.stdout.text
      .split('\n')
      .filter(Boolean)
      .map((l) => {
        try {
          return JSON.parse(l) as unknown;
        } catch {
          return l;
        }
      });
  return {
    io,
    lines,
    done,
    waitFor<T>(match: (value: T) => boolean): Promise<T> {
      return new Promise((resolve, reject) => {
        const look = () => {
          const found = lines().find((l) => match(l as T));
          if (found !== undefined) {
            wakers.delete(look);
            resolve(found as T);
          } else if (ended) {
            wakers.delete(look);
            reject(new Error(`ended before the line came\nstdout: ${io.stdout.text}\nstderr: ${io.stderr.text}`));
          }
        };
        wakers.add(look);
        look();
      });
    },
    waitForStderr(text: string): Promise<void> {
      return new Promise((resolve, reject) => {
        const look = () => {
          if (io.stderr.text.includes(text)) {
            wakers.delete(look);
            resolve();
          } else if (ended) {
            wakers.delete(look);
            reject(new Error(`ended before stderr said "${text}"\nstdout: ${io.stdout.text}\nstderr: ${io.stderr.text}`));
          }
        };
        wakers.add(look);
        look();
      });
    },
    stop(why: StopReason = 'SIGINT') {
      stop(why);
      return done;
    },
  };
}
