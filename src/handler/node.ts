import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import * as ANSWERS from '../delivery/answers.js';
import { bodyTimeoutMs, type Answer } from '../delivery/answers.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { door, pathOf, type DoorIO } from '../delivery/door.js';
import type { PairStore, StoreNotice } from '../delivery/store.js';
import type { Clock } from '../util/clock.js';
import { Verifier } from '../signing/verify.js';
import { InflightBudget, nodeBody } from '../util/read-body.js';
import type { Pair } from '../delivery/pair.js';
import { keyed } from '../delivery/receive.js';
import { MessageRefusedError, WorkerStoppedError, type ConsumedMessage } from '../sinks/consumer.js';
import type { ConsumeOptions, SinkConsumer } from '../sinks/sink.js';
import { isoMillis } from '../util/clock.js';
import { eventFrom, hooksOf, WebhooksCore, WebhookHandlerError, WebhookSetupError, WebhookTimeoutError, secretsFrom, type WebhooksOptions } from './core.js';
import type { WebhookEvent } from './types.js';
import { ConsumerWatch } from '../observe/consumer.js';
import { version } from '../version.js';

/**
 * How an app's `openStore` opens a store. Declared here, apart from the stores' own options, so that the
 * published types need none of PostgreSQL's (an app with only wxhooks installed compiles with `--strict`).
 */
export interface OpenStoreOptions {
  /** For the file store: the folder its file is kept in. */
  dir?: string;
  /** How long a processed pair is remembered, in milliseconds (default 24 h). */
  ttlMs?: number;
  /**
   * How long a claim holds unless extended while its delivery is handled, in milliseconds (default 60 s):
   * past it, the pair's claim may be taken over (its holder is taken to have died or hung). The handlers'
   * time limit follows it: two leases, unless `handlerTimeoutMs` is given.
   */
  leaseMs?: number;
  /** For PostgreSQL: the schema of its tables (default `wxhooks`, as `listen`'s). */
  schema?: string;
  /** For the file store: the webhook whose pairs these are, kept in a file of their own in the folder, so that one receiver per webhook can share it. */
  webhook?: string;
  /** For the file store: also sync each batch to the disk before its answers (power-loss safety). */
  fsync?: boolean;
  /** For the file store: how long it may stay unwritable before the store gives up (default 60 s). */
  giveUpMs?: number;
  /** The clock (default the system's): a test passes its own. */
  clock?: Clock;
  /** For PostgreSQL: told when the database goes away, and when it is back. */
  onConnection?: (state: 'lost' | 'restored', reason?: string) => void;
  /** Told of what the person running the app should know: a clock that jumped, the file replaced, pairs stored late, a lock taken over. */
  onNotice?: (notice: StoreNotice) => void;
}

/**
 * The handler library's Node entry (`import { Webhooks, createNodeMiddleware } from 'wxhooks'`):
 * verification with Node's crypto, the same as `listen`'s, and a middleware for node:http and Express
 * (Fastify: the body read as a Buffer, then `verifyAndReceive`'s receipt, or this middleware given the raw
 * request with that Buffer as its body: docs/library.md). `wxhooks/web` (src/handler/web.ts) is the same library
 * for any runtime with Web Crypto; both are doors of the delivery core's shape (src/delivery/door.ts).
 */

export type { CatchUpOptions, CaughtUp } from './catch-up.js';

export class Webhooks extends WebhooksCore {
  /** The secret a catch-up is signed with (the newest of a rotation's). */
  private readonly catchUpSecret: string;

  constructor(options: WebhooksOptions) {
    // every call verified on its own (a handler serves whoever is configured to send to it: nothing is pinned)
    const secret = secretsFrom(options);
    const verifier = new Verifier({ secret, scheme: options.scheme, tolerance: options.tolerance, pin: false });
    const marks = new Verifier({ secret, scheme: 'standard', tolerance: options.tolerance, pin: false, diagnosePerMinute: 0 });
    const buffer = (body: Uint8Array) => Buffer.from(body.buffer, body.byteOffset, body.byteLength);
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, buffer(body), now),
        verifyMark: (headers, body, now) => marks.verify(headers, buffer(body), now),
        sha256: (prefix, body) => createHash('sha256').update(prefix).update(body).digest(),
      },
      options,
    );
    this.catchUpSecret = secretsFrom(options)[0]!; // the current one
  }

  /**
   * Runs the handlers for what the app's own store has not processed of what the forecast API says the
   * webhook's subscriptions should have been sent since `since` (a Date, a duration such as `'24h'`, or
   * milliseconds; default 24 h): each notification built as the service would have built it, with
   * `event.catchUp === true`, and handled once with the service's own delivery of the same forecast,
   * whichever comes first (the same store, the same exactly-once). Resolves with what became of each
   * (`accepted`: handed over now). A forecast API that fails (401, 404, 5xx, a timeout) rejects, before
   * any handler runs.
   */
  async catchUp(o: import('./catch-up.js').CatchUpOptions): Promise<import('./catch-up.js').CaughtUp[]> {
    const { catchUp } = await import('./catch-up.js'); // the service's client only when asked for
    return catchUp(o, this.catchUpSecret, (request) => this.verifyAndReceive(request));
  }

  /**
   * Starts a worker of a consumer group on the stream a sink URL names (`listen --sink` writes it):
   * each message is verified again with this instance's secrets, as of when the broker stored it (the
   * stream entry's own id or timestamp, which no one with access to the broker can write into the
   * message), and its pair is taken from what is signed (the Trigger-Id, the verified body), never from
   * the message's envelope: a message whose envelope says otherwise goes to the dead letters with why. It
   * is given to the handlers of `on(...)` as a `WebhookEvent`, exactly as a delivery is, and acknowledged
   * only once they resolved, with its pair claimed and completed in this instance's store, so that a
   * handler runs once per pair even when the broker delivers a message twice. A handler that throws, or
   * runs past `handlerTimeoutMs`, goes to `onError`, and its message is delivered again after
   * `retryDelayMs`, up to `maxDeliveries`, then to the dead letters; a message whose body is not a JSON
   * object, or that does not verify, goes there at once, with why (as does one whose handler throws a
   * `MessageRefusedError`). Resolves once it reads; `stop()` lets the handlers under way finish.
   */
  async consume(url: string, options: WebhooksConsumeOptions): Promise<SinkConsumer> {
    const { consume } = await import('../sinks/index.js'); // the brokers' clients only when asked for
    const timeoutMs = options.handlerTimeoutMs ?? this.handlerTimeoutMs;
    const { metrics, ...rest } = options;
    // a span per message, its figures, and with `metrics` a port of its own (src/observe/consumer.ts)
    const watch = new ConsumerWatch(options.group, this.store);
    const consumer = await consume<Opened>(
      url,
      watch.options({
        ...rest,
        store: this.store,
        handlerTimeoutMs: timeoutMs,
        timers: this.timers,
        verify: (m) => this.openMessage(m),
        handler: (_m, opened, signal) => this.runMessage(opened!.event, signal, timeoutMs),
      }),
    );
    return watch.started(consumer, metrics, version());
  }

  /** A message verified as of when the broker stored it, and its pair, type and timestamp as its signed content gives them. */
  private async openMessage(m: ConsumedMessage): Promise<Opened> {
    const v = await this.engine.verify(m.headers, m.body, m.storedAt);
    if (!v.ok) throw new MessageRefusedError(`it does not verify with this webhook's secret as of when the broker stored it (${isoMillis(m.storedAt)}): ${v.message}`);
    // the pair as the store keys it; the event as the handlers get a delivery
    const k = await keyed(v, m.body, this.engine.sha256);
    const event = eventFrom(v, k.pair);
    return { pair: k.keyed, type: typeof v.payload.type === 'string' ? v.payload.type : undefined, timestamp: v.timestamp, event };
  }

  private async runMessage(event: WebhookEvent, signal: AbortSignal, timeoutMs: number): Promise<void> {
    // given up on (its time is up, or the worker stopped first): onError is told, as the middleware tells it
    const givenUp = () => {
      const error = signal.reason instanceof WorkerStoppedError ? new WebhookHandlerError([signal.reason], event) : new WebhookTimeoutError(event, timeoutMs);
      void this.tell(error, () => `wxhooks: ${error.message}; the message will be delivered again (give webhooks.onError a handler to see these yourself)`);
    };
    signal.addEventListener('abort', givenUp, { once: true });
    try {
      await this.receive(event);
    } catch (error) {
      const failed = error instanceof WebhookHandlerError ? error : new WebhookHandlerError([error], event);
      // a handler given up on (timed out, the worker stopped) was told of then: not a second time
      if (!signal.aborted) await this.tell(failed, () => `wxhooks: ${failed.message}; the message will be delivered again (give webhooks.onError a handler to see these yourself)`);
      // a handler that refuses it for good sends it to the dead letters at once
      throw failed.errors.find((e) => e instanceof MessageRefusedError) ?? failed;
    }
  }
}

/** What `consume`'s check of a message gives its handler: the verified event, besides the pair from its signed content. */
interface Opened {
  pair: Pair;
  type?: string;
  timestamp: number;
  event: WebhookEvent;
}

/** What `webhooks.consume(url, …)` takes: the group and the consumer's limits (the handlers are `on(...)`'s, the store, the check and the timers the instance's). */
export type WebhooksConsumeOptions = Omit<ConsumeOptions, 'handler' | 'store' | 'verify' | 'timers'> & {
  /**
   * Serve `GET /healthz`, `/readyz` (the broker, the store) and Prometheus `/metrics` on this address, a
   * port of the worker's own: `'127.0.0.1:9465'`, or a port on 127.0.0.1 (0 picks a free one: see
   * `consumer.metricsUrl`). Closed by `stop()`.
   */
  metrics?: string | number;
};

export interface NodeMiddlewareOptions {
  /** The path it answers (default `/webhooks`); other paths go to `next()`, or are answered 404. */
  path?: string;
  /** Bodies larger than this are answered 413 (default 25 MiB, as `listen --max-body`). */
  maxBody?: number;
  /** The body bytes held at once across every request (default 256 MiB, as `listen --max-inflight`): past it, 503. */
  maxInflight?: number;
  /** A body must have arrived whole within this many milliseconds (default 60 s, as `listen`'s): past it, 408 and the connection closed. */
  bodyTimeoutMs?: number;
}

type Next = (error?: unknown) => void;
/** A request that a framework may already have read: Express's `express.raw()` leaves the bytes in `body`. */
type NodeRequest = IncomingMessage & { body?: unknown };
/** Where the middleware answers: the response, and Express's `next` (for another path, and for a failure inside wxhooks). */
interface NodeAnswer {
  res: ServerResponse;
  next?: Next;
}

const NODE_FIX = 'mount the middleware before any JSON body parser, or give it the raw bytes (express.raw())';

/** Writes an answer of the table (or a receipt), closing the connection when its body was left unread. */
function write(res: ServerResponse, a: Answer, close: boolean): void {
  if (res.headersSent) return;
  res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(a.body)), ...a.headers, ...(close ? { connection: 'close' } : {}) });
  res.end(a.body);
}

/** `a` or `an`, for the set-up error's words. */
const article = (word: string) => (/^[aeiou]/.test(word) ? `an ${word}` : `a ${word}`);

/** How node:http (and Express, and Fastify's raw request) reads a request and takes an answer: the middleware's part of the door. */
function nodeIO(webhooks: WebhooksCore): DoorIO<NodeRequest, NodeAnswer, Uint8Array> {
  const hooks = hooksOf(webhooks);
  return {
    method: (req) => req.method,
    path: (req) => pathOf(req.url ?? '/'),
    headers: (req) => req.headers,
    length: (req) => req.headers['content-length'],
    given(req) {
      const given = req.body;
      if (given === undefined || given === null) return undefined;
      if (typeof given === 'string') return Buffer.from(given, 'utf8');
      if (given instanceof Uint8Array) return given;
      // express.json() (or the like) ran first: the bytes that were signed are gone
      const what = Array.isArray(given) ? 'an array' : article(typeof given);
      void hooks.setupMistake(
        new WebhookSetupError(
          'body_parsed',
          `a delivery to ${pathOf(req.url ?? '/')} came with its body already parsed (req.body is ${what}): its signed bytes are gone, so it cannot be verified.`,
          `Fix: ${NODE_FIX}.`,
        ),
      );
      return ANSWERS.bodyParsed(NODE_FIX);
    },
    stream: (req, _a, sink) => nodeBody.stream(req, sink),
    alloc: nodeBody.alloc,
    write(req, { res }, answer, how) {
      if (how === 'gone') return false;
      write(res, answer, how === 'refused' || how === 'stopped' || how === 'cut');
      // refused on its headers: its body is not read, and the connection closes after the answer
      if (how === 'refused') req.resume();
      if (how === 'cut') {
        // whatever the client does next, its share of the budget is back, and its connection gone
        res.once('finish', () => req.socket.destroy());
        setTimeout(() => req.socket.destroy(), DEFAULTS.cutOffMs).unref();
      }
      return true;
    },
  };
}

/**
 * A middleware for node:http (`http.createServer(middleware)`) and Express 5 (`app.use(middleware)`): the
 * core's door (src/delivery/door.ts) on node:http. It refuses on the headers what cannot be a delivery
 * before reading a byte of its body, then reads the raw body itself within its limits, or takes the bytes a
 * framework left in `req.body` (`express.raw()`); a body a JSON parser already parsed cannot be verified:
 * it is answered 500 with why, and `onError` (or the log) is told.
 */
export function createNodeMiddleware(webhooks: WebhooksCore, options: NodeMiddlewareOptions = {}) {
  const path = options.path ?? '/webhooks';
  const hooks = hooksOf(webhooks);
  const handle = door(nodeIO(webhooks), {
    path,
    maxBody: options.maxBody ?? DEFAULTS.maxBodyBytes,
    budget: new InflightBudget(options.maxInflight ?? DEFAULTS.maxInflightBytes),
    timeoutMs: options.bodyTimeoutMs ?? bodyTimeoutMs(DEFAULTS.readTimeoutMs),
    refuseEarly: hooks.refuseEarly,
    deliver: (req, body) => webhooks.verifyAndReceive({ headers: req.headers, body }),
    answerOf: (receipt) => receipt,
    failed(_req, { next }, error) {
      if (!next) return false;
      next(error);
      return true;
    },
  });

  return function wxhooksMiddleware(req: NodeRequest, res: ServerResponse, next?: Next): void {
    // another path is the app's
    if (next && pathOf(req.url ?? '/') !== path) return next();
    handle(req, { res, next });
  };
}

/**
 * The stores `listen` uses, for the handlers of an app: `openStore('file', { dir })` keeps processed pairs
 * in a file (one instance, across restarts); `openStore('postgres://…')` in PostgreSQL, shared by every
 * instance of the app (and every `listen --store` on the same schema), so a delivery is processed once
 * whichever instance gets it. Close it when the app stops.
 */
export async function openStore(url: string, options: OpenStoreOptions = {}): Promise<PairStore> {
  if (url === 'file' && !options.dir) throw new TypeError("openStore('file') needs { dir }: the folder the processed pairs are kept in");
  // loaded only when asked for: an app with the default store never loads the file or database code
  const { openPairStore } = await import('../store/open.js');
  const opened = await openPairStore({ door: 'app', ...options, url });
  return opened.store;
}
