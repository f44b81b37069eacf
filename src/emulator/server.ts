import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { listenOn } from '../util/net.js';
import { declaredLength, InflightBudget, readBody, type BodyRead } from '../util/read-body.js';
import { MAX_JSON_DEPTH, nestsDeeperThan } from '../vocabulary.js';
import { emulatorCredentials } from './auth.js';
import { DeliveryScheduler } from './deliveries.js';
import { EmulatorRouter, errorBody, type EmuResponse, type Shape } from './routes.js';
import { EmulatorState, type DeliveryAttempt } from './state.js';
import * as DEFAULTS from '../delivery/defaults.js';

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
  /** The body bytes all requests together may hold while they are read (default MAX_INFLIGHT). */
  maxInflight?: number;
  /** Called once per request, for a log. */
  onRequest?: (line: { method: string; path: string; status: number; ms: number }) => void;
  /** Called once per delivery attempt, once it is recorded: what the emulator's terminal shows. */
  onAttempt?: (attempt: DeliveryAttempt) => void;
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

export const MAX_REQUEST_BODY: number = 1024 * 1024;

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

/** The body bytes all requests together may hold while they are read: past it, 503 (as `listen --max-inflight`). */
export const MAX_INFLIGHT: number = 64 * 1024 * 1024;

/** Starts the emulator's HTTP server; binds 127.0.0.1 unless told otherwise. */
export async function startEmulator(options: EmulatorOptions = {}): Promise<RunningEmulator> {
  const credentials = emulatorCredentials(options.apiKey, options.clientId);
  const state = new EmulatorState(options.dataFile);
  const scheduler = new DeliveryScheduler(state, {
    retryDelays: options.retryDelays ?? [...DEFAULTS.retryDelaysMs],
    attemptTimeoutMs: options.attemptTimeoutMs,
    concurrency: options.concurrency,
    shape: options.shape ?? DEFAULTS.emulatorShape,
    onAttempt: options.onAttempt,
  });
  const router = new EmulatorRouter(state, scheduler, { credentials, shape: options.shape ?? DEFAULTS.emulatorShape });
  const budget = new InflightBudget(options.maxInflight ?? MAX_INFLIGHT);

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = Date.now();
    let path = req.url ?? '/';
    let response: EmuResponse;
    try {
      const u = new URL(req.url ?? '/', 'http://emulator');
      path = u.pathname;
      // the path and the key are checked on the headers: an anonymous request's body is never read
      const early = await router.before({ method: req.method ?? 'GET', path: u.pathname, query: u.searchParams, headers: req.headers });
      const read = early ? undefined : await new Promise<BodyRead>((resolve) => readBody(req, MAX_REQUEST_BODY, budget, resolve));
      if (read?.kind === 'aborted') return;
      if (early) {
        // a body it was going to send is not read: the connection closes after the answer
        const hasBody = (declaredLength(req) ?? 0) > 0 || req.headers['transfer-encoding'] !== undefined;
        response = hasBody ? { ...early, headers: { ...early.headers, connection: 'close' } } : early;
        req.resume();
      } else if (read?.kind === 'too_large') {
        response = { status: 413, body: errorBody('payload_too_large', `request bodies are limited to ${MAX_REQUEST_BODY} bytes`), headers: { connection: 'close' } };
      } else if (read?.kind === 'over_budget') {
        response = { status: 503, body: errorBody('overloaded', 'too many request bodies in flight; try again later'), headers: { connection: 'close', 'retry-after': '1' } };
      } else {
        const raw = read?.kind === 'body' ? read.body : Buffer.alloc(0);
        if (read?.kind === 'body') budget.give(read.held);
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

  const host = options.host ?? DEFAULTS.host;
  let bound: { port: number; url: string };
  try {
    bound = await listenOn(server, host, options.port ?? DEFAULTS.emulatorPort);
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
