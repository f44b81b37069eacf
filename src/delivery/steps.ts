import * as ANSWERS from './answers.js';
import type { Answer } from './answers.js';
import type { ForwardResult } from './report.js';
import type { Claim } from './store.js';

/**
 * The step machine of a verified delivery, as a function of what is known of it: verified → claimed →
 * handled → completed (stored) or released, and the answer. The runner (src/delivery/runner.ts) does
 * the I/O each step asks for, adds what it found to the facts, and asks again, until the answer: so the
 * rules of the answer live here, and are tested without sockets or stores. (A request that does not
 * verify never gets here: it is answered from the table at once, `ANSWERS.notVerified`.)
 */
export interface Facts {
  /** What claiming the pair found. */
  claim?: Claim;
  /** The claim could not be made (the store is away): what the store threw. */
  claimFailed?: unknown;
  /** What handling did (listen: saved and forwarded; the library: ran the handlers). */
  handled?: Handled;
  /** Whether the pair was stored as processed (written, or committed), and if not, what the store threw. */
  stored?: { ok: true } | { ok: false; error: unknown };
}

/**
 * What handling a delivery came to: processed, to be answered `status` (a 2xx); or not processed, to be
 * answered `answer` once its claim is let go (so that the sender's retry is handled again).
 */
export type Handled = { ok: true; status: number } | { ok: false; answer: Answer; error?: unknown };

export type Step =
  /** Claim the pair. */
  | { do: 'claim' }
  /** The claim was won: handle the delivery (its claim extended meanwhile). */
  | { do: 'handle' }
  /** Handled, to be answered `status` (a 2xx): store the pair first, then answer. */
  | { do: 'complete'; status: number }
  /** Not processed: give up the claim, then answer. */
  | { do: 'release'; answer: Answer }
  | { do: 'answer'; answer: Answer };

const isSuccess = (status: number) => status >= 200 && status < 300;

/** The next step for a verified delivery, from what is known of it. */
export function decide(facts: Facts): Step {
  if (facts.claimFailed !== undefined) return { do: 'answer', answer: ANSWERS.storeUnreadable };
  const claim = facts.claim;
  if (claim === undefined) return { do: 'claim' };
  if (claim === 'done' || claim === 'stored_now') return { do: 'answer', answer: ANSWERS.duplicate };
  if (claim === 'held') return { do: 'answer', answer: ANSWERS.inProgress };
  const h = facts.handled;
  if (h === undefined) return { do: 'handle' };
  if (!h.ok) return { do: 'release', answer: h.answer };
  // Only a delivery acknowledged with a 2xx counts as processed; otherwise the sender's retry must get through.
  if (!isSuccess(h.status)) return { do: 'release', answer: ANSWERS.refusedByFlag(h.status) };
  const s = facts.stored;
  if (s === undefined) return { do: 'complete', status: h.status };
  if (!s.ok) return { do: 'answer', answer: ANSWERS.storeUnwritten };
  return { do: 'answer', answer: ANSWERS.accepted(h.status) };
}

/** What saving and forwarding did (`listen`, and a relay's forward). */
export interface Processed {
  forward?: ForwardResult;
  savedTo?: string;
  /** Saving failed: the delivery is not processed. */
  saveError?: string;
  /** `--sink`: a broker did not take it (`refused`: for good), and why (for listen's line, not the sender); the delivery is not processed. */
  sinkError?: { refused: boolean; why: string };
}

/**
 * The handling of a receiver that saves and forwards: saved and forwarded with a 2xx (or nothing to
 * forward to) is processed, answered with the app's status or the one `--respond-status` asks for;
 * a save that failed, a sink that did not take it, or a forward that did not get a 2xx, is not.
 */
export function forwarded(p: Processed, respondStatus?: number): Handled {
  if (p.saveError !== undefined) return { ok: false, answer: ANSWERS.savingFailed(p.saveError) };
  if (p.sinkError) return { ok: false, answer: p.sinkError.refused ? ANSWERS.sinkRefused : ANSWERS.sinkUnavailable };
  if (p.forward && !p.forward.ok) return { ok: false, answer: ANSWERS.forwardFailed(p.forward.error ?? `your app answered ${p.forward.status}`) };
  const status = respondStatus ?? p.forward?.status ?? 200;
  return isSuccess(status) ? { ok: true, status } : { ok: false, answer: ANSWERS.refusedByFlag(status) };
}
