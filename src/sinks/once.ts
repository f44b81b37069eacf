import type { Claim, PairStore } from '../delivery/store.js';

/**
 * Exactly once per pair for the sinks' consumers: the pair claimed before the handler runs, completed
 * after it resolved, released when it threw. The handler library and `listen` keep the same rule; this
 * is the sinks' copy of the sequence, kept in one small function so that the delivery core's runner can
 * take its place.
 */

/** What a consumer needs of a store: the contract's claim, complete and release; extend, when the store has it, keeps a long handler's claim. */
export type OnceStore = Pick<PairStore, 'claim' | 'complete' | 'release'> & Partial<Pick<PairStore, 'extend' | 'leaseMs'>>;

/** The outcome names are the handler library's (its Receipt's). */
export type OnceOutcome = 'processed' | 'duplicate' | 'in_progress' | 'handler_failed' | 'store_failed';

export interface OnceResult {
  outcome: OnceOutcome;
  /** What the handler threw (`handler_failed`), or the store (`store_failed`). */
  error?: unknown;
  /** `store_failed` after the handler resolved: the pair is processed, not yet stored (the store keeps it as processed). */
  processed?: boolean;
}

/**
 * Runs `handler` unless the pair was processed (`duplicate`) or is being processed elsewhere
 * (`in_progress`). Without a store, it runs every time it is called: once per broker delivery.
 */
export async function runOnce(store: OnceStore | undefined, trigger: string, subscription: string, handler: () => unknown): Promise<OnceResult> {
  if (!store) {
    try {
      await handler();
      return { outcome: 'processed' };
    } catch (error) {
      return { outcome: 'handler_failed', error };
    }
  }
  let claim: Claim;
  try {
    claim = await store.claim(trigger, subscription);
  } catch (error) {
    return { outcome: 'store_failed', error };
  }
  if (claim === 'done' || claim === 'stored_now') return { outcome: 'duplicate' };
  if (claim === 'held') return { outcome: 'in_progress' };
  // a handler longer than the lease would let another worker take the pair over: the claim is extended while it runs
  const extend = store.extend && store.leaseMs ? setInterval(() => void store.extend!(trigger, subscription), Math.max(50, store.leaseMs / 3)) : undefined;
  try {
    await handler();
  } catch (error) {
    clearInterval(extend);
    await store.release(trigger, subscription);
    return { outcome: 'handler_failed', error };
  } finally {
    clearInterval(extend);
  }
  try {
    await store.complete(trigger, subscription);
  } catch (error) {
    return { outcome: 'store_failed', error, processed: true };
  }
  return { outcome: 'processed' };
}
