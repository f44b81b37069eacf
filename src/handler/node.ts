import { createHash } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MAX_BODY, MAX_INFLIGHT, errorBody } from '../receiver/common.js';
import { DIAGNOSES_PER_MINUTE } from '../signing/rules.js';
import { Verifier } from '../signing/verify.js';
import { InflightBudget, readBody } from '../util/read-body.js';
import type { PairStore } from '../delivery/store.js';
import type { OpenStoreOptions } from '../store/open.js';
import { WebhooksCore, secretsFrom, type WebhooksOptions } from './core.js';

export type { OpenStoreOptions } from '../store/open.js';

/**
 * The handler library's Node entry (`import { Webhooks, createNodeMiddleware } from 'wxhooks'`):
 * verification with Node's crypto, the same as `listen`'s, and a middleware for node:http and Express
 * (Fastify: the body read as a Buffer, then `verifyAndReceive`'s receipt, or this middleware given the raw
 * request with that Buffer as its body: README). `wxhooks/web`
 * (src/handler/web.ts) is the same library for any runtime with Web Crypto.
 */

export class Webhooks extends WebhooksCore {
  constructor(options: WebhooksOptions) {
    // every call verified on its own (a handler serves whoever is configured to send to it: nothing is pinned)
    const verifier = new Verifier({ secret: secretsFrom(options), scheme: options.scheme, tolerance: options.tolerance, pin: false, diagnosePerMinute: DIAGNOSES_PER_MINUTE });
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, Buffer.from(body.buffer, body.byteOffset, body.byteLength), now),
        sha256: (prefix, body) => createHash('sha256').update(prefix).update(body).digest(),
      },
      options,
    );
  }
}

export interface NodeMiddlewareOptions {
  /** The path it answers (default `/webhooks`); other paths go to `next()`, or are answered 404. */
  path?: string;
  /** Bodies larger than this are answered 413 (default 25 MiB, as `listen --max-body`). */
  maxBody?: number;
  /** The body bytes held at once across every request (default 256 MiB, as `listen --max-inflight`): past it, 503. */
  maxInflight?: number;
}

type Next = (error?: unknown) => void;
/** A request that a framework may already have read: Express's `express.raw()` leaves the bytes in `body`. */
type NodeRequest = IncomingMessage & { body?: unknown };

const answer = (res: ServerResponse, status: number, body: string, headers: Record<string, string> = {}) => {
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(body)), ...headers });
  res.end(body);
};

/**
 * A middleware for node:http (`http.createServer(middleware)`) and Express 5 (`app.use(middleware)`). It
 * reads the raw body itself, or takes the bytes a framework left in `req.body` (`express.raw()`); a body
 * a JSON parser already parsed cannot be verified, and is answered 500 with why.
 */
export function createNodeMiddleware(webhooks: WebhooksCore, options: NodeMiddlewareOptions = {}) {
  const path = options.path ?? '/webhooks';
  const maxBody = options.maxBody ?? MAX_BODY;
  const budget = new InflightBudget(options.maxInflight ?? MAX_INFLIGHT);

  const handle = async (req: NodeRequest, res: ServerResponse, body: Uint8Array) => {
    const receipt = await webhooks.verifyAndReceive({ headers: req.headers, body });
    answer(res, receipt.status, receipt.body);
  };

  return function wxhooksMiddleware(req: NodeRequest, res: ServerResponse, next?: Next): void {
    const url = req.url ?? '/';
    const q = url.indexOf('?');
    if ((q === -1 ? url : url.slice(0, q)) !== path) {
      if (next) return next();
      return answer(res, 404, errorBody('not found'));
    }
    if (req.method !== 'POST') return answer(res, 405, errorBody('deliveries are POSTed'), { allow: 'POST' });
    const given = req.body;
    const fail = (error: unknown) => {
      if (next) return next(error);
      if (!res.headersSent) answer(res, 500, errorBody('the handler could not answer'));
    };
    if (typeof given === 'string' || given instanceof Uint8Array) {
      handle(req, res, typeof given === 'string' ? Buffer.from(given, 'utf8') : given).catch(fail);
      return;
    }
    if (given !== undefined && given !== null) {
      // express.json() (or the like) ran first: the bytes that were signed are gone
      return answer(res, 500, errorBody('the body was parsed before wxhooks could verify it: mount the middleware before any JSON body parser, or give it the raw bytes (express.raw())'));
    }
    readBody(req, maxBody, budget, (read) => {
      if (read.kind === 'too_large') return answer(res, 413, errorBody(`the body is over ${maxBody} bytes`), { connection: 'close' });
      if (read.kind === 'over_budget') return answer(res, 503, errorBody('too many bodies in flight; try again later'), { connection: 'close' });
      if (read.kind === 'aborted') return;
      handle(req, res, read.body).then(
        () => budget.give(read.held),
        (error: unknown) => {
          budget.give(read.held);
          fail(error);
        },
      );
    });
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
