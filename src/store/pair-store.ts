// The store contract lives in the delivery core (src/delivery/store.ts); this path is kept for the modules that import it from here.
export { PairStoreError, type Claim, type PairStore, type StoreNotice } from '../delivery/store.js';
