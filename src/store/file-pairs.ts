import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import * as DEFAULTS from '../delivery/defaults.js';
import { sweepEvery } from '../delivery/defaults.js';
import { PairTable } from '../delivery/pair-table.js';
import type { Claim, PairStore, StoreNotice } from '../delivery/store.js';
import { StoredLater } from '../delivery/stored-later.js';
import { systemClock, type Clock } from '../util/clock.js';
import { writeFileAtomicSync } from '../util/files.js';
import { ownFile, type Ownership, type StoreDoor } from './owner-lock.js';
import { PairsLog, lineOf } from './pairs-log.js';
import { ensurePrivateDir } from './paths.js';

export interface FilePairStoreOptions {
  /** The store folder; the file is `processed-pairs.ndjson` in it (or one of its own: `webhook`). */
  dir: string;
  /**
   * The webhook whose deliveries these pairs are: they are kept in a file of their own
   * (`processed-pairs.webhook-ID.ndjson`), so that one receiver per webhook can share a folder.
   */
  webhook?: string;
  /** The webhook lives as long as the store (`listen --public-url`'s): its file is removed when the store closes. */
  temporary?: boolean;
  /** How long a processed pair is remembered. */
  ttlMs: number;
  /** How long a claim holds unless extended (default 60 s). */
  leaseMs?: number;
  /** Also sync each batch to the disk (fdatasync) before its deliveries are answered: power-loss safety. */
  fsync?: boolean;
  /** How long writes may keep failing before the store gives up for good (default 60 s). */
  giveUpMs?: number;
  clock?: Clock;
  /** How often the store looks at its file, its clocks and its unwritten pairs (default 1 s; 0: only when `watch()` is called, as a test does). */
  watchMs?: number;
  /** Told of what the person running listen should know (a clock that jumped, the file replaced, pairs stored late, a lock taken over). */
  onNotice?: (notice: StoreNotice) => void;
  /** Who opens it, for the advice when another process holds the file (default `listen`). */
  door?: StoreDoor;
}

/** The file every store without a webhook of its own uses. */
const SHARED_FILE = 'processed-pairs.ndjson';
const TEMPORARY = /^processed-pairs\.temporary-.+\.ndjson$/;

/** The name of a webhook's pairs file: its id as it is when that makes a plain file name, else a hash of it. */
export function pairsFileName(webhook?: string, temporary = false): string {
  if (webhook === undefined) return SHARED_FILE;
  const id = /^[A-Za-z0-9_-]{1,64}$/.test(webhook) ? webhook : `~${createHash('sha256').update(webhook).digest('hex').slice(0, 32)}`;
  return `processed-pairs.${temporary ? 'temporary' : 'webhook'}-${id}.ndjson`;
}

/** Below this size the file is never compacted: rewriting it would cost more than the space it frees. */
const MIN_COMPACT_BYTES = 64 * 1024;
/** A difference between the two clocks' progress past this is a jump of the wall clock, and is reported. */
const JUMP_MS = 5000;

/**
 * The processed pairs in a file of the store folder, so a restarted `listen` still skips what it
 * acknowledged before: the pair table of the delivery core (src/delivery/pair-table.ts: the pairs, their
 * TTL on two clocks, the claims and their leases) over the append log (pairs-log.ts: batches written
 * before their answers, failures undone), owned by one process at a time (owner-lock.ts).
 *
 * - A pair whose write fails is kept as processed and not stored (src/delivery/stored-later.ts): a retry
 *   gets 503 without being processed again, until the write goes through (tried every second, and at
 *   each retry), and then it is a duplicate.
 * - Time: a pair expires when the TTL has passed on the monotonic clock since it was processed (or since
 *   start, for a pair read from the file, which also counts its age by the wall clock then: a pair dated
 *   in the future is new). It is dropped from memory, and from the file, only once it has expired by both
 *   clocks, so a wall clock set forward or back drops nothing; such a jump is reported. A pair read at
 *   start that is past the TTL by the wall clock is no duplicate, but its line stays in the file until
 *   this process has seen the TTL pass: a clock set ahead at start empties nothing.
 * - When the file is more than twice what is still live, it is rewritten with the live pairs only. When
 *   the file is deleted or replaced under us (by something else: no other process of ours writes it), the
 *   same is done at once.
 */
export class FilePairStore implements PairStore {
  readonly where: string;
  readonly leaseMs: number;
  private readonly table: PairTable;
  private readonly later: StoredLater;
  /** What the remembered pairs' lines (and the dormant ones) take in the file. */
  private liveBytes = 0;
  /** Lines read at start of pairs past the TTL by the wall clock then: kept in the file until `dormantUntil` (monotonic). */
  private dormant: string[] = [];
  private dormantUntil = 0;
  private readonly watcher: NodeJS.Timeout | undefined;
  private readonly clock: Clock;
  /** The clocks when last looked at (to see a jump), and when pairs were last expired. */
  private lastWall: number;
  private lastMono: number;
  private lastExpiry: number;
  private readonly expireEvery: number;
  private closed: Promise<void> | undefined;

  private constructor(
    readonly file: string,
    private readonly options: FilePairStoreOptions,
    private readonly log: PairsLog,
    private readonly ownership: Ownership,
  ) {
    this.where = file;
    this.leaseMs = options.leaseMs ?? DEFAULTS.claimLeaseMs;
    this.clock = options.clock ?? systemClock;
    this.table = new PairTable({
      ttlMs: options.ttlMs,
      leaseMs: this.leaseMs,
      clock: this.clock,
      onForget: (trigger, subscription, at) => (this.liveBytes -= lineOf(trigger, subscription, at).length + 1),
    });
    this.later = new StoredLater({ store: (p) => this.write(p.trigger, p.subscription, p.at), onNotice: options.onNotice, retryMs: 0 });
    this.lastWall = this.clock.now();
    this.lastMono = this.lastExpiry = this.clock.monotonic();
    this.expireEvery = sweepEvery(options.ttlMs);
    const every = options.watchMs ?? DEFAULTS.storeWatchMs;
    this.watcher = every > 0 ? setInterval(() => this.watch(), every).unref() : undefined;
  }

  /**
   * Takes the file for this process (refused, exit 2, while another live process holds it), reads it line
   * by line (torn lines are dropped) and opens it for appending.
   */
  static async open(options: FilePairStoreOptions): Promise<FilePairStore> {
    ensurePrivateDir(options.dir);
    const file = join(options.dir, pairsFileName(options.webhook, options.temporary));
    const door = options.door ?? 'listen';
    const ownership = await ownFile(file, door);
    try {
      if (options.temporary) await removeLeftovers(options.dir, file, door);
      else if (options.webhook !== undefined) seed(file, join(options.dir, SHARED_FILE));
      const clock = options.clock ?? systemClock;
      const { log, read } = await PairsLog.open({ file, fsync: options.fsync, giveUpMs: options.giveUpMs, clock });
      const store = new FilePairStore(file, options, log, ownership);
      const wall = clock.now();
      const mono = clock.monotonic();
      // A pair past the TTL by the wall clock is no longer a duplicate; but the wall clock may be wrong now
      // (set ahead), so its line stays in the file (dormant) until this process has seen the TTL pass.
      for (const [trigger, subscription, at] of read) {
        if (wall - at > options.ttlMs) store.dormant.push(lineOf(trigger, subscription, at));
        else {
          store.table.remember(trigger, subscription, at, Math.max(0, wall - at));
          store.liveBytes += lineOf(trigger, subscription, at).length + 1;
        }
      }
      store.dormantUntil = mono + options.ttlMs;
      for (const line of store.dormant) store.liveBytes += Buffer.byteLength(line) + 1;
      const gone = ownership.previous;
      if (gone) options.onNotice?.({ kind: 'lock_taken_over', file, pid: gone.pid, host: gone.host, started: gone.started });
      store.compactIfWorthIt();
      await log.settled();
      return store;
    } catch (err) {
      ownership.release();
      throw err;
    }
  }

  async claim(trigger: string, subscription: string): Promise<Claim> {
    if (this.later.has(trigger, subscription)) return this.later.storeNow(trigger, subscription);
    return this.table.claim(trigger, subscription);
  }

  async extend(trigger: string, subscription: string): Promise<boolean> {
    return this.table.extend(trigger, subscription);
  }

  async complete(trigger: string, subscription: string): Promise<void> {
    const at = this.clock.now();
    try {
      await this.write(trigger, subscription, at);
    } catch (err) {
      // processed, not stored: kept as such, and written as soon as the file takes it
      this.table.unclaim(trigger, subscription);
      this.later.keep({ trigger, subscription, at });
      throw err;
    }
  }

  async release(trigger: string, subscription: string): Promise<void> {
    this.table.release(trigger, subscription);
  }

  async peek(trigger: string, subscription: string): Promise<'done' | 'held' | 'free'> {
    // processed here and not yet written: processed all the same
    return this.later.has(trigger, subscription) ? 'done' : this.table.peek(trigger, subscription);
  }

  /** How many pairs are remembered. */
  get size(): number {
    return this.table.size;
  }

  /** How many processed pairs are waiting to be written. */
  get pendingPairs(): number {
    return this.later.size;
  }

  /** Whether the pair was processed within the TTL (on the monotonic clock since it was known, plus its age then). */
  isDone(trigger: string, subscription: string): boolean {
    return this.table.isDone(trigger, subscription);
  }

  /** Appends the pair's line (with the turn's others); once it is written, the pair is remembered. */
  private async write(trigger: string, subscription: string, at: number): Promise<void> {
    const line = lineOf(trigger, subscription, at);
    await this.log.append(line);
    this.table.remember(trigger, subscription, at);
    this.liveBytes += line.length + 1;
    this.compactIfWorthIt();
  }

  /** Once a second: the file still ours, a clock that jumped, pairs to write that could not be, pairs to expire. */
  watch(): void {
    this.checkFile();
    this.ownership.check();
    this.checkClock();
    if (this.later.size) void this.later.retry();
    if (this.clock.monotonic() - this.lastExpiry >= this.expireEvery) this.expire();
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

  /** The path no longer names the file we write to (deleted, or replaced): every live pair is written to a new file there at once, and it is said. */
  private checkFile(): void {
    const how = this.closed ? undefined : this.log.replaced();
    if (!how) return;
    const pairs = this.size;
    void this.log.rewrite(this.lines())?.then((ok) => ok && this.options.onNotice?.({ kind: 'file_replaced', file: this.file, how, pairs }));
  }

  /** Drops the pairs that expired by both clocks from memory, and compacts the file when that made it worth it. */
  expire(): void {
    const mono = this.clock.monotonic();
    this.lastExpiry = mono;
    if (this.dormant.length && mono >= this.dormantUntil) {
      for (const line of this.dormant) this.liveBytes -= Buffer.byteLength(line) + 1;
      this.dormant = [];
    }
    this.table.expire();
    this.compactIfWorthIt();
  }

  /** Rewrites the file with the remembered pairs only, when it is over twice their size (in the background). */
  private compactIfWorthIt(): void {
    const bytes = this.log.bytes;
    if (this.closed || bytes < MIN_COMPACT_BYTES || bytes <= 2 * this.liveBytes || this.log.busy) return;
    void this.log.rewrite(this.lines());
  }

  /** The file's lines, as a rewrite writes them: the dormant ones, then every remembered pair. */
  private *lines(): Generator<string> {
    for (const line of this.dormant) yield `${line}\n`;
    for (const [trigger, subscription, at] of this.table.pairs()) yield `${lineOf(trigger, subscription, at)}\n`;
  }

  /** Resolves once nothing is under way (what was written in the background, and pairs stored late, are on disk). */
  async settled(): Promise<void> {
    await this.log.settled();
    await this.later.idle();
    await this.log.settled();
  }

  /** Writes what is pending (one last try for the pairs whose write failed), and lets the file go. */
  close(): Promise<void> {
    this.closed ??= (async () => {
      clearInterval(this.watcher);
      this.later.stop();
      await this.log.hold();
      void this.later.retry(); // appended to the last batch, which close writes
      await this.log.close();
      if (this.options.temporary) rmSync(this.file, { force: true });
      this.ownership.release();
    })();
    return this.closed;
  }
}

/**
 * A webhook's file, the first time: started from the shared file, which held every webhook's pairs before
 * each had its own (a listen upgraded mid-retry must still skip what it acknowledged). A copy renamed into
 * place, so a crash leaves no half file.
 */
function seed(file: string, shared: string): void {
  if (existsSync(file) || !existsSync(shared)) return;
  try {
    writeFileAtomicSync(file, readFileSync(shared));
  } catch {
    // not copied: the file starts empty, as it would have without the shared one
  }
}

/** The files of temporary webhooks whose listen is gone (killed before it could remove its own): removed. */
async function removeLeftovers(dir: string, own: string, door: StoreDoor): Promise<void> {
  let names: string[];
  try {
    names = readdirSync(dir).filter((n) => TEMPORARY.test(n));
  } catch {
    return;
  }
  for (const name of names) {
    const file = join(dir, name);
    if (file === own) continue;
    try {
      const left = await ownFile(file, door);
      rmSync(file, { force: true });
      left.release();
    } catch {
      // its listen still runs, or it cannot be taken now: left as it is
    }
  }
}
