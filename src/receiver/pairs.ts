import { closeSync, existsSync, openSync, readFileSync, renameSync, writeSync, fsyncSync } from 'node:fs';
import { join } from 'node:path';
import { ensurePrivateDir } from '../store/paths.js';
import { LineBuffer } from '../util/line-buffer.js';

/**
 * The (trigger id, subscription id) pairs already handled, so a restarted
 * `listen` still skips what it acknowledged before. An append-only file of
 * JSON lines; entries older than the TTL are dropped when it is opened.
 */
export class ProcessedPairs {
  private readonly seen = new Map<string, number>();
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
    let pruned = false;
    if (existsSync(this.file)) {
      for (const text of readFileSync(this.file, 'utf8').split('\n')) {
        if (!text) continue;
        try {
          const { t, s, at } = JSON.parse(text) as { t: string; s: string; at: number };
          if (now - at <= ttlMs) this.seen.set(pairKey(t, s), at);
          else pruned = true;
        } catch {
          pruned = true; // a torn last line from a crash: dropped on rewrite
        }
      }
    }
    if (pruned) this.rewrite();
    this.fd = openSync(this.file, 'a', 0o600);
    // Appended at most every FLUSH_MS rather than once per delivery, so a burst costs one write;
    // close() flushes, so only a crash (not Ctrl-C) can lose the last few milliseconds of pairs.
    this.lines = new LineBuffer((chunk) => {
      if (this.fd !== undefined) writeSync(this.fd, chunk);
    }, ProcessedPairs.FLUSH_MS);
  }

  static readonly FLUSH_MS = 20;

  private rewrite(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const [key, at] of this.seen) writeSync(fd, line(key, at));
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, this.file);
  }

  /** Whether the pair (from `pairKey`) was processed within the TTL. */
  has(key: string, now = Date.now()): boolean {
    const at = this.seen.get(key);
    return at !== undefined && now - at <= this.ttlMs;
  }

  /** Marks the pair (from `pairKey`) processed. */
  add(key: string, now = Date.now()): void {
    this.seen.set(key, now);
    if (this.fd !== undefined) this.lines.push(line(key, now));
  }

  /** Writes what was added since the last flush. */
  flush(): void {
    this.lines.flush();
  }

  get size(): number {
    return this.seen.size;
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

/** The key of a (trigger id, subscription id) pair. */
export function pairKey(triggerId: string, subscriptionId: string): string {
  return `${triggerId}\u0000${subscriptionId}`;
}

/** A pair's line in the file: `{"t":trigger id,"s":subscription id,"at":ms}`. */
function line(key: string, at: number): string {
  const nul = key.indexOf('\u0000');
  return `{"t":${JSON.stringify(key.slice(0, nul))},"s":${JSON.stringify(key.slice(nul + 1))},"at":${at}}\n`;
}

