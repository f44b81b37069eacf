import * as ANSWERS from '../delivery/answers.js';
import { bodyTimeoutMs, type Answer } from '../delivery/answers.js';
import { InflightBudget, webBody } from '../util/bodies.js';
import * as DEFAULTS from '../delivery/defaults.js';
import { door, type DoorIO } from '../delivery/door.js';
import { prefixed } from '../signing/encoding.js';
import { WebVerifier } from '../signing/verify-web.js';
import { hooksOf, WebhooksCore, WebhookSetupError, secretsFrom, type WebhooksOptions } from './core.js';

/**
 * `wxhooks/web`: the handler library for any runtime with Web Crypto and the Fetch API (Cloudflare
 * Workers, Deno, Bun, Node 20, Hono on any of them). No Node module, no Node Buffer: it is built into one
 * file (dist/web.js) by scripts/bundle.js. The rules are the delivery core's (src/delivery/), as in the
 * Node entry and `listen`; this is an adapter of the core's door (src/delivery/door.ts).
 */

export { WebhookHandlerError, WebhookSetupError, WebhookTimeoutError, type Receipt, type ReceiptOutcome, type RawBody, type WebhooksOptions } from './core.js';
export { MemoryStore, type MemoryStoreOptions } from '../delivery/memory-store.js';
export type { Claim, PairStore } from '../delivery/store.js';
export type * from './types.js';
export { WebVerifier, verifyDelivery, type WebVerifierOptions } from '../signing/verify-web.js';
export { signDelivery, type SignedHeaders, type SignOptions } from '../signing/sign-web.js';
export type { VerifyOptions } from '../signing/verify.js';
export type { VerifyResult, VerifySuccess, VerifyFailure, VerifyFailureReason, HeaderSource } from '../signing/rules.js';

type Digestible = Parameters<typeof crypto.subtle.digest>[1];

export class Webhooks extends WebhooksCore {
  constructor(options: WebhooksOptions) {
    const secret = secretsFrom(options);
    const verifier = new WebVerifier({ secret, scheme: options.scheme, tolerance: options.tolerance });
    const marks = new WebVerifier({ secret, scheme: 'standard', tolerance: options.tolerance, diagnosePerMinute: 0 });
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, body, now),
        verifyMark: (headers, body, now) => marks.verify(headers, body, now),
        sha256: async (prefix, body) => new Uint8Array(await crypto.subtle.digest('SHA-256', prefixed(prefix, body) as Digestible)),
      },
      options,
    );
  }
}

export interface WebHandlerOptions {
  /** Answer only this path (default: every path); others are answered 404. */
  path?: string;
  /** Bodies larger than this are answered 413 (default 25 MiB, as `listen --max-body`). */
  maxBody?: number;
  /** The body bytes held at once across every request (default 256 MiB, as `listen --max-inflight`): past it, 503. */
  maxInflight?: number;
  /** A body must have arrived whole within this many milliseconds (default 60 s, as `listen`'s): past it, 408. */
  bodyTimeoutMs?: number;
}

/**
 * The copies of a body held while Web Crypto verifies it: the body, the bytes signed (its prefix and the
 * body, in one buffer), and Web Crypto's own copy of them. Each byte read costs this many of `maxInflight`,
 * so that what senders make a runtime hold stays within it: in Deno, 20 unsigned 8 MiB bodies against a
 * 64 MiB budget peaked 193 MiB over the idle process when a byte cost one (the bodies and those copies).
 */
const VERIFIED_COPIES = 3;

const WEB_FIX = 'give the handler the request before anything reads its body (in Hono, c.req.raw, and no c.req.json() before it)';

const respond = (a: Answer) => new Response(a.body, { status: a.status, headers: { 'content-type': 'application/json', ...a.headers } });

/** How a fetch runtime reads a Request and takes an answer (a Response, to resolve the handler's promise with): the web handler's part of the door. */
function webIO(webhooks: WebhooksCore, anyPath: boolean): DoorIO<Request, (response: Response) => void, Uint8Array> {
  const hooks = hooksOf(webhooks);
  return {
    method: (request) => request.method,
    // a handler for every path reads none (a URL parsed for nothing costs every request)
    path: (request) => (anyPath ? '' : new URL(request.url).pathname),
    headers: (request) => request.headers,
    length: (request) => request.headers.get('content-length'),
    given(request) {
      if (!request.bodyUsed) return undefined;
      void hooks.setupMistake(new WebhookSetupError('body_parsed', 'a delivery came with its body already read: its signed bytes are gone, so it cannot be verified.', `Fix: ${WEB_FIX}.`));
      return ANSWERS.bodyParsed(WEB_FIX);
    },
    stream: (request, _resolve, sink) => webBody.stream(request, sink),
    alloc: webBody.alloc,
    write(request, resolve, answer, how) {
      // refused on its headers: its body is not read
      if (how === 'refused') void request.body?.cancel().catch(() => undefined);
      // a fetch handler answers whatever became of the request (the client that went away gets a 400 nobody reads)
      resolve(respond(answer));
      return true;
    },
  };
}

/**
 * A fetch handler, `(request: Request) => Promise<Response>`: `export default { fetch: handler }` in a
 * Worker or Bun, `Deno.serve(handler)`, `app.post('/webhooks', (c) => handler(c.req.raw))` in Hono: the
 * core's door (src/delivery/door.ts) on the Fetch API. What cannot be a delivery is refused on its headers
 * before its body is read; bodies are read within `maxBody` each and `maxInflight` together.
 */
export function createWebHandler(webhooks: WebhooksCore, options: WebHandlerOptions = {}): (request: Request) => Promise<Response> {
  const handle = door(webIO(webhooks, options.path === undefined), {
    path: options.path,
    maxBody: options.maxBody ?? DEFAULTS.maxBodyBytes,
    budget: new InflightBudget(options.maxInflight ?? DEFAULTS.maxInflightBytes),
    copies: VERIFIED_COPIES,
    timeoutMs: options.bodyTimeoutMs ?? bodyTimeoutMs(DEFAULTS.readTimeoutMs),
    refuseEarly: hooksOf(webhooks).refuseEarly,
    deliver: (request, body) => webhooks.verifyAndReceive({ headers: request.headers, body }),
    answerOf: (receipt) => receipt,
  });
  return (request) => new Promise((resolve) => handle(request, resolve));
}
