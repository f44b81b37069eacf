import * as DEFAULTS from './defaults.js';
import { PairTable, type TableClock } from './pair-table.js';
import type { Claim, PairStore } from './store.js';

export interface MemoryStoreOptions {
  /** How long a processed pair is remembered, in milliseconds (default 24 h, as `listen --dedupe-ttl`). */
  ttlMs?: number;
  /** At most this many pairs are remembered; past it the oldest are forgotten (default 100,000). */
  maxPairs?: number;
  /**
   * How long a claim holds unless extended, in milliseconds (default 60 s): a delivery whose handlers have
   * neither finished nor extended it within that may be processed again by the service's retry.
   */
  leaseMs?: number;
  /**
   * The clock, in milliseconds (default `Date.now` for the time a pair was processed, and a monotonic
   * clock for how long ago): given, it is read for both, so a test moves one clock.
   */
  now?: () => number;
}

/** Processed pairs in this process's memory: one instance, until it restarts. Runtime-neutral. */
export class MemoryStore implements PairStore {
  readonly where = 'memory';
  readonly leaseMs: number;
  private readonly table: PairTable;
  private readonly clock: TableClock;
  private lastExpiry: number;

  constructor(options: MemoryStoreOptions = {}) {
    this.leaseMs = options.leaseMs ?? DEFAULTS.claimLeaseMs;
    const now = options.now;
    this.clock = now ? { now, monotonic: now } : { now: Date.now, monotonic: () => performance.now() };
    this.table = new PairTable({ ttlMs: options.ttlMs ?? DEFAULTS.pairTtlMs, leaseMs: this.leaseMs, maxPairs: options.maxPairs ?? DEFAULTS.memoryPairs, clock: this.clock });
    this.lastExpiry = this.clock.monotonic();
  }

  /** How many pairs are remembered. */
  get size(): number {
    return this.table.size;
  }

  async claim(trigger: string, subscription: string): Promise<Claim> {
    // expired pairs are forgotten as claims come (at most once a second): no timer to keep a process alive
    const mono = this.clock.monotonic();
    if (mono - this.lastExpiry >= DEFAULTS.storeWatchMs) {
      this.lastExpiry = mono;
      this.table.expire();
    }
    return this.table.claim(trigger, subscription);
  }

  async extend(trigger: string, subscription: string): Promise<boolean> {
    return this.table.extend(trigger, subscription);
  }

  async complete(trigger: string, subscription: string): Promise<void> {
    this.table.remember(trigger, subscription, this.clock.now());
  }

  async release(trigger: string, subscription: string): Promise<void> {
    this.table.release(trigger, subscription);
  }

  async peek(trigger: string, subscription: string): Promise<'done' | 'held' | 'free'> {
    return this.table.peek(trigger, subscription);
  }

  async close(): Promise<void> {}
}
