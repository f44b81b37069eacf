import * as ANSWERS from '../delivery/answers.js';
import type { Answer } from '../delivery/answers.js';
import * as DEFAULTS from '../delivery/defaults.js';
import type { Outcome } from '../delivery/outcomes.js';
import type { Pair, Verified } from '../delivery/pair.js';
import { verifyAndSettle, type Receiving, type Verdict } from '../delivery/receive.js';
import { markOf } from '../delivery/replay-mark.js';
import { handlerTimeoutFor, type Timers } from '../delivery/runner.js';
import type { Handled } from '../delivery/steps.js';
import type { PairStore } from '../delivery/store.js';
import type { Scheme } from '../signing/layouts.js';
import { examineHeaders, type HeaderSource, type VerifyFailure, type VerifyFailureReason, type VerifyResult, type VerifySuccess } from '../signing/rules.js';
import { isKnownType, SUBSCRIPTION_TYPES, suggestion } from '../vocabulary.js';
import { MemoryStore } from '../delivery/memory-store.js';
import { librarySpan } from '../observe/library.js';
import { watchedReceiving } from '../observe/steps.js';
import { utf8 } from '../signing/encoding.js';
import { andThen } from '../util/then.js';
import type { DeliveryType, WebhookEvent, WebhookEventOf } from './types.js';

/**
 * The handler library's core, runtime-neutral (no Node module): verification by whichever engine the
 * entry gives (Node's crypto in `wxhooks`, Web Crypto in `wxhooks/web`), then the delivery core's
 * `verifyAndSettle` (src/delivery/receive.ts) with the typed handlers as its handle step: the pair claimed
 * before they run (and extended while they run), completed after they resolve, released if one throws or
 * runs past its time, so that the service's retry runs them again. The doors (src/handler/node.ts,
 * web.ts) are adapters of the core's door (src/delivery/door.ts) around `verifyAndReceive`.
 */

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
  store?: PairStore;
  /**
   * Handlers still running after this many milliseconds are let go: 500, the claim released, `onError` told
   * (default: two of the store's leases, 120 s with the default lease of 60 s).
   */
  handlerTimeoutMs?: number;
  /**
   * Where a mistake in the app's set-up (a JSON body parser before the middleware) and a failed handler are
   * said when no `onError` is registered (default `console`: one warning per kind of set-up mistake).
   */
  log?: { warn(message: string): unknown };
  /** The clock, in milliseconds (default `Date.now`): a test passes its own. */
  now?: () => number;
  /** The timers that extend claims and time handlers out (default the runtime's): a test passes its own. */
  timers?: Timers;
}

/** The outcomes a receipt can have: the delivery core's names (src/delivery/outcomes.ts). */
export type ReceiptOutcome = Extract<Outcome, 'accepted' | 'duplicate' | 'in_progress' | 'unverified' | 'bad_request' | 'handler_failed' | 'handler_timed_out' | 'store_failed'>;

/** What became of one request, and what to answer it. */
export interface Receipt {
  /** The HTTP status to answer with. */
  status: number;
  /** The JSON body to answer with. */
  body: string;
  /** Headers to answer with besides `content-type: application/json` (a 503's `Retry-After`). */
  headers?: Readonly<Record<string, string>>;
  outcome: ReceiptOutcome;
  /** The delivery, once verified. */
  event?: WebhookEvent;
  /** Why verification failed, in `listen`'s words. */
  reason?: VerifyFailureReason;
  message?: string;
  hint?: string;
  /** What the handlers threw (`handler_failed`, `handler_timed_out`), or the store (`store_failed`). */
  error?: unknown;
}

/** The handlers of one delivery that threw: all of what they threw, and the delivery. */
export class WebhookHandlerError extends Error {
  constructor(
    readonly errors: unknown[],
    readonly event: WebhookEvent,
    message = `${errors.length} handler${errors.length === 1 ? '' : 's'} of ${event.type} (${event.id}) failed: ${errors.map((e) => (e instanceof Error ? e.message : String(e))).join('; ')}`,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

/** The handlers of one delivery ran past `handlerTimeoutMs`: they were let go (they may still be running), and the delivery will be retried. */
export class WebhookTimeoutError extends WebhookHandlerError {
  constructor(
    event: WebhookEvent,
    readonly timeoutMs: number,
  ) {
    super([], event, `the handlers of ${event.type} (${event.id}) took longer than ${Math.round(timeoutMs / 1000)} s: answered 500 and let go, so the service retries it (they may still be running)`);
  }
}

/** The mistakes in an app's set-up that a door can see. */
export type SetupMistake = 'body_parsed';

/** The app is set up so that deliveries cannot be verified: every delivery is answered 500 until it is fixed. */
export class WebhookSetupError extends Error {
  constructor(
    readonly kind: SetupMistake,
    message: string,
    readonly hint: string,
  ) {
    super(message);
    this.name = 'WebhookSetupError';
  }
}

type Handler<E> = (event: E) => unknown;

/** What an entry brings: its verification and its SHA-256 (for the dedupe key of a layout that does not sign the Trigger-Id). */
export interface Engine {
  verify(headers: HeaderSource, body: Uint8Array, now: number): VerifyResult | Promise<VerifyResult>;
  /** Verifies in the standard layout alone, whatever the scheme: a replay's mark (src/delivery/replay-mark.ts). */
  verifyMark(headers: HeaderSource, body: Uint8Array, now: number): VerifyResult | Promise<VerifyResult>;
  sha256(prefix: string, body: Uint8Array): Uint8Array | Promise<Uint8Array>;
}

const bytesOf = (body: RawBody): Uint8Array => (typeof body === 'string' ? utf8(body) : body instanceof Uint8Array ? body : new Uint8Array(body));

export function secretsFrom(options: WebhooksOptions): string[] {
  const secrets = [...(options.secrets ?? []), ...(options.secret !== undefined ? [options.secret] : [])];
  if (!secrets.length || secrets.some((s) => typeof s !== 'string' || s.length === 0)) {
    throw new TypeError("Webhooks needs the webhook's secret: { secret } or, during a rotation, { secrets: [new, old] } (the current one first)");
  }
  return secrets;
}

const receiptOf = (answer: Answer, extra: Omit<Receipt, 'status' | 'body' | 'outcome'> = {}): Receipt => ({
  status: answer.status,
  body: answer.body,
  ...(answer.headers ? { headers: answer.headers } : {}),
  outcome: answer.outcome as ReceiptOutcome,
  ...extra,
});

const refusal = (f: VerifyFailure): Receipt => receiptOf(ANSWERS.notVerified(f), { reason: f.reason, message: f.message, hint: f.hint });

/** What a door of the library needs of a `Webhooks` besides its public methods: kept off the object, so that an app's instance offers none of them. */
export interface DoorHooks {
  /** What a request is refused with on its headers alone (a header missing, a stale timestamp), before its body is read. */
  refuseEarly(headers: HeaderSource): Receipt | undefined;
  /** A door found a mistake in the app's set-up: `onError` is given it, or the log says it once for each kind. */
  setupMistake(error: WebhookSetupError): Promise<void>;
}

const HOOKS = new WeakMap<object, DoorHooks>();

/** The door hooks of an instance (src/handler/node.ts, web.ts): not exported by either entry. */
export function hooksOf(webhooks: WebhooksCore): DoorHooks {
  const hooks = HOOKS.get(webhooks);
  if (!hooks) throw new TypeError('createNodeMiddleware and createWebHandler take a Webhooks of wxhooks');
  return hooks;
}

/** What handling one verified delivery made of it: the event the handlers got, and what they threw. */
interface Work {
  event: WebhookEvent;
  failed?: WebhookHandlerError;
  handle(): Promise<Handled>;
}

export class WebhooksCore {
  private readonly handlers = new Map<string, Handler<WebhookEvent>[]>();
  private readonly any: Handler<WebhookEvent>[] = [];
  private readonly errorHandlers: ((error: WebhookHandlerError | WebhookSetupError) => unknown)[] = [];
  protected readonly store: PairStore;
  private readonly now: () => number;
  private readonly tolerance: number;
  /** A handler still running after this is given up on (its claim let go): the instance's own, or two of its store's leases. */
  protected readonly handlerTimeoutMs: number;
  protected readonly timers?: Timers;
  private readonly log: { warn(message: string): unknown };
  /** The kinds of set-up mistake already logged: each is said once. */
  private readonly logged = new Set<SetupMistake>();
  private readonly receiving: Receiving<Uint8Array>;

  protected constructor(
    protected readonly engine: Engine,
    options: WebhooksOptions,
  ) {
    this.store = options.store ?? new MemoryStore({ now: options.now });
    this.now = options.now ?? Date.now;
    this.tolerance = options.tolerance ?? DEFAULTS.toleranceSeconds;
    this.handlerTimeoutMs = options.handlerTimeoutMs ?? handlerTimeoutFor(this.store.leaseMs);
    this.timers = options.timers;
    this.log = options.log ?? console;
    // each step told to the delivery's span, when an SDK records it (src/observe/)
    this.receiving = watchedReceiving({ store: this.store, verify: (h, b, now) => this.verified(h, b, now), sha256: engine.sha256, timeoutMs: this.handlerTimeoutMs, timers: this.timers });
    HOOKS.set(this, {
      refuseEarly: (headers) => {
        const h = examineHeaders(headers, this.now(), this.tolerance);
        return h.ok ? undefined : refusal(h);
      },
      setupMistake: (error) =>
        this.tell(error, () => {
          if (this.logged.has(error.kind)) return undefined;
          this.logged.add(error.kind);
          return `wxhooks: ${error.message} ${error.hint} (said once; every delivery is answered 500 until it is fixed)`;
        }),
    });
  }

  /**
   * Runs `handler` for each verified delivery of this type (or these types), once per delivery. A type
   * wxhooks does not know throws here, naming the nearest one (a typo would otherwise lose every delivery
   * of the type meant); one the service added since reaches `onAny`.
   */
  on<T extends DeliveryType>(type: T | readonly T[], handler: Handler<WebhookEventOf<T>>): this {
    const types: readonly string[] = typeof type === 'string' ? [type] : type;
    for (const t of types) {
      if (!isKnownType(t)) {
        throw new TypeError(
          `webhooks.on(${JSON.stringify(t)}): not a delivery type wxhooks knows (${suggestion(t, SUBSCRIPTION_TYPES)}). A type the service added since reaches onAny(handler): look at event.type there.`,
        );
      }
    }
    for (const t of types) {
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

  /**
   * Called when a delivery's handlers threw or ran past their time (`WebhookHandlerError`,
   * `WebhookTimeoutError`: the delivery is answered 500, and the service retries it), and when the app's
   * set-up keeps deliveries from being verified (`WebhookSetupError`).
   */
  onError(handler: (error: WebhookHandlerError | WebhookSetupError) => unknown): this {
    this.errorHandlers.push(handler);
    return this;
  }

  /** Verifies a delivery, in `listen`'s words when it fails. */
  async verify(request: { headers: HeaderSource; body: RawBody }): Promise<VerifyResult> {
    return this.engine.verify(request.headers, bytesOf(request.body), this.now());
  }

  /** A delivery verified, and, when it carries a replay's mark that verifies too, the replay's id (its dedupe key: it runs once per replay). */
  private verified(headers: HeaderSource, body: Uint8Array, now: number): VerifyResult | PromiseLike<VerifyResult> {
    return andThen(this.engine.verify(headers, body, now), (v) => {
      const mark = v.ok ? markOf(headers) : undefined;
      if (!mark) return v;
      return andThen(this.engine.verifyMark(mark, body, now), (m): VerifyResult => (m.ok ? ({ ...v, replayId: m.triggerId } as Verified) : v));
    });
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
   * handler threw or ran past its time, 409 while another instance is processing it, 503 when the store
   * cannot be reached).
   */
  async verifyAndReceive(request: { headers: HeaderSource; body: RawBody }): Promise<Receipt> {
    const body = bytesOf(request.body);
    // in a span of its own, which the handlers run inside (a no-op unless the app registered an OpenTelemetry SDK)
    return librarySpan(
      body.length,
      () =>
        verifyAndSettle(
          this.receiving,
          request.headers,
          body,
          this.now(),
          (v, pair) => this.work(v, pair),
          (d) => this.receipt(d),
        ) as Promise<Receipt>,
    );
  }

  /** The handlers as the runner's handle step: what they threw is kept for the receipt and `onError`. */
  private work(v: VerifySuccess, pair: Pair): Work {
    const event = eventFrom(v, pair);
    const work: Work = {
      event,
      handle: async () => {
        try {
          await this.receive(event);
          return { ok: true, status: 200 };
        } catch (error) {
          work.failed = error instanceof WebhookHandlerError ? error : new WebhookHandlerError([error], event);
          return { ok: false, answer: ANSWERS.handlerFailed, error: work.failed };
        }
      },
    };
    return work;
  }

  private async receipt(d: Verdict<Work>): Promise<Receipt> {
    if (!d.verified) return refusal(d.failure);
    const { work, settled } = d;
    // (a handler that ran past its time may throw later: that is no longer this delivery's failure)
    const failed = settled.timedOut ? new WebhookTimeoutError(work.event, this.handlerTimeoutMs) : work.failed;
    // what the handler threw stays here (onError, the receipt): the sender is told only that it failed
    if (failed) await this.tell(failed, () => `wxhooks: ${failed.message}; the delivery will be retried (give webhooks.onError a handler to see these yourself)`);
    const error = failed ?? settled.claimFailed ?? (settled.stored && !settled.stored.ok ? settled.stored.error : undefined);
    return receiptOf(settled.answer, error === undefined ? { event: work.event } : { event: work.event, error });
  }

  /** Gives an error to every `onError` handler; with none, says `line()` (if any) to the log. */
  protected async tell(error: WebhookHandlerError | WebhookSetupError, line: () => string | undefined): Promise<void> {
    if (!this.errorHandlers.length) {
      const text = line();
      if (text !== undefined) this.log.warn(text);
      return;
    }
    for (const h of this.errorHandlers) {
      try {
        await h(error);
      } catch {
        // an error handler's own failure changes nothing: the delivery is answered 500 either way
      }
    }
  }
}

/**
 * A verified delivery as the handlers get it (its payload typed by what the service sends: its type is not
 * checked, only verified): one rule for every way in (a request, a sink's message in the Node entry).
 */
export function eventFrom(v: Verified, pair: Pair): WebhookEvent {
  const payload = v.payload;
  const event = {
    type: payload.type as DeliveryType,
    id: pair.trigger,
    subscriptionId: pair.subscription,
    payload,
    signature: { layout: v.layout, timestamp: v.timestamp, triggerId: v.triggerId, secretIndex: v.secretIndex },
  } as unknown as WebhookEvent;
  if (pair.replayOf !== undefined) event.replay = { id: pair.trigger, of: pair.replayOf };
  if (pair.catchUp) event.catchUp = true;
  return event;
}
