import { StorageError } from '../errors.js';

/**
 * The one store contract of the delivery core, runtime-neutral: every door (listen, the Node middleware,
 * the web handler, the relay, the sinks' consumers) claims, extends, completes and releases pairs through
 * this interface, and every store (MemoryStore, the file, PostgreSQL) implements it.
 * A change here is a change of every store and every door at once.
 */

/**
 * What claiming a (trigger, subscription) pair found:
 * - `won`: nobody has processed it or is processing it; the caller processes it now;
 * - `done`: it was processed within the TTL (a duplicate);
 * - `stored_now`: it was processed here before, but its pair could not be stored then (its delivery was
 *   answered 503); it is stored now, so this retry is a duplicate;
 * - `held`: someone is processing it right now (a claim whose lease has not run out).
 */
export type Claim = 'won' | 'done' | 'stored_now' | 'held';

/** Something a store noticed that the person running the receiver should know: one line each. */
export type StoreNotice =
  /** The wall clock moved by `ms` more (or less) than the time that passed: nothing is dropped for it. */
  | { kind: 'clock_jump'; ms: number }
  /** The pairs file was deleted or replaced under us: every live pair was written to a new file at its path. */
  | { kind: 'file_replaced'; file: string; how: 'deleted' | 'replaced'; pairs: number }
  /** Pairs of deliveries already processed, whose writes had failed, are stored now. */
  | { kind: 'stored_later'; pairs: number }
  /** The pairs file was left locked by a process that no longer runs (killed, crashed): taken over. */
  | { kind: 'lock_taken_over'; file: string; pid: number; host: string; started: string }
  /** Requests the shared history could not keep (the database refused their rows; the others of their batch are kept). */
  | { kind: 'history_dropped'; rows: number; reason: string };

/**
 * Where processed pairs are kept, and claims on the pairs being processed.
 *
 * The rules every implementation keeps:
 * - `complete` resolves only once the pair is written where a crash cannot lose it (handed to the operating
 *   system with write(2), or committed), so that a delivery is never acknowledged before its pair is stored.
 * - A pair whose delivery was processed is never let go because it could not be stored: it is held, and
 *   stored when the store can (its retry meanwhile is refused with 503, never processed again).
 * - A claim holds for `leaseMs` unless extended: one neither extended, completed nor released within it may
 *   be taken over by a later claim (its holder is taken to have died or hung). The core extends a claim
 *   every `leaseMs / 3` while its delivery is handled.
 */
export interface PairStore {
  /** Where the pairs are kept, for messages: a file's path, or a database without its password. */
  readonly where: string;
  /** How long a claim holds unless extended, in milliseconds. */
  readonly leaseMs: number;
  /**
   * Claims a pair to process it. Rejects with a PairStoreError when the store cannot tell (it is away),
   * or when the pair was processed here and is still not stored (`processed` set): either way the
   * delivery is answered 503, and nothing is processed again.
   */
  claim(trigger: string, subscription: string): Promise<Claim>;
  /**
   * Extends a claim this store holds by another `leaseMs`, while its delivery is still being handled.
   * Resolves false when it was not extended (the claim is no longer held here, or the store is away).
   * Never rejects.
   */
  extend(trigger: string, subscription: string): Promise<boolean>;
  /**
   * Marks a claimed pair processed; resolves once it is stored. If it rejects, the pair is not stored
   * yet: the store keeps it as processed (no retry processes it again, here or in another instance while
   * the claim's lease lasts) and stores it as soon as it can.
   */
  complete(trigger: string, subscription: string): Promise<void>;
  /** Gives up a claim without marking the pair processed, so that a retry can process it. Never rejects. */
  release(trigger: string, subscription: string): Promise<void>;
  /**
   * Looks at a pair without claiming it: processed within the TTL (`done`), claimed under a live lease
   * (`held`), or neither (`free`). Rejects like `claim` when the store cannot tell. Optional: a store
   * without it is looked at by a claim let go at once (src/delivery/forecast.ts), which a delivery of the
   * same forecast arriving at that moment finds held.
   */
  peek?(trigger: string, subscription: string): Promise<'done' | 'held' | 'free'>;
  /** Stores what is pending and lets go of the file or connection. */
  close(): Promise<void>;
}

/**
 * A pair could not be stored, or looked up (the disk is full, the database is gone). `persistent` is set
 * once the store has failed for longer than it is willing to wait: `listen` then stops, with exit 10.
 * `processed` is set on a claim of a pair that was processed here and is not stored yet.
 */
export class PairStoreError extends StorageError {
  constructor(
    message: string,
    readonly persistent: boolean,
    options: { hint?: string; cause?: unknown; processed?: boolean } = {},
  ) {
    super(message, options);
    this.processed = Boolean(options.processed);
  }
  readonly processed: boolean;
}
