import { closeSync, existsSync, openSync, readFileSync, renameSync, writeSync, fsyncSync } from 'node:fs';
import { join } from 'node:path';
import { ensurePrivateDir } from '../store/paths.js';

/**
 * The (trigger id, subscription id) pairs already handled, so a restarted
 * `listen` still skips what it acknowledged before. An append-only file of
 * JSON lines; entries older than the TTL are dropped when it is opened.
 */
export class ProcessedPairs {
  private readonly seen = new Map<string, number>();
  private fd: number | undefined;
  private pending = '';
  private flushScheduled = false;
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
          if (now - at <= ttlMs) this.seen.set(ProcessedPairs.key(t, s), at);
          else pruned = true;
        } catch {
          pruned = true; // a torn last line from a crash: dropped on rewrite
        }
      }
    }
    if (pruned) this.rewrite();
    this.fd = openSync(this.file, 'a', 0o600);
  }

  static readonly FLUSH_MS = 20;

  static key(triggerId: string, subscriptionId: string): string {
    return `${triggerId}\u0000${subscriptionId}`;
  }

  private rewrite(): void {
    const tmp = `${this.file}.${process.pid}.tmp`;
    const fd = openSync(tmp, 'w', 0o600);
    for (const [key, at] of this.seen) {
      const [t, s] = key.split('\u0000');
      writeSync(fd, `${JSON.stringify({ t, s, at })}\n`);
    }
    fsyncSync(fd);
    closeSync(fd);
    renameSync(tmp, this.file);
  }

  has(triggerId: string, subscriptionId: string): boolean {
    const at = this.seen.get(ProcessedPairs.key(triggerId, subscriptionId));
    return at !== undefined && Date.now() - at <= this.ttlMs;
  }

  add(triggerId: string, subscriptionId: string, now = Date.now()): void {
    this.seen.set(ProcessedPairs.key(triggerId, subscriptionId), now);
    if (this.fd === undefined) return;
    // Appended at most every FLUSH_MS rather than once per delivery, so a burst costs one write;
    // close() flushes, so only a crash (not Ctrl-C) can lose the last few milliseconds of pairs.
    this.pending += `{"t":${JSON.stringify(triggerId)},"s":${JSON.stringify(subscriptionId)},"at":${now}}\n`;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setTimeout(() => this.flush(), ProcessedPairs.FLUSH_MS).unref();
    }
  }

  /** Writes what was added since the last flush. */
  flush(): void {
    this.flushScheduled = false;
    if (this.fd === undefined || !this.pending) return;
    const text = this.pending;
    this.pending = '';
    writeSync(this.fd, text);
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
