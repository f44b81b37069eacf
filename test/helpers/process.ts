import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { Readable } from 'node:stream';
import { eachLine } from '../../scripts/harness.js';
import type { StopReason } from '../../src/errors.js';
import type { Clock } from '../../src/util/clock.js';
import { BIN, cleanEnv, tempDir } from './cli.js';

/** A long-running command (listen, the emulator, relay serve), spawned or in this process: its output as it comes. */
export interface Cli {
  /** stdout's lines so far, without their newlines. */
  lines: string[];
  stderr: () => string;
  /** Resolves with the first stdout line matching, parsed as JSON when it is. */
  waitFor<T = Record<string, unknown>>(predicate: (value: T) => boolean, timeoutMs?: number): Promise<T>;
  exited: Promise<number | null>;
  /** Stops it as the signal would (in this process: as the binary does on a first Ctrl-C), and resolves with its exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  /** The process the command runs in: its own, or this one. */
  pid: number;
}

/** The built binary, spawned: where the process is the point (signals, exit, memory, stdout as a pipe). */
export interface Running extends Cli {
  child: ChildProcessWithoutNullStreams;
}

export interface StartOptions {
  /** Shell commands run first, in the same process (`ulimit -f 4`): the binary then runs under those limits. */
  limits?: string;
}

/** Starts the built binary as a long-running process (listen, emulator), reading its stdout line by line. */
export function startCli(args: string[], env: Record<string, string | undefined> = {}, stdin?: string, options: StartOptions = {}): Running {
  const command = options.limits ? (['bash', ['-c', `${options.limits}; exec "$@"`, 'bash', process.execPath, BIN, ...args]] as const) : ([process.execPath, [BIN, ...args]] as const);
  const child = spawn(command[0], [...command[1]], {
    env: cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...env }),
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let err = '';
  const waiters: (() => void)[] = [];
  eachLine(child.stdout, (line) => {
    lines.push(line);
    waiters.splice(0).forEach((w) => w());
  });
  child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
  child.stdin.on('error', () => undefined);
  if (stdin !== undefined) child.stdin.end(stdin);
  const exited = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      waiters.splice(0).forEach((w) => w());
      resolve(code);
    }),
  );
  const parse = (l: string) => {
    try {
      return JSON.parse(l) as unknown;
    } catch {
      return l;
    }
  };
  return {
    child,
    pid: child.pid!,
    lines,
    stderr: () => err,
    async waitFor<T>(predicate: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
      const deadline = Date.now() + timeoutMs;
      let seen = 0;
      for (;;) {
        for (; seen < lines.length; seen++) {
          const v = parse(lines[seen]!) as T;
          if (predicate(v)) return v;
        }
        if (child.exitCode !== null) throw new Error(`process exited (${child.exitCode}) before the expected line\nstdout: ${lines.join('\n')}\nstderr: ${err}`);
        if (Date.now() > deadline) throw new Error(`timed out waiting for a line\nstdout: ${lines.join('\n')}\nstderr: ${err}`);
        await new Promise<void>((resolve) => {
          waiters.push(resolve);
          setTimeout(resolve, 100);
        });
      }
    },
    exited,
    async stop(signal: NodeJS.Signals = 'SIGINT') {
      if (child.exitCode === null) child.kill(signal);
      return exited;
    },
  };
}

/** Parses a line as JSON when it is; else the line itself. */
function parsed(line: string): unknown {
  try {
    return JSON.parse(line) as unknown;
  } catch {
    return line;
  }
}

export interface InProcessOptions {
  /** The clocks the command runs on (default: the machine's). */
  clock?: Clock;
  /** stdout and stderr are terminals. */
  tty?: boolean;
}

/**
 * The same command as startCli, in this process: main() with buffers for its streams, the same code without
 * the cost of a process (most of a test's time was Node starting and loading the CLI). `stop(signal)` ends
 * it as the binary's first Ctrl-C (or SIGTERM, SIGHUP) does, with the same exit code.
 */
export function startCliInProcess(args: string[], env: Record<string, string | undefined> = {}, stdin?: string, options: InProcessOptions = {}): Cli {
  let interrupt: (why: StopReason) => void = () => undefined;
  const interrupted = new Promise<StopReason>((resolve) => (interrupt = resolve));
  const lines: string[] = [];
  let partial = '';
  let err = '';
  let ended = false;
  const wakers = new Set<() => void>();
  const wake = () => {
    for (const w of wakers) w();
  };
  const text = (chunk: string | Uint8Array) => (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
  const stdout = {
    isTTY: options.tty ?? false,
    write(chunk: string | Uint8Array) {
      partial += text(chunk);
      let nl: number;
      while ((nl = partial.indexOf('\n')) !== -1) {
        lines.push(partial.slice(0, nl));
        partial = partial.slice(nl + 1);
      }
      wake();
      return true;
    },
  };
  const stderr = {
    isTTY: options.tty ?? false,
    write(chunk: string | Uint8Array) {
      err += text(chunk);
      wake();
      return true;
    },
  };
  const input = Readable.from(stdin === undefined ? [] : [Buffer.from(stdin)]) as NodeJS.ReadableStream;
  const exited: Promise<number | null> = import('../../src/cli.js')
    .then(({ main }) => main(['node', 'wxhooks', ...args], { env: cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...env }), stdout, stderr, stdin: input, interrupted, clock: options.clock }))
    .finally(() => {
      if (partial) lines.push(partial);
      partial = '';
      ended = true;
      wake();
    });
  return {
    pid: process.pid,
    lines,
    stderr: () => err,
    waitFor<T>(predicate: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
      return new Promise<T>((resolve, reject) => {
        let seen = 0;
        const timer = setTimeout(() => done(() => reject(new Error(`timed out waiting for a line\nstdout: ${lines.join('\n')}\nstderr: ${err}`))), timeoutMs);
        const done = (settle: () => void) => {
          clearTimeout(timer);
          wakers.delete(look);
          settle();
        };
        const look = () => {
          for (; seen < lines.length; seen++) {
            const v = parsed(lines[seen]!) as T;
            if (predicate(v)) return done(() => resolve(v));
          }
          if (ended) done(() => reject(new Error(`the command ended before the expected line\nstdout: ${lines.join('\n')}\nstderr: ${err}`)));
        };
        wakers.add(look);
        look();
      });
    },
    exited,
    stop(signal: NodeJS.Signals = 'SIGINT') {
      interrupt(signal);
      return exited;
    },
  };
}
