import { closeSync, constants, createReadStream, fdatasync, fstatSync, fsyncSync, ftruncateSync, openSync, readSync, statSync, writeSync } from 'node:fs';
import { createInterface } from 'node:readline';
import * as DEFAULTS from '../delivery/defaults.js';
import { PairStoreError } from '../delivery/store.js';
import { UsageError } from '../errors.js';
import type { Clock } from '../util/clock.js';
import { fsReason, writeFileAtomic } from '../util/files.js';
import { STORE_HINT } from './paths.js';
import { storeFileProblem } from './private-file.js';

/** Opened for reading and appending, created 0600 if need be, never through a symbolic link. */
const APPEND = constants.O_RDWR | constants.O_APPEND | constants.O_CREAT | (constants.O_NOFOLLOW ?? 0);

export interface PairsLogOptions {
  file: string;
  /** Also sync each batch to the disk (fdatasync) before its writes resolve: power-loss safety. */
  fsync?: boolean;
  /** How long writes may keep failing before a failure is persistent (default 60 s). */
  giveUpMs?: number;
  clock: Clock;
}

interface Waiter {
  resolve: () => void;
  reject: (err: Error) => void;
}

/** A pair's line in the file. */
export const lineOf = (trigger: string, subscription: string, at: number) => `{"t":${JSON.stringify(trigger)},"s":${JSON.stringify(subscription)},"at":${at}}`;

/**
 * The processed pairs' append log: a file of JSON lines, one per pair, and the rules that make a line
 * that was acknowledged survive a crash.
 *
 * - Lines are written in batches, one write(2) per turn of the event loop for every pair appended in it,
 *   and each append resolves only after the write (and, with `fsync`, the sync) of its batch.
 * - A failed write is undone (the file is cut back to where the batch began) and its appends reject,
 *   `persistent` once writes have failed for `giveUpMs`.
 * - A rewrite (a compaction, or a file deleted or replaced under us) writes a new file, synced, then
 *   renames it over the old one, so a crash at any moment leaves one whole file or the other; batches
 *   wait meanwhile, so that no line is appended to a file about to be replaced.
 */
export class PairsLog {
  private fd: number;
  /** Bytes in the file. */
  private fileBytes: number;
  /** The last line in the file has no newline (a crash, or a write that failed and could not be undone). */
  private tornEnd: boolean;
  private batch = '';
  private waiting: Waiter[] = [];
  private scheduled = false;
  private syncing = false;
  private rewriting: Promise<void> | undefined;
  private failingSince: number | undefined;

  private constructor(
    readonly file: string,
    private readonly o: PairsLogOptions,
    fd: number,
    size: number,
    tornEnd: boolean,
  ) {
    this.fd = fd;
    this.fileBytes = size;
    this.tornEnd = tornEnd;
  }

  /** Opens the file for appending (created if need be) and reads its pairs as [trigger, subscription, at] (torn lines dropped). */
  static async open(o: PairsLogOptions): Promise<{ log: PairsLog; read: [string, string, number][] }> {
    let fd: number;
    try {
      fd = openSync(o.file, APPEND, 0o600);
    } catch (err) {
      const link = (err as NodeJS.ErrnoException).code === 'ELOOP';
      throw new UsageError(`Cannot use the processed-pairs file ${o.file}: ${link ? 'it is a symbolic link' : fsReason(err)}.`, {
        hint: link ? `Remove the link (rm ${o.file}): wxhooks makes its own file.` : STORE_HINT,
        cause: err,
      });
    }
    // the store folder's rule (#32.3): pairs another user could have written would make deliveries duplicates, never processed
    const st = fstatSync(fd);
    const problem = st.isFile() ? storeFileProblem(st) : 'it is not a regular file';
    if (problem) {
      closeSync(fd);
      throw new UsageError(`Not using the processed-pairs file ${o.file}: ${problem}.`, {
        hint: `Look at it, then remove it (rm ${o.file}): wxhooks makes its own. If other users can add files to its folder, point WXHOOKS_CONFIG_DIR at a folder of your own.`,
      });
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
      throw new UsageError(`Cannot read the processed-pairs file ${o.file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    return { log: new PairsLog(o.file, o, fd, size, tornEnd), read };
  }

  /** Bytes in the file now. */
  get bytes(): number {
    return this.fileBytes;
  }

  /** A sync or a rewrite is under way. */
  get busy(): boolean {
    return this.syncing || this.rewriting !== undefined;
  }

  /** Queues a pair's line (`lineOf`) for this turn's batch; resolves once it is written. */
  append(line: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.batch += `${line}\n`;
      this.waiting.push({ resolve, reject });
      if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => this.flush());
      }
    });
  }

  /** Writes this turn's batch: one write(2), then (with `fsync`) a sync, then its appends resolve. */
  private flush(): void {
    this.scheduled = false;
    if (this.busy) return; // the sync or rewrite under way flushes again when it ends
    const written = this.writeBatch();
    if (!written) return;
    if (!this.o.fsync) {
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
    for (const w of waiters) w.resolve();
  }

  /** A batch that could not be written: undone, and its appends rejected. */
  private failed(err: unknown, waiters: Waiter[], before: number): void {
    try {
      ftruncateSync(this.fd, before);
      this.fileBytes = before;
    } catch {
      // could not be cut back: what was written of the batch stays, and the next write starts on a new line
      this.fileBytes = fstatSafe(this.fd) ?? before;
      this.tornEnd = true;
    }
    const now = this.o.clock.monotonic();
    this.failingSince ??= now;
    const persistent = now - this.failingSince >= (this.o.giveUpMs ?? DEFAULTS.storeGiveUpMs);
    const error = new PairStoreError(
      persistent
        ? `The processed-pairs file ${this.file} has not been writable for ${Math.round((now - this.failingSince) / 1000)} s: ${fsReason(err)}.`
        : `Could not write to the processed-pairs file ${this.file}: ${fsReason(err)}.`,
      persistent,
      { hint: 'Free some space or fix the file; the pairs of what was processed are kept and written when it can be.', cause: err },
    );
    for (const w of waiters) w.reject(error);
  }

  /** Whether the path still names the file we write to: undefined if it does (or cannot be told now). */
  replaced(): 'deleted' | 'replaced' | undefined {
    if (this.rewriting) return undefined;
    try {
      const open = fstatSync(this.fd);
      const named = statSync(this.file, { throwIfNoEntry: false });
      if (!named) return 'deleted';
      if (named.ino !== open.ino || named.dev !== open.dev) return 'replaced';
    } catch {
      // cannot tell now: the next look will
    }
    return undefined;
  }

  /**
   * Writes `lines` to a new file at the path (synced, renamed over the old one, the folder synced: src/util/files.ts,
   * writeFileAtomic) and appends to it from then on; false if it could not (the old file is still whole,
   * and still appended to). Batches wait meanwhile. Undefined if a sync or rewrite is under way.
   */
  rewrite(lines: Iterable<string>): Promise<boolean> | undefined {
    if (this.busy) return undefined;
    let size = 0;
    function* counted() {
      for (const line of lines) {
        size += Buffer.byteLength(line);
        yield line;
      }
    }
    const done = (async () => {
      try {
        await writeFileAtomic(this.file, counted());
        const fresh = openSync(this.file, APPEND, 0o600);
        closeSync(this.fd);
        this.fd = fresh;
        this.fileBytes = size;
        this.tornEnd = false;
        return true;
      } catch {
        return false;
      }
    })();
    this.rewriting = done
      .then(() => undefined)
      .finally(() => {
        this.rewriting = undefined;
        if (this.waiting.length) this.flush();
      });
    return done;
  }

  /** Resolves once no rewrite or sync is under way and no batch waits (what was appended is written). */
  async settled(): Promise<void> {
    while (this.syncing || this.rewriting || this.scheduled) {
      await this.rewriting;
      await new Promise((resolve) => setImmediate(resolve));
    }
  }

  /** Waits for the sync or rewrite under way; from then on, nothing is written until `close` (which writes what is appended meanwhile). */
  async hold(): Promise<void> {
    while (this.syncing || this.rewriting) {
      await this.rewriting;
      await new Promise((resolve) => setImmediate(resolve));
    }
    this.scheduled = true; // no flush after this: close writes the last batch
  }

  /** Writes the last batch, syncs, and closes the file. */
  async close(): Promise<void> {
    await this.hold();
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
export function parseLine(text: string): [string, string, number] | undefined {
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

/**
 * Which of `wanted` (keys `subscription\0trigger`) a pairs file holds, read without owning it (its owner, a
 * running listen, appends meanwhile: a torn last line is dropped). A file that is not there holds none;
 * one the store folder's rules refuse (another user's, a link) is a usage error, as for its owner.
 */
export async function pairsIn(file: string, wanted: ReadonlySet<string>): Promise<Set<string>> {
  const found = new Set<string>();
  let fd: number;
  try {
    fd = openSync(file, constants.O_RDONLY | (constants.O_NOFOLLOW ?? 0));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return found;
    throw new UsageError(`Cannot read the processed-pairs file ${file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
  }
  try {
    const st = fstatSync(fd);
    const problem = st.isFile() ? storeFileProblem(st) : 'it is not a regular file';
    if (problem) throw new UsageError(`Not reading the processed-pairs file ${file}: ${problem}.`, { hint: STORE_HINT });
    const lines = createInterface({ input: createReadStream('', { fd, start: 0, autoClose: false }), crlfDelay: Infinity });
    for await (const text of lines) {
      const pair = parseLine(text);
      if (!pair) continue;
      const key = `${pair[1]}\u0000${pair[0]}`;
      if (wanted.has(key)) found.add(key);
    }
  } finally {
    closeSync(fd);
  }
  return found;
}
