import { closeSync, createReadStream, fdatasync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { UsageError } from '../errors.js';
import { systemClock, type Clock } from '../util/clock.js';
import { fsReason, writeFileAtomic } from '../util/files.js';
import { PairStoreError, type Claim, type PairStore, type StoreNotice } from './pair-store.js';
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
  clock?: Clock;
  /** How often the store looks at its file, its clocks and its unwritten pairs (default 1 s; 0: only when `watch()` is called, as a test does). */
  watchMs?: number;
  /** Told of what the person running listen should know (a clock that jumped, the file replaced, pairs stored late). */
  onNotice?: (notice: StoreNotice) => void;
}

/** A processed pair, as remembered. */
interface Done {
  /** When it was processed, by the wall clock: what the file says. */
  at: number;
  /** When this process learnt of it (processed it, or read it from the file), by the monotonic clock. */
  known: number;
  /** How old it already was then, by the wall clock (0 for a pair processed here, or dated in the future). */
  head: number;
}

interface Waiter {
  trigger: string;
  subscription: string;
  at: number;
  /** Its line's length (with the newline), for the live size. */
  bytes: number;
  /** A pair processed earlier whose write had failed, written now by the store itself (not for a retry). */
  late: boolean;
  resolve: () => void;
  reject: (err: Error) => void;
}

/** A pair's line in the file. */
const lineOf = (trigger: string, subscription: string, at: number) => `{"t":${JSON.stringify(trigger)},"s":${JSON.stringify(subscription)},"at":${at}}`;
const pairKey = (trigger: string, subscription: string) => `${subscription}\u0000${trigger}`;

/** Below this size the file is never compacted: rewriting it would cost more than the space it frees. */
const MIN_COMPACT_BYTES = 64 * 1024;
/** How often the store looks at its file, its clocks and the pairs it could not write. */
const WATCH_MS = 1000;
/** A difference between the two clocks' progress past this is a jump of the wall clock, and is reported. */
const JUMP_MS = 5000;

/**
 * The processed pairs in an append-only file of JSON lines, one per pair, in the store folder, so a
 * restarted `listen` still skips what it acknowledged before.
 *
 * - Pairs are written in batches, one write(2) per turn of the event loop for every pair completed in
 *   it, and `complete` resolves only after the write (and, with `fsync`, the sync) of its batch.
 * - A failed write is undone (the file is cut back to where the batch began) and `complete` rejects, so
 *   the delivery is not acknowledged; but its pair stays, in memory, as processed and not yet stored: a
 *   retry gets 503 without being processed again, until the write goes through (tried every second, and
 *   at each retry), and then it is a duplicate.
 * - Time: a pair expires when the TTL has passed on the monotonic clock since it was processed (or since
 *   start, for a pair read from the file, which also counts its age by the wall clock then: a pair dated
 *   in the future is new). It is dropped from memory, and from the file, only once it has expired by both
 *   clocks, so a wall clock set forward or back drops nothing; such a jump is reported. A pair read at
 *   start that is past the TTL by the wall clock is no duplicate, but its line stays in the file until
 *   this process has seen the TTL pass: a clock set ahead at start empties nothing.
 * - When the file is more than twice what is still live, it is rewritten with the live pairs only (a new
 *   file, synced, then renamed over the old one, so a crash at any moment leaves one whole file or the
 *   other). When the file is deleted or replaced under us, the same is done at once.
 */
export class FilePairStore implements PairStore {
  readonly where: string;
  /** Subscription id → trigger id → the pair (in the order learnt of, oldest first). */
  private readonly done = new Map<string, Map<string, Done>>();
  /** Subscription id → trigger ids being processed now. */
  private readonly claimed = new Map<string, Set<string>>();
  /** Pairs processed whose write failed: kept, and written as soon as the file takes them. */
  private readonly unsettled = new Map<string, { trigger: string; subscription: string; at: number }>();
  private fd: number;
  /** Bytes in the file; `liveBytes`, what the remembered pairs' lines take. */
  private fileBytes: number;
  private liveBytes = 0;
  /** Lines read at start of pairs past the TTL by the wall clock then: kept in the file until `dormantUntil` (monotonic). */
  private dormant: string[] = [];
  private dormantUntil = 0;
  /** The last line in the file has no newline (a crash, or a write that failed and could not be undone). */
  private tornEnd: boolean;
  private batch = '';
  private waiting: Waiter[] = [];
  private scheduled = false;
  private syncing = false;
  private compacting: Promise<void> | undefined;
  private failingSince: number | undefined;
  private readonly watcher: NodeJS.Timeout | undefined;
  private readonly clock: Clock;
  /** The clocks when last looked at (to see a jump), and when pairs were last expired. */
  private lastWall: number;
  private lastMono: number;
  private lastExpiry: number;
  private readonly expireEvery: number;

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
    this.clock = options.clock ?? systemClock;
    this.lastWall = this.clock.now();
    this.lastMono = this.lastExpiry = this.clock.monotonic();
    this.expireEvery = Math.max(WATCH_MS, Math.min(60_000, Math.floor(options.ttlMs / 4)));
    const every = options.watchMs ?? WATCH_MS;
    this.watcher = every > 0 ? setInterval(() => this.watch(), every).unref() : undefined;
  }

  /** Reads the file line by line (torn lines are dropped) and opens it for appending. */
  static async open(options: FilePairStoreOptions): Promise<FilePairStore> {
    ensurePrivateDir(options.dir);
    const file = join(options.dir, 'processed-pairs.ndjson');
    let fd: number;
    try {
      fd = openSync(file, 'a+', 0o600);
    } catch (err) {
      throw new UsageError(`Cannot use the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    let size: number;
    let tornEnd = false;
    const read: [string, string, number][] = [];
    try {
      size = fstatSync(fd).size;
      if (size > 0) {
        const last = Buffer.alloc(1);
        readSync(fd, last, 0, 1, size - 1);
        tornEnd = last[0] !== 0x0a;
        const lines = createInterface({ input: createReadStream('', { fd, start: 0, autoClose: false }), crlfDelay: Infinity });
        for await (const text of lines) {
          const pair = parseLine(text);
          if (pair) read.push(pair);
        }
      }
    } catch (err) {
      closeSync(fd);
      throw new UsageError(`Cannot read the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    const store = new FilePairStore(file, options, fd, size, tornEnd);
    const wall = store.clock.now();
    const mono = store.clock.monotonic();
    // A pair past the TTL by the wall clock is no longer a duplicate; but the wall clock may be wrong now
    // (set ahead), so its line stays in the file (dormant) until this process has seen the TTL pass.
    for (const [trigger, subscription, at] of read) {
      if (wall - at > options.ttlMs) store.dormant.push(lineOf(trigger, subscription, at));
      else store.remember(trigger, subscription, { at, known: mono, head: Math.max(0, wall - at) });
    }
    store.dormantUntil = mono + options.ttlMs;
    for (const line of store.dormant) store.liveBytes += Buffer.byteLength(line) + 1;
    store.compactIfWorthIt();
    await store.compacting;
    return store;
  }

  async claim(trigger: string, subscription: string): Promise<Claim> {
    if (this.isDone(trigger, subscription)) return 'done';
    if (this.unsettled.size && this.unsettled.has(pairKey(trigger, subscription))) return this.settleNow(trigger, subscription);
    let triggers = this.claimed.get(subscription);
    if (triggers?.has(trigger)) return 'held';
    if (!triggers) this.claimed.set(subscription, (triggers = new Set()));
    triggers.add(trigger);
    return 'won';
  }

  complete(trigger: string, subscription: string): Promise<void> {
    return this.append(trigger, subscription, this.clock.now());
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

  /** How many processed pairs are waiting to be written. */
  get pendingPairs(): number {
    return this.unsettled.size;
  }

  /** Whether the pair was processed within the TTL (on the monotonic clock since it was known, plus its age then). */
  isDone(trigger: string, subscription: string): boolean {
    const d = this.done.get(subscription)?.get(trigger);
    return d !== undefined && this.clock.monotonic() - d.known + d.head <= this.options.ttlMs;
  }

  /** Queues a pair's line for this turn's batch; resolves once it is written. */
  private append(trigger: string, subscription: string, at: number, late = false): Promise<void> {
    return new Promise((resolve, reject) => {
      const text = `${lineOf(trigger, subscription, at)}\n`;
      this.batch += text;
      this.waiting.push({ trigger, subscription, at, bytes: text.length, late, resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** A retry of a pair processed here and not yet written: written now, and a duplicate; or still not, and a 503. */
  private async settleNow(trigger: string, subscription: string): Promise<Claim> {
    const pending = this.unsettled.get(pairKey(trigger, subscription))!;
    try {
      await this.append(trigger, subscription, pending.at);
    } catch (err) {
      const e = err as PairStoreError;
      throw new PairStoreError(`Already processed, and its pair still cannot be written: ${e.message}`, e.persistent, { processed: true, hint: e.hint, cause: err });
    }
    return 'stored_now';
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
    const known = this.clock.monotonic();
    let late = 0;
    for (const w of waiters) {
      this.unclaim(w.trigger, w.subscription);
      if (this.unsettled.size && this.unsettled.delete(pairKey(w.trigger, w.subscription)) && w.late) late++;
      this.remember(w.trigger, w.subscription, { at: w.at, known, head: 0 }, w.bytes);
    }
    for (const w of waiters) w.resolve();
    if (late) this.options.onNotice?.({ kind: 'stored_later', pairs: late });
    this.compactIfWorthIt();
  }

  /**
   * A batch that could not be written: undone, and its pairs kept as processed and not yet stored (their
   * claims held), to be written as soon as the file takes them.
   */
  private failed(err: unknown, waiters: Waiter[], before: number): void {
    try {
      ftruncateSync(this.fd, before);
      this.fileBytes = before;
    } catch {
      // could not be cut back: what was written of the batch stays, and the next write starts on a new line
      this.fileBytes = fstatSafe(this.fd) ?? before;
      this.tornEnd = true;
    }
    const now = this.clock.monotonic();
    this.failingSince ??= now;
    const giveUp = this.options.giveUpMs ?? 60_000;
    const persistent = now - this.failingSince >= giveUp;
    const error = new PairStoreError(
      persistent
        ? `The processed-pairs file ${this.file} has not been writable for ${Math.round((now - this.failingSince) / 1000)} s: ${fsReason(err)}.`
        : `Could not write to the processed-pairs file ${this.file}: ${fsReason(err)}.`,
      persistent,
      { hint: 'Free some space or fix the file; the pairs of what was processed are kept and written when it can be.', cause: err },
    );
    for (const w of waiters) {
      this.unclaim(w.trigger, w.subscription);
      this.unsettled.set(pairKey(w.trigger, w.subscription), { trigger: w.trigger, subscription: w.subscription, at: w.at });
    }
    for (const w of waiters) w.reject(error);
  }

  private unclaim(trigger: string, subscription: string): void {
    const triggers = this.claimed.get(subscription);
    if (!triggers) return;
    triggers.delete(trigger);
    if (!triggers.size) this.claimed.delete(subscription);
  }

  /** Notes the pair as processed; `bytes`, its line's length in the file (measured when not given). */
  private remember(trigger: string, subscription: string, pair: Done, bytes = lineOf(trigger, subscription, pair.at).length + 1): void {
    let triggers = this.done.get(subscription);
    if (!triggers) this.done.set(subscription, (triggers = new Map()));
    const earlier = triggers.get(trigger);
    if (earlier !== undefined) {
      // moved to the end, so that each map stays in the order learnt of (expiry stops at the first it keeps)
      triggers.delete(trigger);
      this.liveBytes -= lineOf(trigger, subscription, earlier.at).length + 1;
    }
    triggers.set(trigger, pair);
    this.liveBytes += bytes;
  }

  /** Once a second: the file still ours, a clock that jumped, pairs to write that could not be, pairs to expire. */
  watch(): void {
    this.checkFile();
    this.checkClock();
    if (this.unsettled.size && !this.waiting.length) this.retryUnsettled();
    if (this.clock.monotonic() - this.lastExpiry >= this.expireEvery) this.expire();
  }

  /** Writes again the pairs whose write failed (a failure again changes nothing: they stay, and are tried again). */
  private retryUnsettled(): void {
    for (const p of this.unsettled.values()) void this.append(p.trigger, p.subscription, p.at, true).catch(() => undefined);
  }

  /** A jump of the wall clock: it moved more, or less, than the time that passed. Reported; nothing depends on it. */
  private checkClock(): void {
    const wall = this.clock.now();
    const mono = this.clock.monotonic();
    const jump = wall - this.lastWall - (mono - this.lastMono);
    this.lastWall = wall;
    this.lastMono = mono;
    if (Math.abs(jump) > JUMP_MS) this.options.onNotice?.({ kind: 'clock_jump', ms: jump });
  }

  /**
   * Whether the path still names the file we write to: if it was deleted, or replaced by another file,
   * every live pair is written to a new file there at once (as a compaction does), and it is said.
   */
  private checkFile(): void {
    if (this.compacting) return;
    let how: 'deleted' | 'replaced' | undefined;
    try {
      const open = fstatSync(this.fd);
      const named = statSync(this.file, { throwIfNoEntry: false });
      if (!named) how = 'deleted';
      else if (named.ino !== open.ino || named.dev !== open.dev) how = 'replaced';
    } catch {
      return; // cannot tell now: the next look will
    }
    if (!how) return;
    const pairs = this.size;
    this.compacting = this.compact().then(
      (ok) => (ok ? this.options.onNotice?.({ kind: 'file_replaced', file: this.file, how: how!, pairs }) : undefined),
    ).finally(() => {
      this.compacting = undefined;
      if (this.waiting.length) this.flush();
    });
  }

  /** Drops the pairs that expired by both clocks from memory, and compacts the file when that made it worth it. */
  expire(): void {
    const mono = this.clock.monotonic();
    const wall = this.clock.now();
    const ttl = this.options.ttlMs;
    this.lastExpiry = mono;
    if (this.dormant.length && mono >= this.dormantUntil) {
      for (const line of this.dormant) this.liveBytes -= Buffer.byteLength(line) + 1;
      this.dormant = [];
    }
    for (const [subscription, triggers] of this.done) {
      for (const [trigger, d] of triggers) {
        // in the order learnt of: once one is kept, the later ones are newer by the monotonic clock
        if (mono - d.known <= ttl || wall - d.at <= ttl) break;
        triggers.delete(trigger);
        this.liveBytes -= lineOf(trigger, subscription, d.at).length + 1;
      }
      if (!triggers.size) this.done.delete(subscription);
    }
    this.compactIfWorthIt();
  }

  /**
   * Rewrites the file with the remembered pairs only, when it is over twice their size: a new file,
   * synced, renamed over the old one, and the folder synced (src/util/files.ts, writeFileAtomic). A
   * crash at any point leaves either the old file whole or the new one whole, and both hold every pair
   * remembered. Batches wait meanwhile, so that no pair is appended to a file about to be replaced.
   */
  private compactIfWorthIt(): void {
    if (this.syncing || this.compacting || this.fileBytes < MIN_COMPACT_BYTES || this.fileBytes <= 2 * this.liveBytes) return;
    this.compacting = this.compact().then(() => undefined).finally(() => {
      this.compacting = undefined;
      if (this.waiting.length) this.flush();
    });
  }

  /** Writes every remembered pair to a new file at the path, and appends to it from now on; false if it could not. */
  private async compact(): Promise<boolean> {
    let size = 0;
    const done = this.done;
    const dormant = this.dormant;
    function* lines() {
      for (const line of dormant) {
        size += Buffer.byteLength(line) + 1;
        yield `${line}\n`;
      }
      for (const [subscription, triggers] of done) {
        for (const [trigger, d] of triggers) {
          const text = `${lineOf(trigger, subscription, d.at)}\n`;
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
      return true;
    } catch {
      // not rewritten this time: the old file is still whole, and still appended to
      return false;
    }
  }

  /** Resolves once no compaction or sync is under way (what was written in the background is on disk). */
  async settled(): Promise<void> {
    while (this.syncing || this.compacting || this.scheduled) {
      await this.compacting;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  async close(): Promise<void> {
    clearInterval(this.watcher);
    while (this.syncing || this.compacting) {
      await this.compacting;
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.scheduled = true; // no flush after this one
    this.retryUnsettled(); // one last try for the pairs that could not be written
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
