import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import type { Dispatcher } from 'undici';
import type { HeaderSource, Verifier } from '../signing/verify.js';
import type { PairStore } from '../store/pair-store.js';
import { isoMillis, systemClock, type Clock } from '../util/clock.js';
import { listenOn } from '../util/net.js';
import { MAX_BODY, MAX_INFLIGHT } from './common.js';
import { decide, deliveryEvent, failureEvent, OK_BODY, pairOf, statusForFailure, VERIFIED, type Answer, type Facts, type Pair, type Processed } from './decide.js';
import type { ReceiverEvent } from './event.js';
import { forwardDelivery } from './forward.js';
import { declaredLength, InflightBudget, readBody, type BodyRead } from '../util/read-body.js';
import { saveDelivery, toSaved } from './saved.js';

/** The receiver's limits unless told otherwise: `listen`'s flags default to these, and `doctor`'s receiver uses them. */
export const RECEIVER_DEFAULTS = {
  maxBody: MAX_BODY,
  maxInflight: MAX_INFLIGHT,
  forwardTimeoutMs: 30_000,
  readTimeoutMs: 10_000,
} as const;

export interface ReceiverOptions {
  port: number;
  host: string;
  path: string;
  verifier: Verifier;
  store: PairStore;
  maxBody?: number;
  /** The body bytes all connections together may hold (`--max-inflight`), every copy a request makes counted. */
  maxInflight?: number;
  forwardTo?: string;
  forwardTimeoutMs?: number;
  saveDir?: string;
  respondStatus?: number;
  /** Headers must arrive within this, and the whole request within six times it (slow-client guard). */
  readTimeoutMs?: number;
  clock?: Clock;
  /** Whether `onEvent` is given what arrived (headers, body, peer, your app's answer): for a history. */
  keepsRaw?: boolean;
  /** On close, how long open connections may finish their requests before they are cut (default 2 s). */
  closeGraceMs?: number;
  /**
   * Called once per request, once its answer has gone (or could not), with the report and, for a request
   * that had a body, its headers and bytes. The report is the listener's from then on: the receiver
   * neither changes nor keeps it.
   */
  onEvent: (event: ReceiverEvent, raw?: RawDelivery) => void;
}

/** What arrived, as it arrived: for the history (`--history`, the inspector), which keeps what it needs of it. */
export interface RawDelivery {
  headers: IncomingMessage['headers'];
  body: Buffer;
  /** When the request began (the wall clock, ms), and how long it took to answer, in ms. */
  received: number;
  ms: number;
  /** Who sent it: the address and port of the connection. */
  peer?: string;
  /** Your app's answer as it came (its headers and the start of its body), when it was forwarded: the report keeps only its status and first line. */
  answer?: { headers: Record<string, string>; body: string };
}

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

/**
 * Writes an answer; says whether it went to a connection still open (false: it closed first, and the
 * client gets nothing), or, for an answer queued behind an earlier one on a pipelined connection, when
 * it is known.
 */
function send(res: ServerResponse, answer: Pick<Answer, 'status' | 'body'>, extra?: Record<string, string>): boolean | Promise<boolean> {
  if (res.headersSent) return true;
  if (res.destroyed || res.socket?.destroyed) return false;
  if (answer.status === 200 && answer.body === OK_BODY && !extra) res.writeHead(200, OK_HEADERS);
  else res.writeHead(answer.status, { ...JSON_HEADERS(Buffer.byteLength(answer.body)), ...extra });
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
 * The Webhook-Signature header, every value of it: Node joins repeated headers with ", ", which would
 * glue two signature entries into one; the values are space-separated entries of one list instead.
 */
function headersOf(req: IncomingMessage): HeaderSource {
  const signature = req.headers['webhook-signature'];
  if (signature === undefined || !signature.includes(', ')) return req.headers;
  return { ...req.headers, 'webhook-signature': req.headersDistinct['webhook-signature']?.join(' ') };
}

/**
 * The local receiver: reads each delivery's raw bytes, verifies it, claims its pair, saves and forwards
 * it, stores the pair, and only then answers 2xx; and reports every request. What to answer is decided
 * by `decide` (src/receiver/decide.ts); this is the I/O around it.
 */
export async function startReceiver(options: ReceiverOptions): Promise<RunningReceiver> {
  const o = { ...RECEIVER_DEFAULTS, ...options };
  const clock = o.clock ?? systemClock;
  const budget = new InflightBudget(o.maxInflight);
  /** With --save-dir, a body is held twice while it is processed: as bytes, and as the text written. */
  const copies = o.saveDir ? 2 : 1;
  // undici is loaded only when there is somewhere to forward to
  const agent: Dispatcher | undefined = o.forwardTo ? new (await import('undici')).Agent({ keepAliveTimeout: 10_000, connections: 64 }) : undefined;
  /** What the server itself answered a connection it cut off (a timeout, a malformed body), for the report. */
  const cutOff = new WeakMap<Socket, number>();
  /** The requests being worked on: close() waits for them, so that no pair of a processed delivery is left unstored. */
  let working = 0;
  /** The app's answers, by the report of the delivery they answered, until the history is given them. */
  const answers = new WeakMap<ReceiverEvent, NonNullable<RawDelivery['answer']>>();
  /** Called when the last request being worked on is done (close() waits for it). */
  let idle: (() => void) | undefined;

  function handle(req: IncomingMessage, res: ServerResponse): void {
    const now = clock.now();
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    if (path !== o.path) {
      const sent = send(res, { status: 404, body: JSON.stringify({ error: 'not found', hint: `deliveries go to ${o.path}` }) });
      req.resume();
      return report(sentOrNot({ time: isoMillis(now), outcome: 'not_found', status: 404, method: req.method, path }, sent));
    }
    if (req.method !== 'POST') {
      const sent = send(res, { status: 405, body: '{"error":"only POST is accepted here"}' }, { allow: 'POST' });
      req.resume();
      return report(sentOrNot({ time: isoMillis(now), outcome: 'method_not_allowed', status: 405, method: req.method, path }, sent));
    }
    readBody(req, o.maxBody, budget, (read) => afterBody(req, res, now, clock.monotonic(), path, read), copies);
  }

  function report(event: ReceiverEvent | Promise<ReceiverEvent>, raw?: RawDelivery): void {
    if (event instanceof Promise) void event.then((e) => o.onEvent(e, raw));
    else o.onEvent(event, raw);
  }

  function afterBody(req: IncomingMessage, res: ServerResponse, now: number, began: number, path: string, read: BodyRead): void {
    const time = isoMillis(now);
    const base = { time, method: 'POST', path } as const;
    switch (read.kind) {
      case 'aborted': {
        const answered = cutOff.get(req.socket);
        if (answered === 408) return report({ ...base, outcome: 'timed_out', status: 408, message: 'the body did not arrive within 6 × --read-timeout' });
        if (answered === 400) return report({ ...base, outcome: 'bad_request', status: 400, message: 'the request was not valid HTTP (a malformed body)' });
        return report({ ...base, outcome: 'aborted', status: 0, message: 'the client went away before the body arrived; nothing was answered' });
      }
      case 'too_large': {
        const sent = send(res, { status: 413, body: JSON.stringify({ error: `body over ${o.maxBody} bytes` }) }, { connection: 'close' });
        req.destroy();
        return report(sentOrNot({ ...base, outcome: 'too_large', status: 413, size: read.size, message: `${read.size} bytes or more; --max-body is ${o.maxBody}` }, sent));
      }
      case 'over_budget': {
        const sent = send(res, { status: 503, body: '{"error":"too many bodies in flight; try again later"}' }, { connection: 'close', 'retry-after': '5' });
        req.destroy();
        const message = `answered 503: the bodies in flight would pass --max-inflight (${o.maxInflight} bytes); ${budget.refused} refused so far`;
        return report(sentOrNot({ ...base, outcome: 'overloaded', status: 503, size: read.size, message }, sent));
      }
    }
    const body = read.body;
    const v = o.verifier.verify(headersOf(req), body, now);
    // what arrived, for a listener that keeps it (a history): made only then
    const raw = (answer?: RawDelivery['answer']): RawDelivery | undefined => o.keepsRaw ? ({
      headers: req.headers,
      body,
      received: now,
      ms: Math.round(clock.monotonic() - began),
      peer: `${req.socket.remoteAddress ?? '?'}:${req.socket.remotePort ?? '?'}`,
      answer,
    }) : undefined;
    if (!v.ok) {
      // refused: answered now, and nothing more is done with it
      budget.give(read.held);
      const step = decide({ verification: v });
      const sent = step.do === 'answer' ? send(res, step.answer) : true;
      const trigger = req.headers['trigger-id'];
      return report(sentOrNot(failureEvent(time, path, v, statusForFailure(v), body.length, typeof trigger === 'string' ? trigger : undefined), sent), raw());
    }
    // the report and the pair are all that is kept of the parsed body: the rest (several times the body's
    // size, for a large forecast) is let go before the app is waited on
    const pair = pairOf(v, body);
    const event = deliveryEvent(time, path, v, pair, body.length);
    working++;
    const done = () => {
      budget.give(read.held);
      if (--working === 0) idle?.();
    };
    settle(req, res, event, pair, body, { verification: VERIFIED }).then(
      (event) => {
        done();
        report(event, raw(answers.get(event)));
      },
      (err: Error) => {
        done();
        report(sentOrNot({ ...base, outcome: 'error', status: 500, message: err.message }, send(res, { status: 500, body: '{"error":"internal error in wxhooks listen"}' })));
      },
    );
  }

  /** Does what `decide` asks, step by step, until the answer; returns the report (once the answer has gone, or could not). */
  async function settle(req: IncomingMessage, res: ServerResponse, event: ReceiverEvent, pair: Pair, body: Buffer, facts: Facts): Promise<ReceiverEvent> {
    const time = event.time;
    for (;;) {
      const step = decide(facts, { respondStatus: o.respondStatus });
      switch (step.do) {
        case 'claim':
          try {
            facts.claim = await o.store.claim(pair.trigger, pair.subscription);
            if (facts.claim === 'stored_now') event.stored_later = true;
          } catch (err) {
            facts.claimFailed = (err as Error).message;
            event.message = `${(err as Error).message} Answered 503, so the service retries it.`;
          }
          break;
        case 'process':
          facts.processed = o.saveDir || agent ? await processDelivery(req, body, time, pair.trigger, pair.subscription, event.layout) : {};
          if (facts.processed.forward) {
            // the report (a line, NDJSON) keeps the app's status and first line; the history its whole answer
            const { answer, ...forward } = facts.processed.forward;
            event.forward = forward;
            if (answer && o.keepsRaw) answers.set(event, answer);
          }
          if (facts.processed.savedTo) event.saved_to = facts.processed.savedTo;
          break;
        case 'store':
          try {
            await o.store.complete(pair.trigger, pair.subscription);
            facts.stored = { ok: true };
          } catch (err) {
            const e = err as Error & { persistent?: boolean };
            facts.stored = { ok: false, message: e.message, persistent: Boolean(e.persistent) };
            event.message = `${e.message} Processed, not yet stored: its pair is kept, and its retry is answered 503 (not processed again) until it is written.`;
            if (e.persistent) event.fatal = true;
          }
          break;
        case 'release':
          await o.store.release(pair.trigger, pair.subscription);
          return sentOrNot(reported(event, step.answer), send(res, step.answer));
        case 'answer':
          return sentOrNot(reported(event, step.answer), send(res, step.answer));
      }
    }
  }

  function reported(event: ReceiverEvent, answer: Answer): ReceiverEvent {
    event.outcome = answer.outcome;
    event.status = answer.status;
    return event;
  }

  async function processDelivery(req: IncomingMessage, body: Buffer, time: string, trigger: string, subscription: string, layout?: string): Promise<Processed> {
    const processed: Processed = {};
    if (o.saveDir) {
      try {
        processed.savedTo = await saveDelivery(o.saveDir, toSaved(time, req.method ?? 'POST', req.url ?? '/', req.headers, body, layout), `${trigger}-${subscription}`);
      } catch (err) {
        processed.saveError = (err as Error).message;
        return processed;
      }
    }
    if (o.forwardTo && agent) processed.forward = await forwardDelivery(o.forwardTo, req.headers, body, o.forwardTimeoutMs, agent);
    return processed;
  }

  // Slow clients: headers within the read timeout, the whole request within six times it. (Node checks
  // these on its own connection list; a per-socket idle timer would cost every request a timer refresh.)
  const server: Server = createServer(
    { connectionsCheckingInterval: Math.min(1000, o.readTimeoutMs), headersTimeout: o.readTimeoutMs, requestTimeout: o.readTimeoutMs * 6 },
    (req, res) => {
      try {
        handle(req, res);
      } catch (err) {
        report(sentOrNot({ time: isoMillis(clock.now()), outcome: 'error', status: 500, message: (err as Error).message }, send(res, { status: 500, body: '{"error":"internal error in wxhooks listen"}' })));
      }
    },
  );
  server.keepAliveTimeout = 5_000;
  // `Expect: 100-continue`: a body that is too large, or would not fit the budget, is refused before the client sends it.
  server.on('checkContinue', (req: IncomingMessage, res: ServerResponse) => {
    const declared = declaredLength(req);
    if (declared !== undefined && (declared > o.maxBody || budget.used + declared * copies > budget.max)) {
      const tooLarge = declared > o.maxBody;
      if (!tooLarge) budget.refused++;
      afterBody(req, res, clock.now(), clock.monotonic(), (req.url ?? '/').split('?')[0]!, tooLarge ? { kind: 'too_large', size: declared } : { kind: 'over_budget', size: declared });
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
    if (socket.writable) socket.end(`HTTP/1.1 ${timedOut ? '408 Request Timeout' : '400 Bad Request'}\r\nconnection: close\r\n\r\n`);
    else socket.destroy();
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
        setTimeout(() => server.closeAllConnections(), o.closeGraceMs ?? 2000).unref();
      });
      // a delivery being forwarded goes on to its end (within --forward-timeout), and its pair is stored,
      // even if its connection is cut: otherwise its retry would be forwarded again
      if (working) await new Promise<void>((resolve) => (idle = resolve));
      await closed;
      await agent?.close().catch(() => undefined);
    },
  };
}
