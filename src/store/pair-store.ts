import { UsageError } from '../errors.js';

/**
 * What claiming a (trigger, subscription) pair found:
 * - `won`: nobody has processed it or is processing it; the caller processes it now;
 * - `done`: it was processed within the TTL (a duplicate);
 * - `held`: someone is processing it right now (a claim that is still live).
 */
export type Claim = 'won' | 'done' | 'held';

/**
 * Where `listen` keeps the pairs it has processed, and claims the ones it is processing: the file in
 * the store folder, or a shared PostgreSQL database. The receiver knows only this interface.
 *
 * The rule every implementation keeps: `complete` resolves only once the pair is written where a
 * crash cannot lose it (handed to the operating system with write(2), or committed), so that a
 * delivery is never acknowledged before its pair is stored.
 */
export interface PairStore {
  /** Where the pairs are kept, for messages: a file's path, or a database without its password. */
  readonly where: string;
  claim(trigger: string, subscription: string, now: number): Promise<Claim>;
  /**
   * Marks a claimed pair processed; resolves once it is stored. If it rejects, the pair is not stored:
   * the file store releases the claim; the PostgreSQL store keeps it (the delivery was processed, and
   * no other instance should process it again) and commits the pair once the database is back.
   */
  complete(trigger: string, subscription: string, now: number): Promise<void>;
  /** Gives up a claim without marking the pair processed, so that a retry can process it. Never rejects. */
  release(trigger: string, subscription: string): Promise<void>;
  /** Stores what is pending and lets go of the file or connection. */
  close(): Promise<void>;
}

/**
 * A pair could not be stored (the disk is full, the database is gone). `persistent` is set once the
 * store has failed for longer than it is willing to wait: `listen` then stops, with exit 2 (a store
 * that cannot be used, as for every other file in the store folder).
 */
export class PairStoreError extends UsageError {
  constructor(
    message: string,
    readonly persistent: boolean,
    options: { hint?: string; cause?: unknown } = {},
  ) {
    super(message, options);
  }
}
