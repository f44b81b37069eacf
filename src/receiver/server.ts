import { createServer, STATUS_CODES, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { ANSWERS, bodyTimeoutMs, OK_BODY, type Answer } from '../delivery/answers.js';
import { declaredFits } from '../util/bodies.js';
import { BODY_READS, DEFAULTS } from '../delivery/defaults.js';
import { pathOf, routed } from '../delivery/door.js';
import { isoMillis, systemClock, type Clock } from '../util/clock.js';
import { listenOn } from '../util/net.js';
import type { ReceiverEvent } from './event.js';
import { declaredLength, InflightBudget, readBody, type BodyRead } from '../util/read-body.js';
import { makeReceive, type Arrived, type RawDelivery, type Received, type ReceiveOptions } from './receive.js';

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
function send(res: ServerResponse, answer: Answer, extra?: Record<string, string>): boolean | Promise<boolean> {
  if (res.headersSent) return true;
  if (res.destroyed || res.socket?.destroyed) return false;
  if (answer.status === 200 && answer.body === OK_BODY && !extra) res.writeHead(200, OK_HEADERS);
  else res.writeHead(answer.status, { ...JSON_HEADERS(Buffer.byteLength(answer.body)), ...answer.headers, ...extra });
  res.end(answer.body);
  if (res.socket) return true;
  return new Promise((resolve) => res.once('close', () => resolve(res.writableFinished)));
}

/** The report, with `answer_sent: false` when the answer did not go. */
function sentOrNot(event: ReceiverEvent, sent: boolean | Promise<boolean>): ReceiverEvent | Promise<ReceiverEvent> {
  if (sent === true) return event;
  if (sent === false) {
    event.answer_sent = false;
    return event;
  }
  return sent.then((ok) => (ok ? event : Object.assign(event, { answer_sent: false as const })));
}

/**
 * The local receiver, a door of the delivery core (src/delivery/door.ts): reads each delivery's raw
 * bytes, verifies it, and has the core's runner claim its pair, handle it (save and forward it: listen is
 * a handler that saves and forwards), store its pair, and only then answer 2xx; and reports every request.
 * What is answered is the core's table (src/delivery/answers.ts); this is the I/O around it.
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
  /** With --save-dir, a body is held twice while it is processed: as bytes, and as the text written. */
  const copies = o.saveDir ? 2 : 1;
  const { receive, close: closeReceive } = await makeReceive({ ...o, monotonic: () => clock.monotonic() });
  const notFoundHint = `deliveries go to ${o.path}`;
  /** What the server itself answered a connection it cut off (a timeout, a malformed body), for the report. */
  const cutOff = new WeakMap<Socket, number>();
  /** The requests being worked on: close() waits for them, so that no pair of a processed delivery is left unstored. */
  let working = 0;
  /** Called when the last request being worked on is done (close() waits for it). */
  let idle: (() => void) | undefined;

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const now = clock.now();
    const path = pathOf(req.url ?? '/');
    const wrong = routed(req.method, path, o.path, notFoundHint);
    if (wrong) {
      const sent = send(res, wrong);
      req.resume();
      return report(sentOrNot({ time: isoMillis(now), outcome: wrong.outcome, status: wrong.status, method: req.method, path }, sent));
    }
    readBody(req, o.maxBody, budget, (read) => afterBody(req, res, now, clock.monotonic(), path, read), { copies });
  }

  function report(event: ReceiverEvent | Promise<ReceiverEvent>, raw?: RawDelivery): void {
    if (event instanceof Promise) void event.then((e) => o.onEvent(e, raw));
    else o.onEvent(event, raw);
  }

  function afterBody(req: IncomingMessage, res: ServerResponse, now: number, began: number, path: string, read: BodyRead): void {
    const time = isoMillis(now);
    const base = { time, method: 'POST', path } as const;
    switch (read.kind) {
      case 'aborted':
      case 'timed_out': {
        const answered = cutOff.get(req.socket);
        if (answered === 408) return report({ ...base, outcome: 'timed_out', status: 408, message: `the body did not arrive within ${BODY_READS} × --read-timeout` });
        if (answered === 400) return report({ ...base, outcome: 'bad_request', status: 400, message: 'the request was not valid HTTP (a malformed body)' });
        return report({ ...base, outcome: 'aborted', status: 0, message: 'the client went away before the body arrived; nothing was answered' });
      }
      case 'too_large': {
        const sent = send(res, ANSWERS.tooLarge(o.maxBody), CLOSE);
        req.destroy();
        return report(sentOrNot({ ...base, outcome: 'too_large', status: 413, size: read.size, message: `${read.size} bytes or more; --max-body is ${o.maxBody}` }, sent));
      }
      case 'over_budget': {
        const sent = send(res, ANSWERS.overloaded, CLOSE);
        req.destroy();
        const message = `answered 503: the bodies in flight would pass --max-inflight (${o.maxInflight} bytes); ${budget.refused} refused so far`;
        return report(sentOrNot({ ...base, outcome: 'overloaded', status: 503, size: read.size, message }, sent));
      }
    }
    const arrived: Arrived = {
      method: 'POST',
      path,
      url: req.url ?? '/',
      headers: req.headers,
      body: read.body,
      now,
      began,
      peer: o.keepsRaw ? `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}` : undefined,
    };
    let received: Received | Promise<Received>;
    try {
      received = receive(arrived);
    } catch (err) {
      budget.give(read.held);
      throw err;
    }
    if (!(received instanceof Promise)) {
      // refused: answered now, and nothing more is done with it
      budget.give(read.held);
      return report(sentOrNot(received.event, send(res, received.answer)), received.raw);
    }
    working++;
    void received.then((r) => {
      budget.give(read.held);
      if (--working === 0) idle?.();
      report(sentOrNot(r.event, send(res, r.answer)), r.raw);
    });
  }

  // Slow clients: headers within the read timeout, the whole request within six times it. (Node checks
  // these on its own connection list; a per-socket idle timer would cost every request a timer refresh.)
  const server: Server = createServer({ connectionsCheckingInterval: Math.min(1000, o.readTimeoutMs), headersTimeout: o.readTimeoutMs, requestTimeout: bodyTimeoutMs(o.readTimeoutMs) }, (req, res) => {
    try {
      handle(req, res);
    } catch (err) {
      report(sentOrNot({ time: isoMillis(clock.now()), outcome: 'error', status: 500, message: (err as Error).message }, send(res, ANSWERS.internal)));
    }
  });
  server.keepAliveTimeout = DEFAULTS.keepAliveMs;
  // `Expect: 100-continue`: a body that is too large, or would not fit the budget, is refused before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const declared = declaredLength(req);
    if (declared !== undefined && (declared > o.maxBody || !declaredFits(budget, declared, copies))) {
      afterBody(req, res, clock.now(), clock.monotonic(), pathOf(req.url ?? '/'), declared > o.maxBody ? { kind: 'too_large', size: declared } : { kind: 'over_budget', size: declared });
      return;
    }
    res.writeContinue();
    server.emit('request', req, res);
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
