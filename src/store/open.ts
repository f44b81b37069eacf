import type { Clock } from '../util/clock.js';
import { FilePairStore } from './file-pairs.js';
import type { StoreNotice } from './pair-store.js';
import type { HistoryLimits } from './history-limits.js';
import type { PgStore } from './postgres.js';
import { storeKind } from './store-url.js';

export interface OpenStoreOptions {
  /** `file` (the store folder's file), or a postgres:// URL shared by several receivers. */
  url: string;
  /** The store folder, for the file store. */
  dir: string;
  ttlMs: number;
  fsync?: boolean;
  /** How long the file may stay unwritable before the store gives up (default 60 s). */
  giveUpMs?: number;
  schema: string;
  /** How long a claim holds in the shared store before another instance takes it over. */
  leaseMs: number;
  /** The shared store's history, when one is kept there. */
  history?: HistoryLimits;
  clock: Clock;
  onConnection?: (state: 'lost' | 'restored', reason?: string) => void;
  onNotice?: (notice: StoreNotice) => void;
}

/** The processed-pairs store a URL names; PostgreSQL's driver is loaded only for a postgres:// one. */
export async function openPairStore(o: OpenStoreOptions): Promise<{ kind: 'file'; store: FilePairStore } | { kind: 'postgres'; store: PgStore }> {
  if (storeKind(o.url) === 'file') {
    return { kind: 'file', store: await FilePairStore.open({ dir: o.dir, ttlMs: o.ttlMs, fsync: o.fsync, giveUpMs: o.giveUpMs, clock: o.clock, onNotice: o.onNotice }) };
  }
  const { PgStore } = await import('./postgres.js');
  const store = await PgStore.open({
    url: o.url,
    schema: o.schema,
    ttlMs: o.ttlMs,
    leaseMs: o.leaseMs,
    history: o.history,
    onConnection: o.onConnection,
    onNotice: o.onNotice,
  });
  return { kind: 'postgres', store };
}
