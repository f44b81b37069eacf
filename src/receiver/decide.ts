import { createHash } from 'node:crypto';
import type { SessionVerifyResult, VerifyFailure, VerifySuccess } from '../signing/verify.js';
import { idText } from '../util/bytes.js';
import type { Claim } from '../store/pair-store.js';
import type { Outcome, ReceiverEvent } from './event.js';
import { DUPLICATE_BODY, IN_PROGRESS_BODY, OK_BODY, errorBody, hashedPair, pairFrom, statusForFailure, type Pair } from './common.js';

export { OK_BODY, statusForFailure, type Pair };
import type { ForwardResult } from './forward.js';

/**
 * What the receiver answers, as a function of what it knows so far about one request. The server
 * (src/receiver/server.ts) does the I/O each step asks for, adds what it found to the facts, and asks
 * again, until the answer: so every rule of the answer table lives here, and is tested without sockets.
 */
export interface Facts {
  /**
   * What verification found. Once a verified delivery's report and pair are made, its parsed payload is
   * let go (VERIFIED): a large body's payload is several times its size, and the request lives on for as
   * long as the app takes to answer.
   */
  verification: SessionVerifyResult | typeof VERIFIED;
  /** What claiming the pair found. */
  claim?: Claim;
  /** The claim could not be made (the store is away): why. */
  claimFailed?: string;
  /** What saving and forwarding did. */
  processed?: Processed;
  /** Whether the pair was stored as processed (written, or committed). */
  stored?: { ok: true } | { ok: false; message: string; persistent: boolean };
}

export interface Processed {
  forward?: ForwardResult;
  savedTo?: string;
  /** Saving failed: the delivery is not processed. */
  saveError?: string;
}

export interface DecideOptions {
  /** `--respond-status`: answer verified deliveries with this instead of 200 (or the app's 2xx). */
  respondStatus?: number;
}

/** An answer: the status, the outcome reported, and the JSON body (already serialised). */
export interface Answer {
  status: number;
  outcome: Outcome;
  body: string;
}

export type Step =
  /** Verified: claim the pair. */
  | { do: 'claim' }
  /** The claim was won: save and forward the delivery. */
  | { do: 'process' }
  /** Processed, to be answered `status` (a 2xx): store the pair first, then answer. */
  | { do: 'store'; status: number }
  /** Not processed: give up the claim, then answer. */
  | { do: 'release'; answer: Answer }
  | { do: 'answer'; answer: Answer };

export const VERIFIED = { ok: true } as const;
const DUPLICATE: Answer = { status: 200, outcome: 'duplicate', body: DUPLICATE_BODY };
const IN_PROGRESS: Answer = { status: 409, outcome: 'in_progress', body: IN_PROGRESS_BODY };
const isSuccess = (status: number) => status >= 200 && status < 300;

/** The next step for one request, from what is known of it. */
export function decide(facts: Facts, options: DecideOptions = {}): Step {
  const v = facts.verification;
  if (!v.ok) {
    const status = statusForFailure(v);
    return { do: 'answer', answer: { status, outcome: status === 400 ? 'bad_request' : 'unverified', body: errorBody(v.message) } };
  }
  if (facts.claimFailed !== undefined) return { do: 'answer', answer: { status: 503, outcome: 'store_failed', body: errorBody('the processed pairs cannot be read now; try again later') } };
  if (facts.claim === undefined) return { do: 'claim' };
  if (facts.claim === 'done' || facts.claim === 'stored_now') return { do: 'answer', answer: DUPLICATE };
  if (facts.claim === 'held') return { do: 'answer', answer: IN_PROGRESS };
  const p = facts.processed;
  if (p === undefined) return { do: 'process' };
  if (p.saveError !== undefined) {
    return { do: 'release', answer: { status: 500, outcome: 'error', body: errorBody(`the delivery could not be saved: ${p.saveError}`) } };
  }
  if (p.forward && !p.forward.ok) {
    const why = p.forward.error ?? `your app answered ${p.forward.status}`;
    return { do: 'release', answer: { status: 502, outcome: 'forward_failed', body: errorBody(`forwarding failed: ${why}`) } };
  }
  const status = options.respondStatus ?? p.forward?.status ?? 200;
  // Only a delivery acknowledged with a 2xx counts as processed; otherwise the service's retry must get through.
  if (!isSuccess(status)) return { do: 'release', answer: { status, outcome: 'refused_by_flag', body: errorBody(`answered ${status} (--respond-status)`) } };
  const s = facts.stored;
  if (s === undefined) return { do: 'store', status };
  if (!s.ok) return { do: 'answer', answer: { status: 503, outcome: 'store_failed', body: errorBody('the delivery could not be recorded as processed; try again later') } };
  return { do: 'answer', answer: { status, outcome: 'accepted', body: OK_BODY } };
}

/** The (trigger, subscription) pair of a verified delivery (the rule: src/receiver/pair.ts), hashed with Node's crypto when it must be. */
export function pairOf(v: VerifySuccess, body: Buffer): Pair {
  const p = pairFrom(v);
  if ('trigger' in p) return p;
  return hashedPair(p.subscription, createHash('sha256').update(p.hashPrefix).update(body).digest());
}

/** The report of a verified delivery: its ids, its model run, its size, the layout that matched. */
export function deliveryEvent(time: string, path: string, v: VerifySuccess & { pinnedNow?: true }, pair: Pair, size: number): ReceiverEvent {
  const p = v.payload;
  const data = (typeof p.data === 'object' && p.data !== null ? p.data : {}) as Record<string, unknown>;
  const event: ReceiverEvent = {
    time,
    outcome: 'accepted',
    status: 200,
    method: 'POST',
    path,
    size,
    type: idText(p.type),
    webhook_id: idText(p.webhook_id),
    subscription_id: pair.subscription || undefined,
    trigger_id: pair.source === 'hash' ? v.triggerId : pair.trigger,
    model: idText(data.model),
    initialization_time: idText(data.initialization_time),
    forecast_hour: typeof data.forecast_hour === 'number' ? data.forecast_hour : undefined,
    layout: v.layout,
  };
  // the rarely set ones only when set: four undefined properties cost JSON.stringify 86 ns a report
  // (989 against 903 ns), 0.2% of the ~42 µs of CPU `listen` spends on a delivery (BENCHMARKS.md)
  if (p.test === true) event.test = true;
  if (!v.signs.triggerId) event.dedupe_key = pair.source;
  if (v.warning) event.warning = v.warning;
  if (v.pinnedNow) event.pinned = true;
  return event;
}

/** The report of a request that did not verify. */
export function failureEvent(time: string, path: string, f: VerifyFailure, status: number, size: number, triggerHeader: string | undefined): ReceiverEvent {
  const event: ReceiverEvent = {
    time,
    outcome: status === 400 ? 'bad_request' : 'unverified',
    status,
    method: 'POST',
    path,
    size,
    reason: f.reason,
    message: f.message,
    hint: f.hint,
    skew_seconds: f.skewSeconds,
    claimed_trigger_id: triggerHeader,
  };
  if (f.diagnosisSkipped) event.diagnosis_skipped = true;
  return event;
}
