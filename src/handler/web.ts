import { ANSWERS, bodyTimeoutMs, type Answer } from '../delivery/answers.js';
import { BodyGatherer, declaredFits, InflightBudget } from '../util/bodies.js';
import { DEFAULTS } from '../delivery/defaults.js';
import { routed } from '../delivery/door.js';
import { utf8 } from '../signing/encoding.js';
import { WebVerifier } from '../signing/verify-web.js';
import { WebhooksCore, WebhookSetupError, secretsFrom, type Receipt, type WebhooksOptions } from './core.js';

/**
 * `wxhooks/web`: the handler library for any runtime with Web Crypto and the Fetch API (Cloudflare
 * Workers, Deno, Bun, Node 20, Hono on any of them). No Node module, no Node Buffer: it is built into one
 * file (dist/web.js) by scripts/bundle.js. The rules are the delivery core's (src/delivery/), as in the
 * Node entry and `listen`; this is a door of the core's shape (src/delivery/door.ts).
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
    const verifier = new WebVerifier({ secret: secretsFrom(options), scheme: options.scheme, tolerance: options.tolerance });
    super(
      {
        verify: (headers, body, now) => verifier.verify(headers, body, now),
        sha256: async (prefix, body) => {
          const p = utf8(prefix);
          const all = new Uint8Array(p.length + body.length);
          all.set(p);
          all.set(body, p.length);
          return new Uint8Array(await crypto.subtle.digest('SHA-256', all as Digestible));
        },
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

const WEB_FIX = 'give the handler the request before anything reads its body (in Hono, c.req.raw, and no c.req.json() before it)';

const respond = (a: Answer | Receipt) => new Response(a.body, { status: a.status, headers: { 'content-type': 'application/json', ...a.headers } });

type Read = { kind: 'body'; body: Uint8Array; release: () => void } | { kind: 'too_large' | 'over_budget' | 'timed_out' | 'aborted' };

/** The body's bytes, read as they come within `max` and the budget (charged for what has arrived), and within `timeoutMs`. */
async function readWithin(request: Request, max: number, budget: InflightBudget, timeoutMs: number): Promise<Read> {
  const length = request.headers.get('content-length');
  const declared = length === null || !/^\d+$/.test(length) ? undefined : Number(length);
  if (declared !== undefined && declared > max) return { kind: 'too_large' };
  if (!declaredFits(budget, declared)) return { kind: 'over_budget' };
  const body = new BodyGatherer<Uint8Array>(max, budget, (n) => new Uint8Array(n), declared);
  if (!request.body) return { kind: 'body', body: body.body(), release: () => undefined };
  const reader = request.body.getReader();
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<'late'>((resolve) => (timer = setTimeout(() => resolve('late'), timeoutMs)));
  try {
    for (;;) {
      const next = await Promise.race([reader.read(), late]);
      const refused = next === 'late' ? 'timed_out' : next.done ? undefined : body.add(next.value);
      if (refused === 'ok') continue;
      if (refused === undefined) return { kind: 'body', body: body.body(), release: () => body.release() };
      void reader.cancel().catch(() => undefined);
      body.release();
      return { kind: refused };
    }
  } catch {
    body.release();
    return { kind: 'aborted' };
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A fetch handler, `(request: Request) => Promise<Response>`: `export default { fetch: handler }` in a
 * Worker or Bun, `Deno.serve(handler)`, `app.post('/webhooks', (c) => handler(c.req.raw))` in Hono. What
 * cannot be a delivery is refused on its headers before its body is read; bodies are read within
 * `maxBody` each and `maxInflight` together.
 */
export function createWebHandler(webhooks: WebhooksCore, options: WebHandlerOptions = {}): (request: Request) => Promise<Response> {
  const maxBody = options.maxBody ?? DEFAULTS.maxBodyBytes;
  const budget = new InflightBudget(options.maxInflight ?? DEFAULTS.maxInflightBytes);
  const timeoutMs = options.bodyTimeoutMs ?? bodyTimeoutMs(DEFAULTS.readTimeoutMs);
  return async (request) => {
    const wrong = routed(request.method, options.path === undefined ? '' : new URL(request.url).pathname, options.path);
    if (wrong) return respond(wrong);
    if (request.bodyUsed) {
      void webhooks.setupMistake(new WebhookSetupError('body_parsed', 'a delivery came with its body already read: its signed bytes are gone, so it cannot be verified.', `Fix: ${WEB_FIX}.`));
      return respond(ANSWERS.bodyParsed(WEB_FIX));
    }
    const early = webhooks.refuseEarly(request.headers);
    if (early) {
      void request.body?.cancel().catch(() => undefined);
      return respond(early);
    }
    const read = await readWithin(request, maxBody, budget, timeoutMs);
    switch (read.kind) {
      case 'too_large':
        return respond(ANSWERS.tooLarge(maxBody));
      case 'over_budget':
        return respond(ANSWERS.overloaded);
      case 'timed_out':
        return respond(ANSWERS.timedOut(timeoutMs));
      case 'aborted':
        return respond(ANSWERS.aborted);
    }
    try {
      return respond(await webhooks.verifyAndReceive({ headers: request.headers, body: read.body }));
    } finally {
      read.release();
    }
  };
}
