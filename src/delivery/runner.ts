import * as ANSWERS from './answers.js';
import type { Answer } from './answers.js';
import * as DEFAULTS from './defaults.js';
import { claimWithForecast, completeWithForecast, releaseWithForecast, type Keyed } from './forecast.js';
import type { Pair } from './pair.js';
import { decide, type Facts, type Handled } from './steps.js';
import type { PairStore } from './store.js';
import { systemTimers, type Timers } from '../util/clock.js';
import { isPromise } from '../util/then.js';

/**
 * The runner every door uses for a verified delivery: claim its pair, handle it while the claim is
 * extended every third of the store's lease, then store the pair (complete) or let it go (release), as
 * the step machine (src/delivery/steps.ts) asks. A handler that runs past its time is stopped waiting
 * for: its claim is let go, and it is answered 500 `handler_timed_out`, so that the sender's retry is
 * handled again rather than the pair held for ever.
 */

export { systemTimers, type Timers } from '../util/clock.js';

export interface SettleOptions {
  store: PairStore;
  pair: Pair;
  /**
   * Handles the delivery once its claim is won. A rejection is answered 500 (`error`), the claim let go. A
   * handling that is done at once (listen with nothing to save or forward) may return its result as it is.
   */
  handle: () => Handled | PromiseLike<Handled>;
  /** A handler still running after this is let go (default: DEFAULTS.handlerTimeoutLeases of the store's lease). */
  timeoutMs?: number;
  timers?: Timers;
}

/** What became of a verified delivery: its answer, and the facts it was decided on. */
export interface Settled extends Facts {
  answer: Answer;
  /** The handler ran past its time: it was let go (it may still be running). */
  timedOut?: true;
  /** An extension of the claim failed while it was handled (the store was away, or the claim was taken over). */
  leaseLost?: true;
}

/**
 * How long a handler may run when its door sets no limit: a few leases of its store, so that a hung one's
 * claim is let go (and the sender's retry handled) soon after the lease the store was given.
 */
export const handlerTimeoutFor = (leaseMs: number): number => DEFAULTS.handlerTimeoutLeases * (leaseMs > 0 ? leaseMs : DEFAULTS.claimLeaseMs);

/** Claims, handles, completes or releases one verified delivery; resolves with its answer. */
export async function settle(o: SettleOptions): Promise<Settled> {
  // the forecast it names is claimed, completed and released with its pair: handed over once, by the service or a catch-up (src/delivery/forecast.ts)
  const { store, pair } = o;
  const out: Settled = { answer: ANSWERS.internal };
  let holding: Keyed[] = [];
  for (;;) {
    const step = decide(out);
    switch (step.do) {
      case 'claim':
        try {
          ({ claim: out.claim, holding } = await claimWithForecast(store, pair));
        } catch (err) {
          out.claimFailed = err ?? new Error('the store failed');
        }
        break;
      case 'handle': {
        // a handling done at once is not awaited: listen's plain path keeps the ticks it had before the runner
        const handled = handleWithLease(o, out);
        out.handled = isPromise(handled) ? await handled : handled;
        break;
      }
      case 'complete':
        try {
          await completeWithForecast(store, pair, holding);
          out.stored = { ok: true };
        } catch (error) {
          out.stored = { ok: false, error };
        }
        break;
      case 'release':
        await releaseWithForecast(store, pair, holding);
        out.answer = step.answer;
        return out;
      case 'answer':
        out.answer = step.answer;
        return out;
    }
  }
}

/**
 * Runs the handler, extending the claim every third of the lease until it settles, and gives up on it at
 * `timeoutMs`. One timer a delivery, re-armed at each extension: elapsed time is counted by the timer's
 * own firings, so no clock is needed.
 */
function handleWithLease(o: SettleOptions, out: Settled): Handled | Promise<Handled> {
  let handling: Handled | PromiseLike<Handled>;
  try {
    handling = o.handle();
  } catch (error) {
    return { ok: false, answer: ANSWERS.internal, error };
  }
  if (!isPromise(handling)) return handling;
  const { store, pair } = o;
  const timers = o.timers ?? systemTimers;
  const timeoutMs = o.timeoutMs ?? handlerTimeoutFor(store.leaseMs);
  const every = store.leaseMs > 0 ? store.leaseMs / 3 : Infinity;
  return new Promise<Handled>((resolve) => {
    let elapsed = 0;
    let timer: unknown;
    let done = false;
    const arm = () => {
      const wait = Math.min(every, timeoutMs - elapsed);
      if (!Number.isFinite(wait)) return;
      timer = timers.set(() => {
        elapsed += wait;
        if (done) return;
        if (elapsed >= timeoutMs) {
          done = true;
          out.timedOut = true;
          resolve({ ok: false, answer: ANSWERS.handlerTimedOut(timeoutMs) });
          return;
        }
        void store.extend(pair.trigger, pair.subscription).then((extended) => {
          if (!extended) out.leaseLost = true;
        });
        arm();
      }, wait);
    };
    arm();
    const finish = (handled: Handled) => {
      if (done) return;
      done = true;
      if (timer !== undefined) timers.clear(timer);
      resolve(handled);
    };
    handling.then(finish, (error: unknown) => finish({ ok: false, answer: ANSWERS.internal, error }));
  });
}
