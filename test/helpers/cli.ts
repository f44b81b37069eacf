import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { Readable } from 'node:stream';

export const BIN = resolve(import.meta.dirname, '../../bin/wxhooks.js');

export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
  ms: number;
}

export interface CliOptions {
  env?: Record<string, string | undefined>;
  stdin?: string | Buffer;
  timeoutMs?: number;
  /** Run the built binary as a process of its own (signals, stdin and stdout as pipes, the exit itself): where the process is the point. */
  spawn?: boolean;
  /** In this process: the first delay before a retry of a request to the service (default 250 ms). */
  retryBaseMs?: number;
}

/** A new folder under the run's temporary root (removed when the run ends; see run-folder.ts). */
export function tempDir(prefix = 'wxhooks-test-'): string {
  return mkdtempSync(join(process.env.WXHOOKS_TEST_TMP ?? tmpdir(), prefix));
}

/** The environment a test starts from: the machine's, without anything of ours or a proxy. */
export function cleanEnv(extra: Record<string, string | undefined> = {}): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (v === undefined) continue;
    if (/^(WX_|WXHOOKS_)/.test(k) || /_proxy$/i.test(k) || k === 'FORCE_COLOR' || k === 'NO_COLOR') continue;
    env[k] = v;
  }
  for (const [k, v] of Object.entries(extra)) {
    if (v === undefined) delete env[k];
    else env[k] = v;
  }
  return env;
}

/**
 * Runs the CLI and collects what it printed: in this process by default (main() with buffers for its
 * streams: the same code, without the cost of a process), or the built binary with `spawn`.
 */
export async function runCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  if (options.spawn) return spawnCli(args, options);
  const started = Date.now();
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...options.env });
  const { main } = await import('../../src/cli.js');
  const out = { text: '', write: (chunk: string | Uint8Array) => (out.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')) };
  const err = { text: '', write: (chunk: string | Uint8Array) => (err.text += typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8')) };
  const stdin = Readable.from(options.stdin === undefined ? [] : [Buffer.from(options.stdin)]) as NodeJS.ReadableStream;
  const code = await main(['node', 'wxhooks', ...args], { env, stdout: out, stderr: err, stdin, interrupted: new Promise(() => undefined), retryBaseMs: options.retryBaseMs });
  return { code, stdout: out.text, stderr: err.text, ms: Date.now() - started };
}

/** Runs the built binary, as a user would, and collects what it printed. */
export function spawnCli(args: string[], options: CliOptions = {}): Promise<CliResult> {
  const started = Date.now();
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...options.env });
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`wxhooks ${args.join(' ')} did not finish within ${options.timeoutMs ?? 20_000} ms\nstdout: ${stdout}\nstderr: ${stderr}`));
    }, options.timeoutMs ?? 20_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolvePromise({ code, stdout, stderr, ms: Date.now() - started });
    });
    child.stdin.on('error', () => undefined);
    if (options.stdin !== undefined) child.stdin.end(options.stdin);
    else child.stdin.end();
  });
}

/**
 * Runs the CLI on a pseudo-terminal (through python3's pty module): once it has shown `prompt`, `typed`
 * is typed. `shown` is everything the terminal displayed, echo included.
 */
export function runInTerminal(args: string[], prompt: string, typed: string, options: CliOptions = {}): Promise<{ code: number | null; shown: string }> & { prompted: Promise<void> } {
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-'), ...options.env });
  const script = resolve(import.meta.dirname, 'terminal.py');
  let onPrompt: () => void = () => undefined;
  const prompted = new Promise<void>((r) => (onPrompt = r));
  const done = new Promise<{ code: number | null; shown: string }>((resolvePromise, reject) => {
    const child = spawn('python3', [script, prompt, Buffer.from(typed).toString('hex'), process.execPath, BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let shown = '';
    let errors = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (shown += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => {
      errors += d;
      if (errors.includes('prompted\n')) {
        errors = errors.replace('prompted\n', '');
        onPrompt();
      }
    });
    child.on('error', reject);
    child.on('close', (code) => (errors ? reject(new Error(`terminal.py: ${errors}`)) : resolvePromise({ code, shown })));
  });
  return Object.assign(done, { prompted });
}
