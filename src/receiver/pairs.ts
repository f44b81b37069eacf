import { closeSync, existsSync, openSync, readFileSync, renameSync, writeSync, fsyncSync } from 'node:fs';
import { join } from 'node:path';
import { UsageError } from '../errors.js';
import { ensurePrivateDir, STORE_HINT } from '../store/paths.js';
import { fsReason } from '../util/files.js';
import { LineBuffer } from '../util/line-buffer.js';

/**
 * The (trigger id, subscription id) pairs already handled, so a restarted
 * `listen` still skips what it acknowledged before. An append-only file of
 * JSON lines; entries older than the TTL are dropped when it is opened.
 */
export class ProcessedPairs {
  /** Subscription id → trigger id → when it was processed (two maps: no joined key to build per lookup). */
  private readonly seen = new Map<string, Map<string, number>>();
  private fd: number | undefined;
  private readonly lines: LineBuffer;
  readonly file: string;

  constructor(
    dir: string,
    private readonly ttlMs: number,
    now = Date.now(),
  ) {
    ensurePrivateDir(dir);
    this.file = join(dir, 'processed-pairs.ndjson');
    try {
      this.fd = this.open(now);
    } catch (err) {
      throw new UsageError(`Cannot use the processed-pairs file ${this.file}: ${fsReason(err)}.`, { hint: STORE_HINT, cause: err });
    }
    // Appended at most every FLUSH_MS rather than once per delivery, so a burst costs one write;
    // close() flushes, so only a crash (not Ctrl-C) can lose the last few milliseconds of pairs.
    this.lines = new LineBuffer((chunk) => {
      if (this.fd !== undefined) writeSync(this.fd, chunk);
    }, ProcessedPairs.FLUSH_MS);
  }

  static readonly FLUSH_MS = 20;

  /** Reads the file (dropping what is past the TTL or torn), and opens it for appending. */
  private open(now: number): number {
    let pruned = false;
    if (existsSync(this.file)) {
      for (const text of readFileSync(this.file, 'utf8').split('\n')) {
        if (!text) continue;
        try {
          const { t, s, at } = JSON.parse(text) as { t: unknown; s: unknown; at: unknown };
          if (typeof t === 'string' && typeof s === 'string' && typeof at === 'number' && now - at <= this.ttlMs) this.remember(t, s, at);
          else pruned = true;
        } catch {
          pruned = true; // a torn last line from a crash: dropped on rewrite
        }
      }
    }
    if (pruned) this.rewrite();
    return openSync(this.file, 'a', 0o600);
  }

  private rewrite(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const [subscription, triggers] of this.seen) {
      for (const [trigger, at] of triggers) writeSync(fd, `${line(trigger, subscription, at)}\n`);
    }
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, this.file);
  }

  private remember(triggerId: string, subscriptionId: string, at: number): void {
    let triggers = this.seen.get(subscriptionId);
    if (!triggers) this.seen.set(subscriptionId, (triggers = new Map()));
    triggers.set(triggerId, at);
  }

  /** Whether the pair was processed within the TTL. */
  has(triggerId: string, subscriptionId: string, now = Date.now()): boolean {
    const at = this.seen.get(subscriptionId)?.get(triggerId);
    return at !== undefined && now - at <= this.ttlMs;
  }

  /** Marks the pair processed. */
  add(triggerId: string, subscriptionId: string, now = Date.now()): void {
    this.remember(triggerId, subscriptionId, now);
    if (this.fd !== undefined) this.lines.push(line(triggerId, subscriptionId, now));
  }

  /** Writes what was added since the last flush. */
  flush(): void {
    this.lines.flush();
  }

  get size(): number {
    let n = 0;
    for (const triggers of this.seen.values()) n += triggers.size;
    return n;
  }

  /** Flushes to disk and closes the file. */
  close(): void {
    if (this.fd === undefined) return;
    this.flush();
    fsyncSync(this.fd);
    closeSync(this.fd);
    this.fd = undefined;
  }
}

/** A pair's line in the file. */
function line(triggerId: string, subscriptionId: string, at: number): string {
  return `{"t":${quoted(triggerId)},"s":${quoted(subscriptionId)},"at":${atText(at)}}`;
}

/** `JSON.stringify(text)`, without its work for the usual id, printable ASCII with no `"` or `\`. */
export function quoted(text: string): string {
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x20 || c > 0x7e || c === 0x22 || c === 0x5c) return JSON.stringify(text);
  }
  return `"${text}"`;
}

let lastAt = -1;
let lastAtText = '';
/** A time in milliseconds as text, made once per millisecond (a number this size is formatted as a double). */
function atText(at: number): string {
  if (at !== lastAt) {
    lastAt = at;
    lastAtText = String(at);
  }
  return lastAtText;
}
