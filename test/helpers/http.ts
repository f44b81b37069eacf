import { type Agent, type IncomingHttpHeaders, request } from 'node:http';
import { connect } from 'node:net';

export interface PostResult {
  status: number;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A plain HTTP POST with exactly these headers and bytes (through `agent` when given: keep-alive for a load). */
export function post(url: string, headers: Record<string, string | string[] | undefined>, body: Buffer | string, agent?: Agent): Promise<PostResult> {
  const u = new URL(url);
  const clean: Record<string, string | string[]> = {};
  for (const [k, v] of Object.entries(headers)) if (v !== undefined) clean[k] = v;
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname + u.search, method: 'POST', agent, headers: { 'content-type': 'application/json', ...clean } }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

export function get(url: string, method = 'GET'): Promise<PostResult> {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path: u.pathname, method }, (res) => {
      let text = '';
      res.setEncoding('utf8').on('data', (d: string) => (text += d));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Sends raw bytes on a TCP connection and resolves when the server closes it, with what it answered. */
export function rawExchange(port: number, data: string, maxMs: number): Promise<{ answer: string; closedAfterMs: number }> {
  return new Promise((resolve, reject) => {
    const started = Date.now();
    const socket = connect(port, '127.0.0.1', () => socket.write(data));
    let answer = '';
    socket.setEncoding('utf8').on('data', (d: string) => (answer += d));
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the server kept a stalled connection open for ${maxMs} ms`));
    }, maxMs);
    socket.on('close', () => {
      clearTimeout(timer);
      resolve({ answer, closedAfterMs: Date.now() - started });
    });
    socket.on('error', () => undefined);
  });
}

/**
 * Reads a streamed answer's body (an inspector's event stream) to its end, handing each piece to `onText`
 * as it comes; `streaming` settles when the body ends, fails, or `reader` is cancelled.
 */
export function readText(res: Response, onText: (text: string) => void): { reader: ReadableStreamDefaultReader<Uint8Array>; streaming: Promise<void> } {
  const reader = res.body!.getReader();
  const streaming = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      onText(Buffer.from(value).toString('utf8'));
    }
  })().catch(() => undefined);
  return { reader, streaming };
}
