import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { eachLine } from '../../scripts/harness.js';
import { BIN, cleanEnv, tempDir } from './cli.js';

export interface Running {
  child: ChildProcessWithoutNullStreams;
  lines: string[];
  stderr: () => string;
  /** Resolves with the first stdout line matching, parsed as JSON when it is. */
  waitFor<T = Record<string, unknown>>(predicate: (value: T) => boolean, timeoutMs?: number): Promise<T>;
  exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
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
