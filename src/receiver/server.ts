import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import * as ANSWERS from '../delivery/answers.js';
import { bodyTimeoutMs, OK_BODY, type Answer } from '../delivery/answers.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { BODY_READS } from '../delivery/defaults.js';
import { door, pathOf, type DoorEnd, type DoorIO, type Sent, type Written } from '../delivery/door.js';
import { isoMillis, systemClock, type Clock } from '../util/clock.js';
import { listenOn } from '../util/net.js';
import { InflightBudget, nodeBody } from '../util/read-body.js';
import type { ReceiverEvent } from './event.js';
import { makeReceive, type Received, type RawDelivery, type ReceiveOptions } from './receive.js';

/** listen's HTTP door: its receiving (src/receiver/receive.ts, the same for every door) and the socket's own limits. */
export interface ReceiverOptions extends Omit<ReceiveOptions, 'monotonic'> {
  port: number;
  host: string;
  path: string;
  maxBody?: number;
  /** The body bytes all connections together may hold (`--max-inflight`), every copy a request makes counted. */
  maxInflight?: number;
  /** Headers must arrive within this, and the whole request within six times it (slow-client guard). */
  readTimeoutMs?: number;
  clock?: Clock;
  /** On close, how long open connections may finish their requests before they are cut (default DEFAULTS.closeGraceMs). */
  closeGraceMs?: number;
  /**
   * Called once per request, once its answer has gone (or could not), with the report and, for a request
   * that had a body, its headers and bytes. The report is the listener's from then on: the receiver
   * neither changes nor keeps it.
   */
  onEvent: (event: ReceiverEvent, raw?: RawDelivery) => void;
}

export type { RawDelivery } from './receive.js';

export interface RunningReceiver {
  url: string;
  port: number;
  /** Requests answered 503 because the bodies in flight would have gone over `--max-inflight`. */
  readonly refusedOverBudget: number;
  /** The body bytes held now, against `--max-inflight` (`/metrics` reads it). */
  readonly inflight?: { readonly used: number; readonly max: number };
  /** Stops taking requests, and resolves once every request taken has been answered, and its pair stored. */
  close(): Promise<void>;
}

/**
 * Node reads the headers given to writeHead without changing them, so the usual answer's can be made once:
 * writeHead with them took 876 ns against 942 ns with a fresh object, 0.15% of the ~42 µs of CPU a delivery costs.
 */
const JSON_HEADERS = (length: number) => ({ 'content-type': 'application/json', 'content-length': length });
const OK_HEADERS = JSON_HEADERS(OK_BODY.length);
const CLOSE = { connection: 'close' } as const;

/**
 * Writes an answer of the table; says whether it went to a connection still open (false: it closed first,
 * and the client gets nothing), or, for an answer queued behind an earlier one on a pipelined connection,
 * when it is known.
 */
function send(res: ServerResponse, answer: Answer, extra?: Record<string, string>): Sent {
  if (res.headersSent) return true;
  if (res.destroyed || res.socket?.destroyed) return false;
  if (answer.status === 200 && answer.body === OK_BODY && !extra) res.writeHead(200, OK_HEADERS);
  else res.writeHead(answer.status, { ...JSON_HEADERS(Buffer.byteLength(answer.body)), ...answer.headers, ...extra });
  res.end(answer.body);
  if (res.socket) return true;
  return new Promise((resolve) => res.once('close', () => resolve(res.writableFinished)));
}

/** The report, with `answer_sent: false` when the answer did not go. */
function sentOrNot(event: ReceiverEvent, sent: Sent): ReceiverEvent | Promise<ReceiverEvent> {
  if (sent === true) return event;
  if (sent === false) {
    event.answer_sent = false;
    return event;
  }
  return sent.then((ok) => (ok ? event : Object.assign(event, { answer_sent: false as const })));
}

/**
 * The local receiver, a door of the delivery core (src/delivery/door.ts) on node:http: the core's sequence
 * reads each delivery's raw bytes, has it verified and settled (listen is a handler that saves, publishes
 * and forwards: src/receiver/receive.ts), and writes the table's answer; this supplies how node:http
 * reads and writes, and reports every request.
 */
export async function startReceiver(options: ReceiverOptions): Promise<RunningReceiver> {
  const o = {
    maxBody: DEFAULTS.maxBodyBytes,
    maxInflight: DEFAULTS.maxInflightBytes,
    forwardTimeoutMs: DEFAULTS.forwardTimeoutMs,
    readTimeoutMs: DEFAULTS.readTimeoutMs,
    ...options,
  };
  const clock = o.clock ?? systemClock;
  const budget = new InflightBudget(o.maxInflight);
  const { receive, close: closeReceive } = await makeReceive({ ...o, monotonic: () => clock.monotonic() });
  /** What the server itself answered a connection it cut off (a timeout, a malformed body), for the report. */
  const cutOff = new WeakMap<Socket, number>();
  /** Requests that asked before sending their body (`Expect: 100-continue`): told to go on once their length is let in. */
  const continuing = new WeakSet<IncomingMessage>();
  /** The deliveries being worked on: close() waits for them, so that no pair of a processed delivery is left unstored. */
  let working = 0;
  /** Called when the last delivery being worked on is done (close() waits for it). */
  let idle: (() => void) | undefined;

  const io: DoorIO<IncomingMessage, ServerResponse, Buffer> = {
    method: (req) => req.method,
    path: (req) => pathOf(req.url ?? '/'),
    headers: (req) => req.headers,
    length: (req) => req.headers['content-length'],
    stream(req, res, sink) {
      if (continuing.has(req)) res.writeContinue();
      return nodeBody.stream(req, sink);
    },
    alloc: nodeBody.alloc,
    write(req, res, answer, how: Written) {
      switch (how) {
        case 'gone': // the client went away, or the server answered and cut it off itself (clientError)
          return false;
        case 'skipped': {
          const sent = send(res, answer);
          req.resume();
          return sent;
        }
        case 'read':
          return send(res, answer);
        default: {
          // refused part-way: answered, and the rest of the body is not waited for
          const sent = send(res, answer, CLOSE);
          req.destroy();
          return sent;
        }
      }
    },
  };

  /** Each request's report, once its answer went (or did not). */
  function ended(req: IncomingMessage, end: DoorEnd<Received>, sent: Sent, at: number): void {
    const base = { time: isoMillis(at), method: req.method, path: pathOf(req.url ?? '/') };
    switch (end.step) {
      case 'delivered': {
        if (--working === 0) idle?.();
        const r = end.delivered;
        return report(sentOrNot(r.event, sent), r.raw);
      }
      case 'failed':
        if (--working === 0) idle?.();
        return report(sentOrNot({ time: base.time, outcome: 'error', status: 500, message: (end.error as Error)?.message ?? String(end.error) }, sent));
      case 'body': {
        const r = end.refused;
        if (r.kind === 'aborted' || r.kind === 'timed_out') {
          const answered = cutOff.get(req.socket);
          if (answered === 408) return report({ ...base, outcome: 'timed_out', status: 408, message: `the body did not arrive within ${BODY_READS} × --read-timeout` });
          if (answered === 400) return report({ ...base, outcome: 'bad_request', status: 400, message: 'the request was not valid HTTP (a malformed body)' });
          return report({ ...base, outcome: 'aborted', status: 0, message: 'the client went away before the body arrived; nothing was answered' });
        }
        if (r.kind === 'too_large') return report(sentOrNot({ ...base, outcome: 'too_large', status: 413, size: r.size, message: `${r.size} bytes or more; --max-body is ${o.maxBody}` }, sent));
        const message = `answered 503: the bodies in flight would pass --max-inflight (${o.maxInflight} bytes); ${budget.refused} refused so far`;
        return report(sentOrNot({ ...base, outcome: 'overloaded', status: 503, size: r.size, message }, sent));
      }
      default:
        return report(sentOrNot({ ...base, outcome: end.answer.outcome, status: end.answer.status }, sent));
    }
  }

  function report(event: ReceiverEvent | Promise<ReceiverEvent>, raw?: RawDelivery): void {
    if (event instanceof Promise) void event.then((e) => o.onEvent(e, raw));
    else o.onEvent(event, raw);
  }

  const handle = door(io, {
    path: o.path,
    notFoundHint: `deliveries go to ${o.path}`,
    now: () => clock.now(),
    maxBody: o.maxBody,
    budget,
    // with --save-dir, a body is held twice while it is processed: as bytes, and as the text written
    copies: o.saveDir ? 2 : 1,
    deliver(req, body, at) {
      working++;
      const path = pathOf(req.url ?? '/');
      const peer = o.keepsRaw ? `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}` : undefined;
      return receive({ method: 'POST', path, url: req.url ?? '/', headers: req.headers, body, now: at, began: clock.monotonic(), peer });
    },
    answerOf: (r) => r.answer,
    ended,
  });

  /** The door, with a bug in it answered 500 and reported, rather than thrown at the server. */
  function guarded(req: IncomingMessage, res: ServerResponse): void {
    try {
      handle(req, res);
    } catch (err) {
      report(sentOrNot({ time: isoMillis(clock.now()), outcome: 'error', status: 500, message: (err as Error).message }, send(res, ANSWERS.internal)));
    }
  }

  // Slow clients: headers within the read timeout, the whole request within six times it. (Node checks
  // these on its own connection list; a per-socket idle timer would cost every request a timer refresh.)
  const server: Server = createServer({ connectionsCheckingInterval: Math.min(1000, o.readTimeoutMs), headersTimeout: o.readTimeoutMs, requestTimeout: bodyTimeoutMs(o.readTimeoutMs) }, guarded);
  server.keepAliveTimeout = DEFAULTS.keepAliveMs;
  // `Expect: 100-continue`: a body that is too large, or would not fit the budget, is refused before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    continuing.add(req);
    guarded(req, res);
  });
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const timedOut = err.code === 'ERR_HTTP_REQUEST_TIMEOUT' || err.code === 'ERR_HTTP_HEADERS_TIMEOUT';
    // a connection closed or reset by the client mid-request (HPE_INVALID_EOF_STATE: the end of the stream
    // in a body) is its going away, reported as aborted; not malformed HTTP
    if (!timedOut && (!err.code?.startsWith('HPE_') || err.code === 'HPE_INVALID_EOF_STATE')) return socket.destroy();
    cutOff.set(socket, timedOut ? 408 : 400);
    if (!socket.writable) return socket.destroy();
    // answered from the table, then cut off whatever the client does (one that never reads would
    // otherwise keep its connection, and its share of --max-inflight, for as long as it likes)
    const a = !timedOut ? ANSWERS.malformed : ANSWERS.timedOut(err.code === 'ERR_HTTP_HEADERS_TIMEOUT' ? o.readTimeoutMs : bodyTimeoutMs(o.readTimeoutMs));
    const head = `HTTP/1.1 ${a.status} ${STATUS_CODES[a.status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(a.body)}\r\nconnection: close\r\n\r\n`;
    socket.end(head + a.body, () => socket.destroy());
    setTimeout(() => socket.destroy(), DEFAULTS.cutOffMs).unref();
  });
  const { port, url } = await listenOn(server, o.host, o.port, o.path);
  return {
    url,
    port,
    get refusedOverBudget() {
      return budget.refused;
    },
    inflight: budget,
    async close() {
      const closed = new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
        setTimeout(() => server.closeAllConnections(), o.closeGraceMs ?? DEFAULTS.closeGraceMs).unref();
      });
      // a delivery being forwarded goes on to its end (within --forward-timeout), and its pair is stored,
      // even if its connection is cut: otherwise its retry would be forwarded again
      if (working) await new Promise<void>((resolve) => (idle = resolve));
      await closed;
      await closeReceive();
    },
  };
}
