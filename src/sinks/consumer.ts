import { ANSWERS } from '../delivery/answers.js';
import { DEFAULTS } from '../delivery/defaults.js';
import { settle as settleOnce, type Settled } from '../delivery/runner.js';
import type { PairStore } from '../delivery/store.js';
import { UsageError } from '../errors.js';
import type { Decoded, SinkMessage } from './message.js';

/**
 * What a consumer does with one message the broker handed it, whichever the broker: refuse what is not
 * ours, run the handler once per pair, acknowledge only when it resolved, give a failed one back to be
 * delivered again after a delay, and past the limit move it to the dead letters, with why. The broker
 * modules (nats.ts, redis.ts) read, acknowledge and move; this decides.
 */

/** A message as the handler gets it: the delivery, and the broker's id and count of it. */
export interface ConsumedMessage extends SinkMessage {
  /** The broker's id: the JetStream stream sequence, or the Redis entry id. */
  id: string;
  /** How many times the broker has handed it out, this time included. */
  deliveries: number;
}

/** What running a message's handler once came to (the handler library's names). */
type RunOutcome = 'processed' | 'duplicate' | 'in_progress' | 'handler_failed' | 'store_failed';

export type ConsumerOutcome = RunOutcome | 'dead_lettered' | 'refused';

/** One thing a consumer did, for its caller to show or count (a consumer never prints). */
export interface ConsumerEvent {
  /**
   * - `processed`: the handler resolved; acknowledged;
   * - `duplicate`: its pair was processed before; acknowledged, the handler not run;
   * - `in_progress`: another worker holds its pair now; kept, and claimed again after `retryInMs`;
   * - `store_failed`: the pair store could not be reached; kept, and tried again after `retryInMs`;
   * - `handler_failed`: the handler threw; given back, delivered again after `retryInMs`;
   * - `dead_lettered`: moved to the dead letters (`deadLetter`), with `reason`;
   * - `refused`: not one of ours, or its handler threw a MessageRefusedError (`reason`); moved to the dead letters too.
   */
  outcome: ConsumerOutcome;
  id: string;
  deliveries: number;
  key?: string;
  type?: string;
  /** When it will be tried again (`in_progress`, `store_failed`, `handler_failed`). */
  retryInMs?: number;
  /** Why it was refused or dead-lettered. */
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
  handler: (message: ConsumedMessage) => unknown;
  store?: PairStore;
  retryDelayMs: number;
  maxDeliveries: number;
  /** How long the broker lets a message go unanswered before another worker gets it: touched every third of it. */
  claimTimeoutMs: number;
  /** Aborted when the consumer stops: a message waiting for the store is given back at once. */
  stopping: AbortSignal;
  report: (event: ConsumerEvent) => void;
}

/**
 * Thrown by a handler that will never take this message (its body is not a JSON object, it does not
 * verify with the webhook's secret): the message goes to the dead letters at once, with this message as
 * the reason, rather than being delivered again.
 */
export class MessageRefusedError extends Error {
  override readonly name = 'MessageRefusedError';
}

const reasonOf = (error: unknown) => (error instanceof Error ? error.message : String(error));

/** Resolves after `ms`, or at once when `signal` aborts. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal.addEventListener('abort', done);
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
async function handled(run: unknown): Promise<{ ok: true; status: 200 } | { ok: false; answer: typeof ANSWERS.handlerFailed; error: unknown }> {
  try {
    await run;
    return { ok: true, status: 200 };
  } catch (error) {
    return { ok: false, answer: ANSWERS.handlerFailed, error };
  }
}

/** What the runner found, in the consumer's words. (No handler timeout: a long one keeps its claim and its message, touched.) */
function outcomeOf(s: Settled): { outcome: RunOutcome; error?: unknown } {
  if (s.claimFailed !== undefined) return { outcome: 'store_failed', error: s.claimFailed };
  if (s.claim === 'done' || s.claim === 'stored_now') return { outcome: 'duplicate' };
  if (s.claim === 'held') return { outcome: 'in_progress' };
  if (s.handled && !s.handled.ok) return { outcome: 'handler_failed', error: s.handled.error };
  // handled, its pair not yet stored: the store keeps it as processed, so the next claim finds it a duplicate
  if (s.stored && !s.stored.ok) return { outcome: 'store_failed', error: s.stored.error };
  return { outcome: 'processed' };
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
  const deadLetter = async (event: ConsumerEvent, reason: string) => {
    try {
      event.deadLetter = await inbound.deadLetter(reason, inbound.deliveries);
    } catch (error) {
      event.error = error;
    }
    s.report({ ...event, reason });
  };
  if (!inbound.decoded.ok) return deadLetter({ ...base, outcome: 'refused' }, inbound.decoded.reason);
  const message: ConsumedMessage = { ...inbound.decoded.message, id: inbound.id, deliveries: inbound.deliveries };
  const about = { ...base, key: message.key, type: message.type };
  if (inbound.deliveries > s.maxDeliveries) {
    // handed out more times than the limit without an answer: its worker died or hung each time
    return deadLetter({ ...about, outcome: 'dead_lettered' }, `delivered ${inbound.deliveries} times and never answered (its worker died or hung each time); the limit is ${s.maxDeliveries}`);
  }
  const touching = setInterval(() => void inbound.touch().catch(() => undefined), Math.max(50, s.claimTimeoutMs / 3));
  try {
    for (;;) {
      const started = performance.now();
      const r = outcomeOf(await settleOnce({ store: s.store ?? EVERY_TIME, pair: message, handle: () => handled(s.handler(message)), timeoutMs: Infinity }));
      const ms = Math.round(performance.now() - started);
      switch (r.outcome) {
        case 'processed':
        case 'duplicate':
          return await settle({ ...about, outcome: r.outcome, ...(r.outcome === 'processed' ? { ms } : {}) }, () => inbound.ack());
        case 'handler_failed':
          if (r.error instanceof MessageRefusedError) return await deadLetter({ ...about, outcome: 'refused', error: r.error, ms }, r.error.message);
          if (inbound.deliveries >= s.maxDeliveries) {
            return await deadLetter({ ...about, outcome: 'dead_lettered', error: r.error, ms }, `the handler failed ${inbound.deliveries} times (the limit); the last time: ${reasonOf(r.error)}`);
          }
          return await settle({ ...about, outcome: 'handler_failed', error: r.error, retryInMs: s.retryDelayMs, ms }, () => inbound.retry(s.retryDelayMs));
        case 'in_progress':
        case 'store_failed':
          // not the handler's failure, so not counted against it: the message is kept (and touched) and tried again here
          if (s.stopping.aborted) return await settle({ ...about, outcome: r.outcome, error: r.error, retryInMs: 0 }, () => inbound.retry(0));
          s.report({ ...about, outcome: r.outcome, error: r.error, retryInMs: s.retryDelayMs });
          await pause(s.retryDelayMs, s.stopping);
      }
    }
  } finally {
    clearInterval(touching);
  }
}

/** A consumer's limits, each an option of `consume` and its default in the one table (src/delivery/defaults.ts). */
const LIMITS = {
  concurrency: 'consumerConcurrency',
  retryDelayMs: 'consumerRetryDelayMs',
  maxDeliveries: 'consumerMaxDeliveries',
  claimTimeoutMs: 'consumerClaimTimeoutMs',
} as const satisfies Record<string, keyof typeof DEFAULTS>;

export type ConsumerLimits = { -readonly [K in keyof typeof LIMITS]: number };

/** A consumer's limits: those given, the defaults for the rest; a usage error (exit 2) for one out of range. */
export function consumerSettings(o: Partial<ConsumerLimits>): ConsumerLimits {
  const s = Object.fromEntries(Object.entries(LIMITS).map(([k, d]) => [k, DEFAULTS[d]])) as ConsumerLimits;
  for (const key of Object.keys(LIMITS) as (keyof ConsumerLimits)[]) {
    const v = o[key];
    if (v === undefined) continue;
    if (!Number.isInteger(v) || v < (key === 'retryDelayMs' ? 0 : 1)) throw new UsageError(`The consumer's ${key} must be a whole number${key === 'retryDelayMs' ? '' : ' above 0'}, not ${v}.`);
    s[key] = v;
  }
  return s;
}
