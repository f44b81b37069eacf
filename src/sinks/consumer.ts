import * as ANSWERS from '../delivery/answers.js';
import * as DEFAULTS from '../delivery/defaults.js';
import type { Outcome } from '../delivery/outcomes.js';
import type { Pair } from '../delivery/pair.js';
import { handlerTimeoutFor, settle as settleOnce, systemTimers, type Timers } from '../delivery/runner.js';
import type { Handled } from '../delivery/steps.js';
import type { PairStore } from '../delivery/store.js';
import { UsageError } from '../errors.js';
import { pairKey, type Decoded, type SinkMessage } from './message.js';

/**
 * What a consumer does with one message the broker handed it, whichever the broker: refuse what is not
 * ours; verify it and take its pair from what is signed, refusing a message whose envelope says otherwise;
 * run the handler once per pair (the core's runner: claim, handle within its time, complete or let go);
 * acknowledge only when it resolved; give a failed one back to be delivered again after a delay, and past
 * the limit move it to the dead letters, with why. It reports the core's outcome (src/delivery/outcomes.ts).
 * The broker modules (nats.ts, redis.ts) read, acknowledge and move; this decides.
 */

/** A message as the handler gets it: the delivery, and the broker's id, count and time of it. */
export interface ConsumedMessage extends SinkMessage {
  /** The broker's id: the JetStream stream sequence, or the Redis entry id. */
  id: string;
  /** How many times the broker has handed it out, this time included. */
  deliveries: number;
  /**
   * When the broker stored it (ms since 1970): the Redis entry id's time, the JetStream message's
   * timestamp. A message is verified as of this, which no one can write into the message (`received_at`
   * can be).
   */
  storedAt: number;
}

/** What a consumer's `verify` found in a message's signed content: its pair, type and timestamp, never the envelope's. */
export interface VerifiedMessage {
  /** The pair, from the signed Trigger-Id and the verified body, as the stores key it. */
  pair: Pair;
  /** The verified body's `type`. */
  type?: string;
  /** The signed Webhook-Timestamp. */
  timestamp: number;
}

/** The outcomes a consumer reports: the core's names (src/delivery/outcomes.ts). */
export const CONSUMER_OUTCOMES: readonly ['accepted', 'duplicate', 'in_progress', 'store_failed', 'handler_failed', 'handler_timed_out', 'dead_lettered'] = [
  'accepted',
  'duplicate',
  'in_progress',
  'store_failed',
  'handler_failed',
  'handler_timed_out',
  'dead_lettered',
] as const satisfies readonly Outcome[];
export type ConsumerOutcome = (typeof CONSUMER_OUTCOMES)[number];

/** Why a message went to the dead letters. */
export const DEAD_LETTER_CAUSES = ['not_ours', 'unverified', 'envelope_mismatch', 'refused_by_handler', 'delivery_limit'] as const;
export type DeadLetterCause = (typeof DEAD_LETTER_CAUSES)[number];

/** One thing a consumer did, for its caller to show or count (a consumer never prints). */
export interface ConsumerEvent {
  /**
   * - `accepted`: the handler resolved, its pair stored; acknowledged;
   * - `duplicate`: its pair was processed before; acknowledged, the handler not run;
   * - `in_progress`: another worker holds its pair now; kept, and claimed again after `retryInMs`;
   * - `store_failed`: the pair store could not be reached; kept, and tried again after `retryInMs`;
   * - `handler_failed`: the handler threw; given back, delivered again after `retryInMs`;
   * - `handler_timed_out`: the handler ran past its time, or was still running when the worker stopped; given back as a failed one;
   * - `dead_lettered`: moved to the dead letters (`deadLetter`), with `cause` and `reason`.
   */
  outcome: ConsumerOutcome;
  id: string;
  deliveries: number;
  /** The pair's key: from the signed content once verified (the envelope's before, or without `verify`). */
  key?: string;
  type?: string;
  /** When it will be tried again (`in_progress`, `store_failed`, `handler_failed`, `handler_timed_out`). */
  retryInMs?: number;
  /** `dead_lettered`: why, as a code. */
  cause?: DeadLetterCause;
  /** Why it was dead-lettered, or given up on, in words. */
  reason?: string;
  /** Where it went: the dead-letter subject or stream. */
  deadLetter?: string;
  /** What the handler threw, or the store, or the broker (an acknowledgement that did not go). */
  error?: unknown;
  /** How long the handler took, in ms. */
  ms?: number;
}

/** One delivery of one message, as a broker module hands it over. */
export interface Inbound {
  id: string;
  deliveries: number;
  /** When the broker stored it (ms since 1970): its own id or timestamp. */
  storedAt: number;
  decoded: Decoded;
  ack(): Promise<void>;
  /** Gives it back to the group, to be delivered again (to any worker) after `delayMs`. */
  retry(delayMs: number): Promise<void>;
  /** Moves it to the dead letters with why, and acknowledges it; resolves with where it went. */
  deadLetter(reason: string, deliveries: number): Promise<string>;
  /** Tells the broker it is still being worked on, so that it is not handed to another worker. */
  touch(): Promise<void>;
}

export interface ConsumerSettings {
  handler(message: ConsumedMessage, verified: VerifiedMessage | undefined, signal: AbortSignal): unknown;
  verify?(message: ConsumedMessage): VerifiedMessage | Promise<VerifiedMessage>;
  store?: PairStore;
  retryDelayMs: number;
  maxDeliveries: number;
  /** How long the broker lets a message go unanswered before another worker gets it: touched every third of it. */
  claimTimeoutMs: number;
  handlerTimeoutMs: number;
  timers: Timers;
  /** The consumer's stop: once it began, no message is taken, and one waiting for the store is given back at once; past its time, the handlers still running are given up on. */
  stop: Stopper;
  report: (event: ConsumerEvent) => void;
}

/**
 * Thrown by a handler (or a consumer's `verify`) that will never take this message (its body is not a
 * JSON object, it does not verify with the webhook's secret): the message goes to the dead letters at
 * once, with this message as the reason, rather than being delivered again.
 */
export class MessageRefusedError extends Error {
  override readonly name = 'MessageRefusedError';
}

/** The worker stopped before the handler finished: it is given up on, and its message given back. */
export class WorkerStoppedError extends Error {
  override readonly name = 'WorkerStoppedError';
}

const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Resolves after `ms`, or at once when the consumer stops. */
function pause(ms: number, stop: Stopper, timers: Timers): Promise<void> {
  if (stop.stopping) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      timers.clear(timer);
      unlisten();
      resolve();
    };
    const timer = timers.set(done, ms);
    const unlisten = stop.onStop(done);
  });
}

/**
 * No store: every delivery of the broker is new to it (at least once). The core's runner then claims,
 * handles and completes as it does with a store, so that exactly-once has one home (src/delivery/runner.ts).
 */
const EVERY_TIME: PairStore = {
  where: 'nowhere (no store: once per delivery of the broker)',
  leaseMs: 0,
  claim: () => Promise.resolve('won'),
  extend: () => Promise.resolve(true),
  complete: () => Promise.resolve(),
  release: () => Promise.resolve(),
  close: () => Promise.resolve(),
};

/** A handler's run as the runner's handle step: resolved is processed; what it threw is kept for the report. */
async function handled(run: Promise<unknown>): Promise<Handled> {
  try {
    await run;
    return { ok: true, status: 200 };
  } catch (error) {
    return { ok: false, answer: ANSWERS.handlerFailed, error };
  }
}

/** Where a message's envelope disagrees with what its signed content gives, in words; undefined when it agrees. */
export function envelopeDisagreement(envelope: SinkMessage, signed: VerifiedMessage): string | undefined {
  const fields: [string, unknown, unknown][] = [
    ['trigger', envelope.trigger, signed.pair.trigger],
    ['subscription', envelope.subscription, signed.pair.subscription],
    ['source', envelope.source, signed.pair.source],
    ['type', envelope.type, signed.type],
    ['timestamp', envelope.timestamp, signed.timestamp],
  ];
  const differ = fields.filter(([, said, signedValue]) => said !== signedValue);
  if (!differ.length) return undefined;
  const shown = (v: unknown) => (v === undefined ? 'none' : JSON.stringify(v).slice(0, 80));
  return `its envelope disagrees with its signed content (changed in the stream?): ${differ.map(([name, said, signedValue]) => `${name} ${shown(said)} in the envelope, ${shown(signedValue)} signed`).join('; ')}`;
}

/** Handles one inbound message to its end: acknowledged, given back, or dead-lettered. Never rejects. */
export async function handleInbound(inbound: Inbound, s: ConsumerSettings): Promise<void> {
  const base = { id: inbound.id, deliveries: inbound.deliveries };
  const settle = async (event: ConsumerEvent, step: () => Promise<unknown>) => {
    try {
      await step();
    } catch (error) {
      // the broker is away: the message comes back after the claim timeout (and its pair, if processed, is a duplicate then)
      event.error ??= error;
    }
    s.report(event);
  };
  const deadLetter = async (event: Omit<ConsumerEvent, 'outcome'>, cause: DeadLetterCause, reason: string) => {
    const done: ConsumerEvent = { ...event, outcome: 'dead_lettered', cause, reason };
    try {
      done.deadLetter = await inbound.deadLetter(reason, inbound.deliveries);
    } catch (error) {
      done.error = error;
    }
    s.report(done);
  };
  if (!inbound.decoded.ok) return deadLetter(base, 'not_ours', inbound.decoded.reason);
  const message: ConsumedMessage = { ...inbound.decoded.message, id: inbound.id, deliveries: inbound.deliveries, storedAt: inbound.storedAt };
  let about: Omit<ConsumerEvent, 'outcome'> = { ...base, key: message.key, type: message.type };
  if (inbound.deliveries > s.maxDeliveries) {
    // handed out more times than the limit without an answer: its worker died or hung each time
    return deadLetter(about, 'delivery_limit', `delivered ${inbound.deliveries} times and never answered (its worker died or hung each time); the limit is ${s.maxDeliveries}`);
  }
  let verified: VerifiedMessage | undefined;
  if (s.verify) {
    try {
      verified = await s.verify(message);
    } catch (error) {
      if (error instanceof MessageRefusedError) return deadLetter({ ...about, error }, 'unverified', error.message);
      return settle({ ...about, outcome: 'handler_failed', error, retryInMs: s.retryDelayMs }, () => inbound.retry(s.retryDelayMs));
    }
    const disagreement = envelopeDisagreement(message, verified);
    if (disagreement) return deadLetter(about, 'envelope_mismatch', disagreement);
    about = { ...about, key: pairKey(verified.pair.trigger, verified.pair.subscription), type: verified.type };
  }
  // the envelope's pair is claimed nowhere: without `verify` there is no store (consume() refuses one)
  const pair = verified?.pair ?? message;
  const touching = setInterval(() => void inbound.touch().catch(() => undefined), Math.max(50, s.claimTimeoutMs / 3));
  try {
    for (;;) {
      const givenUp = new AbortController();
      const unrun = s.stop.running(givenUp);
      const stopped = new Promise<never>((_, reject) => givenUp.signal.addEventListener('abort', () => reject(givenUp.signal.reason), { once: true }));
      stopped.catch(() => undefined);
      const started = performance.now();
      const settled = await settleOnce({
        store: s.store ?? EVERY_TIME,
        pair,
        handle: () => handled(Promise.race([Promise.resolve().then(() => s.handler(message, verified, givenUp.signal)), stopped])),
        timeoutMs: s.handlerTimeoutMs,
        timers: s.timers,
      });
      unrun();
      const ms = Math.round(performance.now() - started);
      const outcome = settled.answer.outcome;
      const error = settled.claimFailed ?? (settled.handled && !settled.handled.ok ? settled.handled.error : undefined) ?? (settled.stored && !settled.stored.ok ? settled.stored.error : undefined);
      if (settled.timedOut) givenUp.abort(new Error(`the handler ran past its time (${s.handlerTimeoutMs} ms)`));
      switch (outcome) {
        case 'accepted':
          return await settle({ ...about, outcome, ms }, () => inbound.ack());
        case 'duplicate':
          return await settle({ ...about, outcome }, () => inbound.ack());
        case 'in_progress':
        case 'store_failed':
          // not the handler's failure, so not counted against it: the message is kept (and touched) and tried again here
          if (s.stop.stopping) return await settle({ ...about, outcome, error, retryInMs: 0 }, () => inbound.retry(0));
          s.report({ ...about, outcome, error, retryInMs: s.retryDelayMs });
          await pause(s.retryDelayMs, s.stop, s.timers);
          continue;
        default: {
          // handler_failed, handler_timed_out (or `error`, a handler that threw before it returned a promise)
          if (error instanceof WorkerStoppedError) {
            return await settle({ ...about, outcome: 'handler_timed_out', reason: error.message, retryInMs: 0, ms }, () => inbound.retry(0));
          }
          if (error instanceof MessageRefusedError) return await deadLetter({ ...about, error, ms }, 'refused_by_handler', error.message);
          const failed = outcome === 'handler_timed_out' ? 'handler_timed_out' : 'handler_failed';
          const late = `the handler ran past its time (${s.handlerTimeoutMs} ms)`;
          if (inbound.deliveries >= s.maxDeliveries) {
            const last = failed === 'handler_timed_out' ? `it ran past its time (${s.handlerTimeoutMs} ms)` : reasonOf(error);
            return await deadLetter({ ...about, error, ms }, 'delivery_limit', `the handler failed ${inbound.deliveries} times (the limit); the last time: ${last}`);
          }
          return await settle({ ...about, outcome: failed, error, retryInMs: s.retryDelayMs, ms, ...(failed === 'handler_timed_out' ? { reason: late } : {}) }, () => inbound.retry(s.retryDelayMs));
        }
      }
    }
  } finally {
    clearInterval(touching);
  }
}

/** A consumer's limits, each an option of `consume` and its default in the one table (src/delivery/defaults.ts). */
const LIMITS: {
  readonly concurrency: typeof DEFAULTS.consumerConcurrency;
  readonly retryDelayMs: typeof DEFAULTS.consumerRetryDelayMs;
  readonly maxDeliveries: typeof DEFAULTS.consumerMaxDeliveries;
  readonly claimTimeoutMs: typeof DEFAULTS.consumerClaimTimeoutMs;
} = {
  concurrency: DEFAULTS.consumerConcurrency,
  retryDelayMs: DEFAULTS.consumerRetryDelayMs,
  maxDeliveries: DEFAULTS.consumerMaxDeliveries,
  claimTimeoutMs: DEFAULTS.consumerClaimTimeoutMs,
} as const;

/** The limits, and `handlerTimeoutMs`, whose default follows the store's lease (two of them, as every door's handlers). */
export type ConsumerLimits = { -readonly [K in keyof typeof LIMITS | 'handlerTimeoutMs']: number };

/** A consumer's limits: those given, the defaults for the rest; a usage error (exit 2) for one out of range. `leaseMs`: the store's. */
export function consumerSettings(o: Partial<ConsumerLimits>, leaseMs = 0): ConsumerLimits {
  const s: ConsumerLimits = { ...LIMITS, handlerTimeoutMs: handlerTimeoutFor(leaseMs) };
  for (const key of [...Object.keys(LIMITS), 'handlerTimeoutMs'] as (keyof ConsumerLimits)[]) {
    const v = o[key];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < (key === 'retryDelayMs' ? 0 : 1)) throw new UsageError(`The consumer's ${key} must be a whole number${key === 'retryDelayMs' ? '' : ' above 0'}, not ${v}.`);
    s[key] = v;
  }
  return s;
}

/** What every broker's consumer runs its messages with: the limits, the handler and its checks, and the two signals of a stop. */
export function runSettings(
  o: {
    handler: ConsumerSettings['handler'];
    verify?: ConsumerSettings['verify'];
    store?: PairStore;
    timers?: Timers;
    onEvent?: (event: ConsumerEvent) => void;
  } & Partial<ConsumerLimits>,
): { limits: ConsumerLimits; run: ConsumerSettings; stop: Stopper } {
  if (o.store && !o.verify) {
    throw new TypeError("consume() was given a store without verify: a pair is claimed only as the message's signed content gives it, never as its envelope says");
  }
  const limits = consumerSettings(o, o.store?.leaseMs);
  const stopper = new Stopper(o.timers ?? systemTimers);
  return {
    limits,
    stop: stopper,
    run: {
      handler: o.handler.bind(o),
      verify: o.verify?.bind(o),
      store: o.store,
      retryDelayMs: limits.retryDelayMs,
      maxDeliveries: limits.maxDeliveries,
      claimTimeoutMs: limits.claimTimeoutMs,
      handlerTimeoutMs: limits.handlerTimeoutMs,
      timers: o.timers ?? systemTimers,
      stop: stopper,
      report: (e) => o.onEvent?.(e),
    },
  };
}

/**
 * A consumer's stop: no more messages are taken (`stopping`), those waiting are woken, and the handlers
 * under way are waited for, for at most `timeoutMs` when given; then given up on, each handler's signal
 * aborted with a WorkerStoppedError (one registry, not a listener a message on a shared signal).
 */
export class Stopper {
  stopping = false;
  private readonly waiting = new Set<() => void>();
  private readonly handlers = new Set<AbortController>();
  private abandoned = false;

  constructor(private readonly timers: Timers) {}

  /** Calls `wake` once the stop begins; undoes that when the returned function is called. */
  onStop(wake: () => void): () => void {
    this.waiting.add(wake);
    return () => this.waiting.delete(wake);
  }

  /** A handler under way, given up on (its controller aborted) if the stop's time runs out; undone when the returned function is called. */
  running(handler: AbortController): () => void {
    if (this.abandoned) handler.abort(new WorkerStoppedError('the worker stopped before the handler finished'));
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  /** No more messages: those waiting for the store are woken (and given back). */
  begin(): void {
    if (this.stopping) return;
    this.stopping = true;
    for (const wake of [...this.waiting]) wake();
  }

  /** Resolves once every handler under way has ended, or was given up on after `timeoutMs`. */
  async drain(inflight: ReadonlySet<Promise<void>>, timeoutMs?: number): Promise<void> {
    this.begin();
    if (timeoutMs === undefined) return void (await Promise.all(inflight));
    let timer: unknown;
    const cut = new Promise<void>((resolve) => {
      timer = this.timers.set(resolve, timeoutMs);
    });
    await Promise.race([Promise.all(inflight), cut]);
    this.timers.clear(timer);
    this.abandoned = true;
    for (const h of this.handlers) h.abort(new WorkerStoppedError('the worker stopped before the handler finished'));
    await Promise.all(inflight);
  }
}
