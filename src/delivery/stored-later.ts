import { PairStoreError, type StoreNotice } from './store.js';

/** A pair processed whose write failed: kept until it is stored. `at`: when it was processed (wall clock). */
export interface LaterPair {
  trigger: string;
  subscription: string;
  at: number;
}

export interface StoredLaterOptions {
  /** Stores one pair (the store's own write); rejects if it still cannot. Called synchronously by `retry`. */
  store(pair: LaterPair): Promise<void>;
  onNotice?: (notice: StoreNotice) => void;
  /** Tries them all again this often while some are kept (0: only when `retry` is called, by the store's own timer). */
  retryMs: number;
}

const key = (trigger: string, subscription: string) => `${subscription}\u0000${trigger}`;

/**
 * The rule every store keeps for a pair whose delivery was processed but whose write failed (a full disk,
 * a database away): it is never let go. It is kept here as processed and not stored; a retry of its
 * delivery is refused (503: `storeNow` rejects with `processed` set) without being processed again, until
 * the store can write it; then that retry is a duplicate (`stored_now`). Meanwhile they are all tried again
 * (every `retryMs`, or at the store's own pace), and those written so are said in one notice.
 */
export class StoredLater {
  private readonly kept = new Map<string, LaterPair>();
  /** The kept pairs whose write is under way (not asked twice at once). */
  private readonly writing = new Map<string, Promise<void>>();
  private timer: ReturnType<typeof setInterval> | undefined;
  private running: Promise<void> | undefined;

  constructor(private readonly o: StoredLaterOptions) {}

  /** How many processed pairs are waiting to be stored. */
  get size(): number {
    return this.kept.size;
  }

  has(trigger: string, subscription: string): boolean {
    return this.kept.size > 0 && this.kept.has(key(trigger, subscription));
  }

  /** A pair processed whose write failed: kept, and tried again until it is stored. */
  keep(pair: LaterPair): void {
    this.kept.set(key(pair.trigger, pair.subscription), pair);
    if (this.o.retryMs > 0 && !this.timer) {
      this.timer = setInterval(() => void this.retry(), this.o.retryMs);
      (this.timer as { unref?: () => void }).unref?.();
    }
  }

  /** The retry of a kept pair's delivery: stored now, and a duplicate; or a PairStoreError (`processed`), answered 503. */
  async storeNow(trigger: string, subscription: string): Promise<'stored_now'> {
    const pair = this.kept.get(key(trigger, subscription))!;
    try {
      await this.write(pair);
    } catch (err) {
      const e = err as Partial<PairStoreError>;
      throw new PairStoreError(`Already processed, and its pair still cannot be stored: ${(err as Error).message}`, Boolean(e.persistent), {
        processed: true,
        hint: e.hint,
        cause: err,
      });
    }
    return 'stored_now';
  }

  /** Tries every kept pair again (one write each, which the store batches); those stored are said in one notice. */
  retry(): Promise<void> {
    const pairs = [...this.kept].filter(([k]) => !this.writing.has(k)).map(([, p]) => p);
    if (!pairs.length) return this.running ?? Promise.resolve();
    const tries = pairs.map((p) => this.write(p));
    const run = Promise.allSettled(tries).then((results) => {
      const stored = results.filter((r) => r.status === 'fulfilled').length;
      if (stored) this.o.onNotice?.({ kind: 'stored_later', pairs: stored });
    });
    const all = (this.running = Promise.all([this.running, run]).then(() => undefined));
    void all.finally(() => {
      if (this.running === all) this.running = undefined;
    });
    return all;
  }

  /** Resolves once no retry is under way. */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private write(pair: LaterPair): Promise<void> {
    const k = key(pair.trigger, pair.subscription);
    const under = this.writing.get(k);
    if (under) return under;
    const written = this.o.store(pair).then(
      () => {
        this.writing.delete(k);
        this.kept.delete(k);
        if (!this.kept.size) this.stop();
      },
      (err: unknown) => {
        this.writing.delete(k);
        throw err;
      },
    );
    this.writing.set(k, written);
    return written;
  }
}
