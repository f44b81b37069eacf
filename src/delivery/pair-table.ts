/**
 * The processed pairs and the claims of one process, in memory: what `MemoryStore` is, and what the file
 * store keeps beside its append log. Pure: no I/O, no timer, the time read from the clock it is given.
 *
 * - A pair is done for the TTL, counted on the monotonic clock from when this process learnt of it (plus
 *   its age then, by the wall clock, for a pair read from a file). It is forgotten only once expired by
 *   both clocks, so a wall clock set forward or back forgets nothing.
 * - A claim holds for the lease, on the monotonic clock, unless extended. One whose lease has passed may
 *   be taken over by a later claim of the pair. The contract names a claim by its pair only, so the
 *   holders of one pair in one process cannot be told apart: each takeover is counted, and the claim is
 *   let go when every holder has released it (a release by a holder that was taken over never frees the
 *   pair under the one that took it), and an extend renews the pair's claim whichever holder asks.
 */

/** The two clocks, in milliseconds: the wall clock (what is written) and a monotonic one (what is counted). */
export interface TableClock {
  now(): number;
  monotonic(): number;
}

export interface PairTableOptions {
  /** How long a processed pair is remembered. */
  ttlMs: number;
  /** How long a claim holds unless extended. */
  leaseMs: number;
  /** At most this many pairs are remembered: past it, the oldest are forgotten (default: no limit). */
  maxPairs?: number;
  clock: TableClock;
  /** Told of each pair forgotten (expired, pushed out, or learnt of again), with when it was processed. */
  onForget?: (trigger: string, subscription: string, at: number) => void;
}

/** A processed pair, as remembered. */
interface Done {
  /** When it was processed, by the wall clock. */
  at: number;
  /** When this process learnt of it, by the monotonic clock. */
  known: number;
  /** How old it already was then, by the wall clock (0 for a pair processed here, or dated in the future). */
  head: number;
}

/** A claim: until when it holds (monotonic), and how many holders it has had that have not let it go. */
interface Held {
  until: number;
  holders: number;
}

export class PairTable {
  /** Subscription id → trigger id → the pair, in the order learnt of (oldest first). */
  private readonly done = new Map<string, Map<string, Done>>();
  /** Subscription id → trigger id → its claim. */
  private readonly claims = new Map<string, Map<string, Held>>();
  private count = 0;
  /**
   * With `maxPairs`: every pair remembered, in the order learnt of (`first` is where the live part
   * begins), so that the oldest is found at once. Looking for it at the front of each subscription's map
   * walked the entries deleted there before (a Map keeps them as holes until it is rebuilt): past the
   * limit, a claim and a completion went from ~3 µs to 15-45 µs and kept growing (bench/octokit-server.js
   * with a full MemoryStore); 250,000 pairs through a table of 100,000 took 5.6 s, 0.3 s this way. An
   * entry whose pair was forgotten since, or learnt of again, is skipped.
   */
  private readonly order: { subscription: string; trigger: string; d: Done }[] = [];
  private first = 0;

  constructor(private readonly o: PairTableOptions) {}

  /** How many pairs are remembered. */
  get size(): number {
    return this.count;
  }

  /** Done within the TTL (a duplicate); held by a live claim; or won, now claimed for the lease. */
  claim(trigger: string, subscription: string): 'won' | 'done' | 'held' {
    if (this.isDone(trigger, subscription)) return 'done';
    const mono = this.o.clock.monotonic();
    let triggers = this.claims.get(subscription);
    const held = triggers?.get(trigger);
    if (held) {
      if (mono <= held.until) return 'held';
      // its lease passed: its holder is taken to have died or hung, and this claim takes over
      held.until = mono + this.o.leaseMs;
      held.holders++;
      return 'won';
    }
    if (!triggers) this.claims.set(subscription, (triggers = new Map()));
    triggers.set(trigger, { until: mono + this.o.leaseMs, holders: 1 });
    return 'won';
  }

  /**
   * Renews the pair's claim for another lease, even one whose lease passed if nobody took it over since (a
   * holder late to extend, its event loop held by a long task, keeps its claim rather than let a retry run
   * beside it); false when there is no claim (let go, or done).
   */
  extend(trigger: string, subscription: string): boolean {
    const held = this.claims.get(subscription)?.get(trigger);
    if (!held) return false;
    held.until = this.o.clock.monotonic() + this.o.leaseMs;
    return true;
  }

  /** A holder lets its claim go; the pair is free once every holder has. */
  release(trigger: string, subscription: string): void {
    const held = this.claims.get(subscription)?.get(trigger);
    if (held && --held.holders <= 0) this.unclaim(trigger, subscription);
  }

  /** Drops the pair's claim whoever holds it (it was processed). */
  unclaim(trigger: string, subscription: string): void {
    const triggers = this.claims.get(subscription);
    if (!triggers?.delete(trigger)) return;
    if (!triggers.size) this.claims.delete(subscription);
  }

  /** The pair without claiming it: processed within the TTL, claimed under a live lease, or neither. */
  peek(trigger: string, subscription: string): 'done' | 'held' | 'free' {
    if (this.isDone(trigger, subscription)) return 'done';
    const held = this.claims.get(subscription)?.get(trigger);
    return held && this.o.clock.monotonic() <= held.until ? 'held' : 'free';
  }

  /** Whether the pair was processed within the TTL. */
  isDone(trigger: string, subscription: string): boolean {
    const d = this.done.get(subscription)?.get(trigger);
    return d !== undefined && this.o.clock.monotonic() - d.known + d.head <= this.o.ttlMs;
  }

  /**
   * Notes the pair as processed at `at` (wall clock), and drops its claim. `head`: how old it already was
   * when this process learnt of it (a pair read from a file).
   */
  remember(trigger: string, subscription: string, at: number, head = 0): void {
    this.unclaim(trigger, subscription);
    let triggers = this.done.get(subscription);
    if (!triggers) this.done.set(subscription, (triggers = new Map()));
    const earlier = triggers.get(trigger);
    if (earlier !== undefined) {
      // moved to the end, so that each map stays in the order learnt of (expiry stops at the first it keeps)
      triggers.delete(trigger);
      this.count--;
      this.o.onForget?.(trigger, subscription, earlier.at);
    }
    const d = { at, known: this.o.clock.monotonic(), head };
    triggers.set(trigger, d);
    this.count++;
    if (this.o.maxPairs === undefined) return;
    this.order.push({ subscription, trigger, d });
    if (this.count > this.o.maxPairs) this.forgetOldest();
  }

  /**
   * Forgets the pairs expired by both clocks, and the claims whose lease passed longer than the TTL ago
   * (a holder that never came back).
   */
  expire(): void {
    const mono = this.o.clock.monotonic();
    const wall = this.o.clock.now();
    const ttl = this.o.ttlMs;
    for (const [subscription, triggers] of this.done) {
      for (const [trigger, d] of triggers) {
        // in the order learnt of: once one is kept, the later ones are newer by the monotonic clock
        if (mono - d.known <= ttl || wall - d.at <= ttl) break;
        triggers.delete(trigger);
        this.count--;
        this.o.onForget?.(trigger, subscription, d.at);
      }
      if (!triggers.size) this.done.delete(subscription);
    }
    for (const [subscription, triggers] of this.claims) {
      for (const [trigger, held] of triggers) if (mono - held.until > ttl) triggers.delete(trigger);
      if (!triggers.size) this.claims.delete(subscription);
    }
    while (this.first < this.order.length && !this.live(this.order[this.first]!)) this.first++;
    this.compact();
  }

  /** Every remembered pair as [trigger, subscription, at], oldest learnt first within each subscription. */
  *pairs(): Generator<[string, string, number]> {
    for (const [subscription, triggers] of this.done) for (const [trigger, d] of triggers) yield [trigger, subscription, d.at];
  }

  /** The oldest pair learnt of that is still remembered is forgotten. */
  private forgetOldest(): void {
    while (this.first < this.order.length) {
      const e = this.order[this.first++]!;
      if (!this.live(e)) continue;
      const triggers = this.done.get(e.subscription)!;
      triggers.delete(e.trigger);
      if (!triggers.size) this.done.delete(e.subscription);
      this.count--;
      this.o.onForget?.(e.trigger, e.subscription, e.d.at);
      break;
    }
    this.compact();
  }

  /** Whether an entry of `order` is the pair as remembered now (not forgotten, nor learnt of again since). */
  private live(e: { subscription: string; trigger: string; d: Done }): boolean {
    return this.done.get(e.subscription)?.get(e.trigger) === e.d;
  }

  /** Drops the entries of `order` before `first` once they are half of it. */
  private compact(): void {
    if (this.first < 1024 || this.first * 2 < this.order.length) return;
    this.order.splice(0, this.first);
    this.first = 0;
  }
}
