import * as DEFAULTS from '../delivery/defaults.js';
import type { StoreNotice } from '../delivery/store.js';
import { systemClock, type Clock } from '../util/clock.js';
import { FilePairStore } from './file-pairs.js';
import type { HistoryLimits } from './history-limits.js';
import type { StoreDoor } from './owner-lock.js';
import type { PgStore } from './postgres.js';
import { storeKind } from './store-url.js';

/** How a processed-pairs store is opened: by `listen`, and by an app's `openStore` (which documents the first four). */
export interface OpenStoreOptions {
  /** For the file store: the folder its file is kept in. */
  dir?: string;
  /** How long a processed pair is remembered, in milliseconds (default 24 h). */
  ttlMs?: number;
  /**
   * How long a claim holds unless extended while its delivery is handled, in milliseconds (default 60 s):
   * past it, the pair's claim may be taken over (its holder is taken to have died or hung).
   */
  leaseMs?: number;
  /** For PostgreSQL: the schema of its tables (default `wxhooks`, as `listen`'s). */
  schema?: string;
  /**
   * For the file store: the webhook whose pairs these are. They are kept in a file of their own in the
   * folder (`processed-pairs.webhook-ID.ndjson`), so that one receiver per webhook can share a folder: a
   * file has one owner at a time.
   */
  webhook?: string;
  /** With `webhook`: it lives only as long as this store (`listen --public-url`'s), and its file is removed on close. */
  temporary?: boolean;
  /** For the file store: also sync each batch to the disk before its answers (power-loss safety). */
  fsync?: boolean;
  /** For the file store: how long it may stay unwritable before the store gives up (default 60 s). */
  giveUpMs?: number;
  /** For PostgreSQL: the shared history's limits, when one is kept there. */
  history?: HistoryLimits;
  clock?: Clock;
  /** For PostgreSQL: told when the database goes away, and when it is back. */
  onConnection?: (state: 'lost' | 'restored', reason?: string) => void;
  /** Told of what the person running it should know: a clock that jumped, the file replaced, pairs stored late, a lock taken over. */
  onNotice?: (notice: StoreNotice) => void;
  /** Who opens it, for the advice when another process holds the file (default `listen`). */
  door?: StoreDoor;
}

/** The processed-pairs store a URL names (`file`, or postgres://); PostgreSQL's driver is loaded only for a postgres:// one. */
export async function openPairStore(o: OpenStoreOptions & { url: string }): Promise<{ kind: 'file'; store: FilePairStore } | { kind: 'postgres'; store: PgStore }> {
  const ttlMs = o.ttlMs ?? DEFAULTS.pairTtlMs;
  const leaseMs = o.leaseMs ?? DEFAULTS.claimLeaseMs;
  if (storeKind(o.url) === 'file') {
    if (!o.dir) throw new TypeError('the file store needs { dir }: the folder the processed pairs are kept in');
    const store = await FilePairStore.open({
      dir: o.dir,
      webhook: o.webhook,
      temporary: o.temporary,
      ttlMs,
      leaseMs,
      fsync: o.fsync,
      giveUpMs: o.giveUpMs,
      clock: o.clock ?? systemClock,
      onNotice: o.onNotice,
      door: o.door,
    });
    return { kind: 'file', store };
  }
  const { PgStore } = await import('./postgres.js');
  const store = await PgStore.open({
    url: o.url,
    schema: o.schema ?? DEFAULTS.schema,
    ttlMs,
    leaseMs,
    history: o.history,
    onConnection: o.onConnection,
    onNotice: o.onNotice,
  });
  return { kind: 'postgres', store };
}
