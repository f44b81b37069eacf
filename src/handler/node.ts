import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ANSWERS, bodyTimeoutMs, type Answer } from '../delivery/answers.js';
import { DEFAULTS } from '../delivery/defaults.js';
import { pathOf, routed } from '../delivery/door.js';
import type { PairStore } from '../delivery/store.js';
import { Verifier } from '../signing/verify.js';
import { InflightBudget, readBody } from '../util/read-body.js';
import type { OpenStoreOptions } from '../store/open.js';
import { MessageRefusedError, type ConsumedMessage } from '../sinks/consumer.js';
import type { ConsumeOptions, SinkConsumer } from '../sinks/sink.js';
import { WebhooksCore, WebhookHandlerError, WebhookSetupError, secretsFrom, type Receipt, type WebhooksOptions } from './core.js';

export type { OpenStoreOptions } from '../store/open.js';

/**
 * The handler library's Node entry (`import { Webhooks, createNodeMiddleware } from 'wxhooks'`):
 * verification with Node's crypto, the same as `listen`'s, and a middleware for node:http and Express
 * (Fastify: the body read as a Buffer, then `verifyAndReceive`'s receipt, or this middleware given the raw
 * request with that Buffer as its body: README). `wxhooks/web` (src/handler/web.ts) is the same library
 * for any runtime with Web Crypto; both are doors of the delivery core's shape (src/delivery/door.ts).
 */

export type { CatchUpOptions, CaughtUp } from './catch-up.js';

export class Webhooks extends WebhooksCore {
  /** The secret a catch-up is signed with (the newest of a rotation's). */
  private readonly catchUpSecret: string;

  constructor(options: WebhooksOptions) {
    // every call verified on its own (a handler serves whoever is configured to send to it: nothing is pinned)
    const verifier = new Verifier({ secret: secretsFrom(options), scheme: options.scheme, tolerance: options.tolerance, pin: false });
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, Buffer.from(body.buffer, body.byteOffset, body.byteLength), now),
        sha256: (prefix, body) => createHash('sha256').update(prefix).update(body).digest(),
      },
      options,
    );
    this.catchUpSecret = secretsFrom(options).at(-1)!;
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
   * each message is verified again with this instance's secrets (as of when `listen` received it) and
   * given to the handlers of `on(...)` as a `WebhookEvent`, exactly as a delivery is; it is acknowledged
   * only once they resolved, with its pair claimed and completed in this instance's store, so that a
   * handler runs once per pair even when the broker delivers a message twice. A handler that throws goes
   * to `onError`, and its message is delivered again after `retryDelayMs`, up to `maxDeliveries`, then
   * to the dead letters; a message whose body is not a JSON object, or that does not verify, goes there at
   * once, with why (as does one whose handler throws a `MessageRefusedError`). Resolves once it reads;
   * `stop()` lets the handlers under way finish.
   */
  async consume(url: string, options: WebhooksConsumeOptions): Promise<SinkConsumer> {
    const { consume } = await import('../sinks/index.js'); // the brokers' clients only when asked for
    return consume(url, { ...options, store: this.pairStore, handler: (m) => this.consumeOne(m) });
  }

  private async consumeOne(m: ConsumedMessage): Promise<void> {
    const received = Date.parse(m.receivedAt);
    const v = await this.verifyAt(m.headers, m.body, received);
    if (!v.ok) throw new MessageRefusedError(`it does not verify with this webhook's secret as of when it was received (${m.receivedAt}): ${v.message}`);
    const { event } = await this.eventOf(v, m.body);
    try {
      await this.receiveOrTell(event);
    } catch (error) {
      // a handler that refuses it for good sends it to the dead letters at once
      const refused = error instanceof WebhookHandlerError ? error.errors.find((e) => e instanceof MessageRefusedError) : undefined;
      throw refused ?? error;
    }
  }
}

/** What `webhooks.consume(url, …)` takes: the group and the consumer's limits (the handlers are `on(...)`'s, the store the instance's). */
export type WebhooksConsumeOptions = Omit<ConsumeOptions, 'handler' | 'store'>;

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

const NODE_FIX = 'mount the middleware before any JSON body parser, or give it the raw bytes (express.raw())';

/** Writes an answer of the table (or a receipt), closing the connection when its body was left unread. */
function write(res: ServerResponse, a: Answer | Receipt, unread = false): void {
  if (res.headersSent) return;
  res.writeHead(a.status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(a.body)), ...a.headers, ...(unread ? { connection: 'close' } : {}) });
  res.end(a.body);
}

/**
 * A middleware for node:http (`http.createServer(middleware)`) and Express 5 (`app.use(middleware)`). It
 * refuses on the headers what cannot be a delivery before reading a byte of its body, then reads the raw
 * body itself within its limits, or takes the bytes a framework left in `req.body` (`express.raw()`); a
 * body a JSON parser already parsed cannot be verified: it is answered 500 with why, and `onError` (or the
 * log) is told.
 */
export function createNodeMiddleware(webhooks: WebhooksCore, options: NodeMiddlewareOptions = {}) {
  const path = options.path ?? '/webhooks';
  const maxBody = options.maxBody ?? DEFAULTS.maxBodyBytes;
  const budget = new InflightBudget(options.maxInflight ?? DEFAULTS.maxInflightBytes);
  const timeoutMs = options.bodyTimeoutMs ?? bodyTimeoutMs(DEFAULTS.readTimeoutMs);

  const handle = async (req: NodeRequest, res: ServerResponse, body: Uint8Array) => write(res, await webhooks.verifyAndReceive({ headers: req.headers, body }));

  return function wxhooksMiddleware(req: NodeRequest, res: ServerResponse, next?: Next): void {
    const here = pathOf(req.url ?? '/');
    if (here !== path && next) return next();
    const wrong = routed(req.method, here, path);
    if (wrong) return write(res, wrong);
    const fail = (error: unknown) => {
      if (next) return next(error);
      write(res, ANSWERS.internal);
    };
    const given = req.body;
    if (typeof given === 'string' || given instanceof Uint8Array) {
      handle(req, res, typeof given === 'string' ? Buffer.from(given, 'utf8') : given).catch(fail);
      return;
    }
    if (given !== undefined && given !== null) {
      // express.json() (or the like) ran first: the bytes that were signed are gone
      write(res, ANSWERS.bodyParsed(NODE_FIX));
      void webhooks.setupMistake(
        new WebhookSetupError(
          'body_parsed',
          `a delivery to ${here} came with its body already parsed (req.body is ${Array.isArray(given) ? 'an array' : `a ${typeof given}`}): its signed bytes are gone, so it cannot be verified.`,
          `Fix: ${NODE_FIX}.`,
        ),
      );
      return;
    }
    const early = webhooks.refuseEarly(req.headers);
    if (early) {
      // refused on its headers: its body is not read, and the connection closes after the answer
      write(res, early, true);
      req.resume();
      return;
    }
    readBody(
      req,
      maxBody,
      budget,
      (read) => {
        if (read.kind === 'aborted') return;
        if (read.kind === 'too_large') return write(res, ANSWERS.tooLarge(maxBody), true);
        if (read.kind === 'over_budget') return write(res, ANSWERS.overloaded, true);
        if (read.kind === 'timed_out') {
          // whatever the client does next, its share of the budget is back, and its connection gone
          write(res, ANSWERS.timedOut(timeoutMs), true);
          res.once('finish', () => req.socket.destroy());
          setTimeout(() => req.socket.destroy(), 1000).unref();
          return;
        }
        handle(req, res, read.body).then(
          () => budget.give(read.held),
          (error: unknown) => {
            budget.give(read.held);
            fail(error);
          },
        );
      },
      { timeoutMs },
    );
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
