import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOn } from '../util/net.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../vocabulary.js';
import { emulatorCredentials } from './auth.js';
import { DeliveryScheduler } from './deliveries.js';
import { EmulatorRouter, errorBody, type EmuResponse, type Shape } from './routes.js';
import { EmulatorState } from './state.js';

export interface EmulatorOptions {
  port?: number;
  host?: string;
  apiKey?: string;
  clientId?: string;
  /** Delays before each retry of a failed delivery, in ms (default 5 s, 30 s, 2 min). */
  retryDelays?: number[];
  dataFile?: string;
  shape?: Shape;
  /** An attempt with no answer by then has failed (default 10 s). */
  attemptTimeoutMs?: number;
  /** Delivery attempts in flight at once (default 64). */
  concurrency?: number;
  /** Called once per request, for a log. */
  onRequest?: (line: { method: string; path: string; status: number; ms: number }) => void;
}

export interface RunningEmulator {
  url: string;
  port: number;
  host: string;
  apiKey: string;
  clientId: string;
  /** The legacy key (the secret half of a current key): what signs a Basic token. */
  secret: string;
  state: EmulatorState;
  close(): Promise<void>;
}

export const MAX_REQUEST_BODY = 1024 * 1024;

function send(res: ServerResponse, r: EmuResponse): void {
  if (res.headersSent) return;
  const headers: Record<string, string> = { ...r.headers };
  if (r.status === 204 || r.body === undefined) {
    res.writeHead(r.status, headers).end();
    return;
  }
  let text: string;
  try {
    text = JSON.stringify(r.body);
  } catch (err) {
    // nothing stored should be unserialisable (depth is checked on the way in); if it is, a 500, and the emulator stays up
    text = JSON.stringify(errorBody('internal', `the answer could not be serialised: ${(err as Error).message}`));
    r = { status: 500 };
  }
  headers['content-type'] = 'application/json';
  res.writeHead(r.status, headers).end(text);
}

/** The request's body, at most MAX_REQUEST_BODY bytes; it grows as bytes arrive (nothing is set aside from a declared length). */
function readBody(req: IncomingMessage): Promise<Buffer | 'too-large' | 'aborted'> {
  return new Promise((resolve) => {
    const declared = Number(req.headers['content-length']);
    if (Number.isFinite(declared) && declared > MAX_REQUEST_BODY) {
      resolve('too-large');
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size > MAX_REQUEST_BODY) {
        req.removeAllListeners('data');
        req.pause();
        resolve('too-large');
        return;
      }
      chunks.push(c);
    });
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('close', () => resolve('aborted'));
  });
}

/** Starts the emulator's HTTP server; binds 127.0.0.1 unless told otherwise. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const credentials = emulatorCredentials(options.apiKey, options.clientId);
  const state = new EmulatorState(options.dataFile);
  const scheduler = new DeliveryScheduler(state, {
    retryDelays: options.retryDelays ?? [5_000, 30_000, 120_000],
    attemptTimeoutMs: options.attemptTimeoutMs,
    concurrency: options.concurrency,
    shape: options.shape ?? 'documented',
  });
  const router = new EmulatorRouter(state, scheduler, { credentials, shape: options.shape ?? 'documented' });

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    let path = req.url ?? '/';
    let response: EmuResponse;
    try {
      const u = new URL(req.url ?? '/', 'http://emulator');
      path = u.pathname;
      const raw = await readBody(req);
      if (raw === 'aborted') return;
      if (raw === 'too-large') {
        response = { status: 413, body: errorBody('payload_too_large', `request bodies are limited to ${MAX_REQUEST_BODY} bytes`), headers: { connection: 'close' } };
      } else {
        let body: unknown;
        let malformed = false;
        if (raw.length) {
          try {
            body = JSON.parse(raw.toString('utf8'));
          } catch {
            malformed = true;
          }
        }
        response = malformed
          ? { status: 400, body: errorBody('invalid_json', 'the request body is not valid JSON') }
          : nestsDeeperThan(body)
            ? { status: 400, body: errorBody('invalid_request', `the request body nests deeper than ${MAX_JSON_DEPTH} levels`) }
            : await router.handle({ method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, headers: req.headers, body });
      }
    } catch (err) {
      response = { status: 500, body: errorBody('internal', (err as Error).message) };
    }
    send(res, response);
    options.onRequest?.({ method: req.method ?? '', path, status: response.status, ms: Date.now() - started });
  }
  // Whatever a handler throws is answered 500; the emulator stays up.
  const server: Server = createServer((req, res) => {
    handle(req, res).catch((err: Error) => send(res, { status: 500, body: errorBody('internal', err.message) }));
  });
  server.headersTimeout = 10_000;
  server.requestTimeout = 60_000;
  server.on('clientError', (_err, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nconnection: close\r\n\r\n');
    else socket.destroy();
  });

  const host = options.host ?? '127.0.0.1';
  let bound: { port: number; url: string };
  try {
    bound = await listenOn(server, host, options.port ?? 8788);
  } catch (err) {
    await scheduler.close();
    throw err;
  }
  const port = bound.port;
  return {
    url: bound.url,
    port,
    host,
    apiKey: credentials.apiKey,
    clientId: credentials.clientId,
    secret: credentials.secret,
    state,
    async close() {
      await scheduler.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await state.persist();
    },
  };
}
