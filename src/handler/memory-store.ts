import { DEFAULTS } from '../delivery/defaults.js';
import type { Claim, PairStore } from '../delivery/store.js';

// (Today's MemoryStore, given the contract's lease and extend() so that the core can run against it. The
// "stores" work moves it to src/delivery/memory-store.ts: this file goes when that lands.)

export interface MemoryStoreOptions {
  /** How long a processed pair is remembered, in milliseconds (default 24 h, as `listen --dedupe-ttl`). */
  ttlMs?: number;
  /** At most this many pairs are remembered; past it the oldest are forgotten (default 100,000). */
  maxPairs?: number;
  /** How long a claim holds unless extended, in milliseconds (default 60 s). */
  leaseMs?: number;
  /** The clock, in milliseconds (default `Date.now`). */
  now?: () => number;
}

/** Processed pairs in this process's memory: one instance, until it restarts. */
export class MemoryStore implements PairStore {
  readonly where = 'memory';
  readonly leaseMs: number;
  private readonly done = new Map<string, number>();
  /** The pairs claimed, and when each claim runs out. */
  private readonly held = new Map<string, number>();
  private readonly ttlMs: number;
  private readonly maxPairs: number;
  private readonly now: () => number;

  constructor(options: MemoryStoreOptions = {}) {
    this.ttlMs = options.ttlMs ?? DEFAULTS.pairTtlMs;
    this.maxPairs = options.maxPairs ?? DEFAULTS.memoryPairs;
    this.leaseMs = options.leaseMs ?? DEFAULTS.claimLeaseMs;
    this.now = options.now ?? Date.now;
  }

  async claim(trigger: string, subscription: string): Promise<Claim> {
    const key = `${subscription}\n${trigger}`;
    const now = this.now();
    // the map is in the order pairs were done: the expired ones are at its front
    for (const [k, at] of this.done) {
      if (now - at <= this.ttlMs) break;
      this.done.delete(k);
    }
    const until = this.held.get(key);
    if (until !== undefined && until > now) return 'held';
    if (this.done.has(key)) return 'done';
    this.held.set(key, now + this.leaseMs);
    return 'won';
  }

  async extend(trigger: string, subscription: string): Promise<boolean> {
    const key = `${subscription}\n${trigger}`;
    if (!this.held.has(key)) return false;
    this.held.set(key, this.now() + this.leaseMs);
    return true;
  }

  async complete(trigger: string, subscription: string): Promise<void> {
    const key = `${subscription}\n${trigger}`;
    this.held.delete(key);
    this.done.delete(key);
    this.done.set(key, this.now());
    if (this.done.size > this.maxPairs) this.done.delete(this.done.keys().next().value!);
  }

  async release(trigger: string, subscription: string): Promise<void> {
    this.held.delete(`${subscription}\n${trigger}`);
  }

  async close(): Promise<void> {}
}
