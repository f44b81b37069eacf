import type { PairStore } from './store.js';

/**
 * (A bridge for while the stores are being given the contract's lease: a store that has no `extend()` yet
 * is given one that extends nothing. Once every store implements src/delivery/store.ts, this returns
 * each as it is, and goes.)
 */
export function withLease(store: Omit<PairStore, 'leaseMs' | 'extend'> & Partial<Pick<PairStore, 'leaseMs' | 'extend'>>, leaseMs: number): PairStore {
  if (typeof store.extend === 'function' && typeof store.leaseMs === 'number') return store as PairStore;
  return {
    get where() {
      return store.where;
    },
    leaseMs,
    claim: (t, s) => store.claim(t, s),
    extend: async () => true,
    complete: (t, s) => store.complete(t, s),
    release: (t, s) => store.release(t, s),
    close: () => store.close(),
  };
}
