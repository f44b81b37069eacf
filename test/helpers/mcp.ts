import type { ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { ReadBuffer, serializeMessage } from '@modelcontextprotocol/sdk/shared/stdio.js';
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js';
import type { JSONRPCMessage } from '@modelcontextprotocol/sdk/types.js';
import { BIN, cleanEnv } from './cli.js';

/** A `wxhooks mcp` process and the SDK's own client, over its stdin and stdout. */
export interface McpSession {
  client: Client;
  /** What the server wrote on stderr so far (its logs). */
  stderr(): string;
  /** Every tool's answer, as text, in the order they came (errors too). */
  answers: string[];
  /** The tools called. */
  called: Set<string>;
  /**
   * Calls a tool: whether it succeeded, and its answer (JSON; for one that holds content from outside,
   * the JSON between the session's marks, and `marked` true).
   */
  // biome-ignore lint/suspicious/noExplicitAny: a tool's JSON answer, read by each test in its own shape
  call(name: string, args?: Record<string, unknown>): Promise<{ ok: boolean; value: any; text: string; marked: boolean }>;
  /** How the server process ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Closes the client (and so the server's stdin); resolves with how the server ended. */
  close(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/**
 * The JSON of an answer that holds content from outside (src/mcp/answers.ts): what stands between the
 * session's opening and closing marks, each on a line of its own; undefined for an answer with none.
 */
export function unmarked(text: string): string | undefined {
  const found = /^.*\n<outside-data-([0-9a-f]{16})>\n([\s\S]*)\n<\/outside-data-\1>$/.exec(text);
  return found?.[2];
}

/** Starts the built binary's `wxhooks mcp ARGS` with exactly `env` (and the machine's PATH and HOME), and connects to it. */
export async function startMcp(args: string[], env: Record<string, string | undefined>): Promise<McpSession> {
  const transport = new StdioClientTransport({ command: process.execPath, args: [BIN, 'mcp', ...args], env: cleanEnv(env), stderr: 'pipe' });
  let err = '';
  transport.stderr!.on('data', (d: Buffer) => (err += d.toString('utf8')));
  const client = new Client({ name: 'wxhooks-test', version: '1.0.0' });
  try {
    await client.connect(transport);
  } catch (e) {
    throw new Error(`wxhooks mcp ${args.join(' ')} did not start: ${(e as Error).message}\nstderr: ${err}`);
  }
  // the SDK's transport keeps its process to itself: its exit code is what shows a clean stop
  const child = (transport as unknown as { _process: ChildProcess })._process;
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve({ code: child.exitCode, signal: child.signalCode });
    else child.once('exit', (code, signal) => resolve({ code, signal }));
  });
  return session(client, () => err, exited);
}

/**
 * The same session with `wxhooks mcp ARGS` run in this process (main() with streams for its stdin and
 * stdout, the SDK's client on the other end, the same newline-delimited JSON-RPC as over a pipe): where the
 * process is not the point, without the cost of one. `exited` gives main's exit code (signal: null).
 */
export async function startMcpInProcess(args: string[], env: Record<string, string | undefined>): Promise<McpSession> {
  const { main } = await import('../../src/cli.js');
  const input = new PassThrough();
  const fromServer = new ReadBuffer();
  let err = '';
  const transport: Transport = {
    start: async () => undefined,
    send: async (message: JSONRPCMessage) => void input.write(serializeMessage(message)),
    close: async () => {
      input.end();
      await done;
      transport.onclose?.();
    },
  };
  const text = (chunk: string | Uint8Array) => (typeof chunk === 'string' ? chunk : Buffer.from(chunk).toString('utf8'));
  const stdout = {
    write(chunk: string | Uint8Array) {
      fromServer.append(Buffer.from(text(chunk)));
      for (let m = fromServer.readMessage(); m; m = fromServer.readMessage()) transport.onmessage?.(m);
      return true;
    },
  };
  const stderr = { write: (chunk: string | Uint8Array) => ((err += text(chunk)), true) };
  const done = main(['node', 'wxhooks', 'mcp', ...args], { env: cleanEnv(env), stdout, stderr, stdin: input, interrupted: new Promise(() => undefined) });
  const exited = done.then((code) => ({ code, signal: null }));
  const client = new Client({ name: 'wxhooks-test', version: '1.0.0' });
  // a server that exits at start (nothing to attach to) never answers: its exit is the answer
  const ended = exited.then(({ code }) => {
    throw new Error(`wxhooks mcp ${args.join(' ')} exited (${code}) before it answered\nstderr: ${err}`);
  });
  ended.catch(() => undefined);
  await Promise.race([client.connect(transport), ended]);
  return session(client, () => err, exited);
}

function session(client: Client, stderr: () => string, exited: McpSession['exited']): McpSession {
  const answers: string[] = [];
  const called = new Set<string>();
  return {
    client,
    stderr,
    answers,
    called,
    async call(name, args = {}) {
      called.add(name);
      const r = (await client.callTool({ name, arguments: args }, undefined, { timeout: 120_000 })) as { isError?: boolean; content: { type: string; text: string }[] };
      const text = r.content[0]!.text;
      answers.push(text);
      const inside = unmarked(text);
      let value: unknown;
      try {
        value = JSON.parse(inside ?? text);
      } catch {
        value = text;
      }
      return { ok: !r.isError, value, text, marked: inside !== undefined };
    },
    exited,
    async close() {
      await client.close();
      return exited;
    },
  };
}
