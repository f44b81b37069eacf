import type { ResolvedBaseUrl } from './api/base-url.js';
import type { AuthScheme, Credentials } from './api/credentials.js';
import type { Service } from './api/service.js';
import type { StopReason } from './errors.js';
import type { Clock } from './util/clock.js';

export type { AuthScheme };

/** A stream a command writes to: the process's stdout or stderr, or a buffer in a test. */
export interface Out {
  write(text: string | Uint8Array): unknown;
  isTTY?: boolean;
  /** A terminal's width. */
  columns?: number;
  /** Bytes written but not yet taken by the reader (a pipe nobody reads fills up). */
  writableLength?: number;
  once?(event: 'drain', listener: () => void): unknown;
}

export interface GlobalOptions {
  baseUrl?: string;
  auth?: AuthScheme;
  json: boolean;
  verbose: boolean;
  timeoutMs: number;
  color: boolean;
}

/**
 * What a command needs from the outside world, passed in rather than read
 * from `process`, so commands can be driven with other streams and variables.
 */
export interface Context {
  env: Record<string, string | undefined>;
  stdout: Out;
  stderr: Out;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  global: GlobalOptions;
  /** Resolves when the user presses Ctrl-C, the process is told to stop, or stdout is closed by its reader (long-running commands only). */
  interrupted: Promise<StopReason>;
  /** What to tell the user if stdout closes before everything was printed (e.g. how to recover a secret). */
  setRecoveryHint(hint: string): void;
  /** Whether the user gave this option (by its camel-case name), rather than it taking its default. */
  given(option: string): boolean;
  /** The clocks: the wall clock and a monotonic one. Tests pass their own. */
  clock: Clock;
  /** Builds the service client in place of the usual one (src/commands/shared.ts, serviceFor), for tests. */
  serviceFactory?: (ctx: Context) => Promise<{ service: Service; base: ResolvedBaseUrl; credentials: Credentials }>;
  /** The first delay before a retry of a request to the service (default 250 ms): a test passes a short one. */
  retryBaseMs?: number;
}

/** A command's run function: the context first, then commander's arguments (positionals, then options). */
// biome-ignore lint/suspicious/noExplicitAny: commander hands an action its arguments untyped; each run function types its own
export type Run = (ctx: Context, ...args: any[]) => Promise<void>;
/** Wraps a run function as commander's action: it builds the context from the parsed global flags. */
export type Act = (run: Run, options?: { longRunning?: boolean }) => (...args: unknown[]) => Promise<void>;

export function line(out: Out, text = ''): void {
  out.write(text.endsWith('\n') ? text : `${text}\n`);
}
