import { DUPLICATE_BODY, IN_PROGRESS_BODY, OK_BODY, errorBody, hashedPair, pairFrom, statusForFailure, type Pair } from '../receiver/common.js';
import type { Scheme } from '../signing/layouts.js';
import type { HeaderSource, VerifyFailureReason, VerifyResult } from '../signing/rules.js';
import { MemoryStore } from '../delivery/memory-store.js';
import type { Claim } from '../store/pair-store.js';
import type { DeliveryType, WebhookEvent, WebhookEventOf } from './types.js';

/**
 * The handler library's core, runtime-neutral (no Node module): verification by whichever engine the
 * entry gives (Node's crypto in `wxhooks`, Web Crypto in `wxhooks/web`), then `listen`'s rule of exactly
 * once: the pair (trigger, subscription) claimed before the handlers run, marked done after they
 * resolve, released if one throws, so that the service's retry runs them again.
 */

/**
 * Where processed pairs are kept. `MemoryStore` by default; in Node, the stores `listen` uses
 * (`openPairStore`: a file, or PostgreSQL shared by several instances) have the same three methods.
 */
export interface HandlerStore {
  claim(trigger: string, subscription: string): Promise<Claim>;
  complete(trigger: string, subscription: string): Promise<void>;
  release(trigger: string, subscription: string): Promise<void>;
}

export { MemoryStore, type MemoryStoreOptions } from '../delivery/memory-store.js';

/** A body as received: its raw bytes (preferred), or a string taken as its UTF-8. */
export type RawBody = Uint8Array | ArrayBuffer | string;

export interface WebhooksOptions {
  /** The webhook's secret. */
  secret?: string;
  /** Several secrets during a rotation: a delivery signed with any of them is accepted. */
  secrets?: readonly string[];
  /** Seconds a timestamp may be off the clock, either way (default 300). */
  tolerance?: number;
  /** `auto` (default) tries every layout that signs the timestamp; a name pins one (`hex-body` only so). */
  scheme?: Scheme;
  /** Where processed pairs are kept (default: a MemoryStore). */
  store?: HandlerStore;
  /** The clock, in milliseconds (default `Date.now`): a test passes its own. */
  now?: () => number;
}

/** What became of one request, and what to answer it. */
export interface Receipt {
  /** The HTTP status to answer with. */
  status: number;
  /** The JSON body to answer with. */
  body: string;
  outcome: 'processed' | 'duplicate' | 'in_progress' | 'unverified' | 'bad_request' | 'handler_failed' | 'store_failed';
  /** The delivery, once verified. */
  event?: WebhookEvent;
  /** Why verification failed, in `listen`'s words. */
  reason?: VerifyFailureReason;
  message?: string;
  hint?: string;
  /** What the handlers threw (`handler_failed`), or the store (`store_failed`). */
  error?: unknown;
}

/** The handlers of one delivery that threw: all of what they threw, and the delivery. */
export class WebhookHandlerError extends Error {
  constructor(
    readonly errors: unknown[],
    readonly event: WebhookEvent,
  ) {
    super(`${errors.length} handler${errors.length === 1 ? '' : 's'} of ${event.type} (${event.id}) failed: ${errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')}`);
    this.name = 'WebhookHandlerError';
  }
}

type Handler<E> = (event: E) => unknown;

/** What an entry brings: its verification and its SHA-256 (for the dedupe key of a layout that does not sign the Trigger-Id). */
export interface Engine {
  verify(headers: HeaderSource, body: Uint8Array, now: number): VerifyResult | Promise<VerifyResult>;
  sha256(prefix: string, body: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

const encoder = new TextEncoder();
const bytesOf = (body: RawBody): Uint8Array => (typeof body === 'string' ? encoder.encode(body) : body instanceof Uint8Array ? body : new Uint8Array(body));

export function secretsFrom(options: WebhooksOptions): string[] {
  const secrets = [...(options.secrets ?? []), ...(options.secret !== undefined ? [options.secret] : [])];
  if (!secrets.length || secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError('Webhooks needs the webhook\'s secret: { secret } or, during a rotation, { secrets: [old, new] }');
  }
  return secrets;
}

export class WebhooksCore {
  private readonly handlers = new Map<string, Handler<WebhookEvent>[]>();
  private readonly any: Handler<WebhookEvent>[] = [];
  private readonly errorHandlers: ((error: WebhookHandlerError) => unknown)[] = [];
  private readonly store: HandlerStore;
  private readonly now: () => number;

  protected constructor(
    private readonly engine: Engine,
    options: WebhooksOptions,
  ) {
    this.store = options.store ?? new MemoryStore({ now: options.now });
    this.now = options.now ?? Date.now;
  }

  /** Runs `handler` for each verified delivery of this type (or these types), once per delivery. */
  on<T extends DeliveryType>(type: T | readonly T[], handler: Handler<WebhookEventOf<T>>): this {
    for (const t of typeof type === 'string' ? [type] : type) {
      const list = this.handlers.get(t) ?? [];
      list.push(handler as Handler<WebhookEvent>);
      this.handlers.set(t, list);
    }
    return this;
  }

  /** Runs `handler` for every verified delivery, of any type (one the vocabulary does not know too). */
  onAny(handler: Handler<WebhookEvent>): this {
    this.any.push(handler);
    return this;
  }

  /** Called when a delivery's handlers threw (the delivery is answered 500, and the service retries it). */
  onError(handler: (error: WebhookHandlerError) => unknown): this {
    this.errorHandlers.push(handler);
    return this;
  }

  /** Verifies a delivery, in `listen`'s words when it fails. */
  async verify(request: { headers: HeaderSource; body: RawBody }): Promise<VerifyResult> {
    return this.engine.verify(request.headers, bytesOf(request.body), this.now());
  }

  /** Runs the handlers of an event already verified (no dedupe): a test's way in. Rejects with WebhookHandlerError if one throws. */
  async receive(event: WebhookEvent): Promise<void> {
    const list = [...(this.handlers.get(event.type) ?? []), ...this.any];
    const results = await Promise.allSettled(list.map(async (h) => h(event)));
    const errors = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
    if (errors.length) throw new WebhookHandlerError(errors, event);
  }

  /**
   * Verifies a delivery, then runs its handlers once: what to answer is in the receipt (2xx when every
   * handler resolved or the delivery was processed before, 401/400 when it did not verify, 500 when a
   * handler threw, 409 while another instance is processing it, 503 when the store cannot be reached).
   */
  async verifyAndReceive(request: { headers: HeaderSource; body: RawBody }): Promise<Receipt> {
    const bytes = bytesOf(request.body);
    const v = await this.engine.verify(request.headers, bytes, this.now());
    if (!v.ok) {
      const status = statusForFailure(v);
      return {
        status,
        body: JSON.stringify({ error: v.message, reason: v.reason, ...(v.hint ? { hint: v.hint } : {}) }),
        outcome: status === 400 ? 'bad_request' : 'unverified',
        reason: v.reason,
        message: v.message,
        hint: v.hint,
      };
    }
    const found = pairFrom(v);
    const pair: Pair = 'trigger' in found ? found : hashedPair(found.subscription, await this.engine.sha256(found.hashPrefix, bytes));
    const payload = v.payload;
    // the payload is typed by what the service sends; its type is not checked here, only verified
    const event = {
      type: payload.type as DeliveryType,
      id: pair.trigger,
      subscriptionId: pair.subscription,
      payload,
      signature: { layout: v.layout, timestamp: v.timestamp, triggerId: v.triggerId, secretIndex: v.secretIndex },
    } as unknown as WebhookEvent;
    let claim: Claim;
    try {
      claim = await this.store.claim(pair.trigger, pair.subscription);
    } catch (error) {
      return { status: 503, body: errorBody('the processed pairs cannot be read now; try again later'), outcome: 'store_failed', event, error };
    }
    if (claim === 'done' || claim === 'stored_now') return { status: 200, body: DUPLICATE_BODY, outcome: 'duplicate', event };
    if (claim === 'held') return { status: 409, body: IN_PROGRESS_BODY, outcome: 'in_progress', event };
    try {
      await this.receive(event);
    } catch (error) {
      await this.store.release(pair.trigger, pair.subscription);
      const failed = error instanceof WebhookHandlerError ? error : new WebhookHandlerError([error], event);
      for (const h of this.errorHandlers) {
        try {
          await h(failed);
        } catch {
          // an error handler's own failure changes nothing: the delivery is answered 500 either way
        }
      }
      // what the handler threw stays here (onError, the receipt): the sender is told only that it failed
      return { status: 500, body: errorBody('a handler failed; the delivery will be retried'), outcome: 'handler_failed', event, error: failed };
    }
    try {
      await this.store.complete(pair.trigger, pair.subscription);
    } catch (error) {
      // processed, not stored: the store keeps it as processed, so the retry this 503 brings is a duplicate
      return { status: 503, body: errorBody('the delivery could not be recorded as processed; try again later'), outcome: 'store_failed', event, error };
    }
    return { status: 200, body: OK_BODY, outcome: 'processed', event };
  }
}
