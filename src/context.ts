/**
 * What a command needs from the outside world, passed in rather than read
 * from `process`, so commands can be driven with other streams and variables.
 */
export interface Out {
  write(text: string | Uint8Array): unknown;
  isTTY?: boolean;
}

export type AuthScheme = 'bearer' | 'basic';

export interface GlobalOptions {
  baseUrl?: string;
  auth?: AuthScheme;
  json: boolean;
  verbose: boolean;
  timeoutMs: number;
  color: boolean;
}

export interface Context {
  env: Record<string, string | undefined>;
  stdout: Out;
  stderr: Out;
  stdin: NodeJS.ReadableStream & { isTTY?: boolean };
  global: GlobalOptions;
  /** Resolves with the signal when the user presses Ctrl-C or the process is told to stop (long-running commands only). */
  interrupted: Promise<NodeJS.Signals>;
  /** What to tell the user if stdout closes before everything was printed (e.g. how to recover a secret). */
  setRecoveryHint(hint: string): void;
}

export function line(out: Out, text = ''): void {
  out.write(text.endsWith('\n') ? text : `${text}\n`);
}
