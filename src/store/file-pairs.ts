import { closeSync, createReadStream, fdatasync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { UsageError } from '../errors.js';
import { fsReason, writeFileAtomic } from '../util/files.js';
import { PairStoreError, type Claim, type PairStore } from './pair-store.js';
import { ensurePrivateDir, STORE_HINT } from './paths.js';

export interface FilePairStoreOptions {
  /** The store folder; the file is `processed-pairs.ndjson` in it. */
  dir: string;
  /** How long a processed pair is remembered. */
  ttlMs: number;
  /** Also sync each batch to the disk (fdatasync) before its deliveries are answered: power-loss safety. */
  fsync?: boolean;
  /** How long writes may keep failing before the store gives up for good (default 60 s). */
  giveUpMs?: number;
  /** The clock, in milliseconds. */
  now?: () => number;
}

interface Waiter {
  trigger: string;
  subscription: string;
  at: number;
  /** Its line's length (with the newline), for the live size. */
  bytes: number;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** A pair's line in the file. */
const lineOf = (trigger: string, subscription: string, at: number) => `{"t":${JSON.stringify(trigger)},"s":${JSON.stringify(subscription)},"at":${at}}`;

/** Below this size the file is never compacted: rewriting it would cost more than the space it frees. */
const MIN_COMPACT_BYTES = 64 * 1024;

/**
 * The processed pairs in an append-only file of JSON lines, one per pair, in the store folder, so a
 * restarted `listen` still skips what it acknowledged before.
 *
 * - Pairs are written in batches, one write(2) per turn of the event loop for every pair completed in
 *   it, and `complete` resolves only after the write (and, with `fsync`, the sync) of its batch.
 * - A failed write is undone (the file is cut back to where the batch began): the batch's pairs are
 *   not stored, their claims are released, and `complete` rejects, so their deliveries are not
 *   acknowledged and the service's retries can get through.
 * - Pairs past the TTL are dropped from memory while running; when the file is more than twice what
 *   is still live, it is rewritten with the live pairs only (a new file, synced, then renamed over the
 *   old one, so a crash at any moment leaves one whole file or the other).
 */
export class FilePairStore implements PairStore {
  readonly where: string;
  /** Subscription id → trigger id → when it was processed (in the order processed, oldest first). */
  private readonly done = new Map<string, Map<string, number>>();
  /** Subscription id → trigger ids being processed now. */
  private readonly claimed = new Map<string, Set<string>>();
  private fd: number;
  /** Bytes in the file; `liveBytes`, what the live pairs' lines take. */
  private fileBytes: number;
  private liveBytes = 0;
  /** The last line in the file has no newline (a crash, or a write that failed and could not be undone). */
  private tornEnd: boolean;
  private batch = '';
  private waiting: Waiter[] = [];
  private scheduled = false;
  private syncing = false;
  private compacting: Promise<void> | undefined;
  private failingSince: number | undefined;
  private readonly sweeper: NodeJS.Timeout;
  private readonly now: () => number;

  private constructor(
    readonly file: string,
    private readonly options: FilePairStoreOptions,
    fd: number,
    size: number,
    tornEnd: boolean,
  ) {
    this.where = file;
    this.fd = fd;
    this.fileBytes = size;
    this.tornEnd = tornEnd;
    this.now = options.now ?? Date.now;
    const every = Math.max(1000, Math.min(60_000, Math.floor(options.ttlMs / 4)));
    this.sweeper = setInterval(() => this.expire(this.now()), every).unref();
  }

  /** Reads the file line by line (past the TTL and torn lines are dropped) and opens it for appending. */
  static async open(options: FilePairStoreOptions): Promise<FilePairStore> {
    ensurePrivateDir(options.dir);
    const file = join(options.dir, 'processed-pairs.ndjson');
    const now = (options.now ?? Date.now)();
    let fd: number;
    try {
      fd = openSync(file, 'a+', 0o600);
    } catch (err) {
      throw new UsageError(`Cannot use the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    let size: number;
    let tornEnd = false;
    const kept: [string, string, number][] = [];
    try {
      size = fstatSync(fd).size;
      if (size > 0) {
        const last = Buffer.alloc(1);
        readSync(fd, last, 0, 1, size - 1);
        tornEnd = last[0] !== 0x0a;
        const lines = createInterface({ input: createReadStream('', { fd, start: 0, autoClose: false }), crlfDelay: Infinity });
        for await (const text of lines) {
          const pair = parseLine(text);
          if (pair && now - pair[2] <= options.ttlMs) kept.push(pair);
        }
      }
    } catch (err) {
      closeSync(fd);
      throw new UsageError(`Cannot read the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    const store = new FilePairStore(file, options, fd, size, tornEnd);
    for (const [trigger, subscription, at] of kept) store.remember(trigger, subscription, at);
    store.compactIfWorthIt();
    await store.compacting;
    return store;
  }

  async claim(trigger: string, subscription: string, now: number): Promise<Claim> {
    if (this.isDone(trigger, subscription, now)) return 'done';
    let triggers = this.claimed.get(subscription);
    if (triggers?.has(trigger)) return 'held';
    if (!triggers) this.claimed.set(subscription, (triggers = new Set()));
    triggers.add(trigger);
    return 'won';
  }

  complete(trigger: string, subscription: string, now: number): Promise<void> {
    return new Promise((resolve, reject) => {
      const text = `${lineOf(trigger, subscription, now)}\n`;
      this.batch += text;
      this.waiting.push({ trigger, subscription, at: now, bytes: text.length, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  async release(trigger: string, subscription: string): Promise<void> {
    this.unclaim(trigger, subscription);
  }

  /** How many pairs are remembered. */
  get size(): number {
    let n = 0;
    for (const triggers of this.done.values()) n += triggers.size;
    return n;
  }

  /** Whether the pair was processed within the TTL. */
  isDone(trigger: string, subscription: string, now: number): boolean {
    const at = this.done.get(subscription)?.get(trigger);
    return at !== undefined && now - at <= this.options.ttlMs;
  }

  /** Writes this turn's batch: one write(2), then (with `fsync`) a sync, then its deliveries may be answered. */
  private flush(): void {
    this.scheduled = false;
    if (this.syncing || this.compacting) return; // the sync or compaction under way flushes again when it ends
    const written = this.writeBatch();
    if (!written) return;
    if (!this.options.fsync) {
      this.stored(written.waiters);
      return;
    }
    this.syncing = true;
    fdatasync(this.fd, (err) => {
      this.syncing = false;
      if (err) this.failed(err, written.waiters, written.before);
      else this.stored(written.waiters);
      if (this.waiting.length) this.flush();
    });
  }

  /**
   * Appends the pending batch (after a newline, if the file's last line is torn) with write(2): its
   * waiters and the file's size before it, or undefined if there was nothing to write or it failed.
   */
  private writeBatch(): { waiters: Waiter[]; before: number } | undefined {
    if (!this.waiting.length) return undefined;
    const waiters = this.waiting;
    const text = this.tornEnd ? `\n${this.batch}` : this.batch;
    this.batch = '';
    this.waiting = [];
    const before = this.fileBytes;
    try {
      this.fileBytes += writeAll(this.fd, text);
      this.tornEnd = false;
    } catch (err) {
      this.failed(err, waiters, before);
      return undefined;
    }
    return { waiters, before };
  }

  private stored(waiters: Waiter[]): void {
    this.failingSince = undefined;
    for (const w of waiters) {
      this.unclaim(w.trigger, w.subscription);
      this.remember(w.trigger, w.subscription, w.at, w.bytes);
    }
    for (const w of waiters) w.resolve();
    this.compactIfWorthIt();
  }

  /** Undoes a batch that could not be written: its pairs are not stored, and their claims are released. */
  private failed(err: unknown, waiters: Waiter[], before: number): void {
    try {
      ftruncateSync(this.fd, before);
      this.fileBytes = before;
    } catch {
      // could not be cut back: what was written of the batch stays, and the next write starts on a new line
      this.fileBytes = fstatSafe(this.fd) ?? before;
      this.tornEnd = true;
    }
    const now = this.now();
    this.failingSince ??= now;
    const giveUp = this.options.giveUpMs ?? 60_000;
    const persistent = now - this.failingSince >= giveUp;
    const error = new PairStoreError(
      persistent
        ? `The processed-pairs file ${this.file} has not been writable for ${Math.round((now - this.failingSince) / 1000)} s: ${fsReason(err)}.`
        : `Could not write to the processed-pairs file ${this.file}: ${fsReason(err)}.`,
      persistent,
      { hint: 'Free some space or fix the file, then start listen again; the service retries what was not acknowledged.', cause: err },
    );
    for (const w of waiters) this.unclaim(w.trigger, w.subscription);
    for (const w of waiters) w.reject(error);
  }

  private unclaim(trigger: string, subscription: string): void {
    const triggers = this.claimed.get(subscription);
    if (!triggers) return;
    triggers.delete(trigger);
    if (!triggers.size) this.claimed.delete(subscription);
  }

  /** Notes the pair as processed at `at`; `bytes`, its line's length in the file (measured when not given). */
  private remember(trigger: string, subscription: string, at: number, bytes = lineOf(trigger, subscription, at).length + 1): void {
    let triggers = this.done.get(subscription);
    if (!triggers) this.done.set(subscription, (triggers = new Map()));
    const earlier = triggers.get(trigger);
    if (earlier !== undefined) {
      // moved to the end, so that each map stays in the order processed (expiry stops at the first live one)
      triggers.delete(trigger);
      this.liveBytes -= lineOf(trigger, subscription, earlier).length + 1;
    }
    triggers.set(trigger, at);
    this.liveBytes += bytes;
  }

  /** Drops the pairs past the TTL from memory, and compacts the file when that made it worth it. */
  expire(now: number): void {
    for (const [subscription, triggers] of this.done) {
      for (const [trigger, at] of triggers) {
        if (now - at <= this.options.ttlMs) break;
        triggers.delete(trigger);
        this.liveBytes -= lineOf(trigger, subscription, at).length + 1;
      }
      if (!triggers.size) this.done.delete(subscription);
    }
    this.compactIfWorthIt();
  }

  /**
   * Rewrites the file with the live pairs only, when it is over twice their size: a new file, synced,
   * renamed over the old one, and the folder synced (src/util/files.ts, writeFileAtomic). A crash at
   * any point leaves either the old file whole or the new one whole, and both hold every live pair.
   * Batches wait meanwhile, so that no pair is appended to a file about to be replaced.
   */
  private compactIfWorthIt(): void {
    if (this.syncing || this.compacting || this.fileBytes < MIN_COMPACT_BYTES || this.fileBytes <= 2 * this.liveBytes) return;
    this.compacting = this.compact().finally(() => {
      this.compacting = undefined;
      if (this.waiting.length) this.flush();
    });
  }

  private async compact(): Promise<void> {
    let size = 0;
    const done = this.done;
    function* lines() {
      for (const [subscription, triggers] of done) {
        for (const [trigger, at] of triggers) {
          const text = `${lineOf(trigger, subscription, at)}\n`;
          size += Buffer.byteLength(text);
          yield text;
        }
      }
    }
    try {
      await writeFileAtomic(this.file, lines());
      const fresh = openSync(this.file, 'a', 0o600);
      closeSync(this.fd);
      this.fd = fresh;
      this.fileBytes = size;
      this.tornEnd = false;
    } catch {
      // not compacted this time: the old file is still whole, and still appended to
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    while (this.syncing || this.compacting) {
      await this.compacting;
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.scheduled = true; // no flush after this one
    const written = this.writeBatch();
    if (written) {
      try {
        fsyncSync(this.fd);
        this.stored(written.waiters);
      } catch (err) {
        this.failed(err, written.waiters, written.before);
      }
    }
    try {
      fsyncSync(this.fd);
    } catch {
      // nothing more can be done: every pair was already written
    }
    closeSync(this.fd);
  }
}

/** A line of the file as [trigger, subscription, at], or undefined if it is torn or not ours. */
function parseLine(text: string): [string, string, number] | undefined {
  if (!text) return undefined;
  try {
    const { t, s, at } = JSON.parse(text) as { t: unknown; s: unknown; at: unknown };
    return typeof t === 'string' && typeof s === 'string' && typeof at === 'number' ? [t, s, at] : undefined;
  } catch {
    return undefined;
  }
}

/** Writes all of `text`, however many write(2) calls it takes; returns the bytes written. */
function writeAll(fd: number, text: string): number {
  const bytes = Buffer.from(text, 'utf8');
  let done = 0;
  while (done < bytes.length) done += writeSync(fd, bytes, done, bytes.length - done);
  return bytes.length;
}

function fstatSafe(fd: number): number | undefined {
  try {
    return fstatSync(fd).size;
  } catch {
    return undefined;
  }
}
