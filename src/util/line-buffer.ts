/**
 * Lines of text, each followed by a newline, gathered into one buffer and handed to `sink` at most every
 * `delayMs`, so a burst of lines costs one write. The text goes into the buffer as it comes (not kept as
 * strings until the write: strings held that long outlived V8's young generation, and for the inspector's
 * stream, written this way, V8's marking went from 1.5% to 0.0-0.4% of `listen --inspect`'s CPU,
 * BENCHMARKS.md), and each write gets a buffer of its own, so a sink may keep it.
 */
export class LineBuffer {
  private buf: Buffer | undefined;
  private used = 0;
  private lines = 0;
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** Receives each write: the bytes, and how many lines they hold. */
    private readonly sink: (chunk: Buffer, lines: number) => void,
    private readonly delayMs = 20,
    private readonly chunkBytes: number = 64 * 1024,
  ) {}

  /** Adds `line` and a newline. */
  push(line: string): void {
    // at most 3 bytes of UTF-8 per UTF-16 unit, and the newline
    const most = line.length * 3 + 1;
    let buf = this.buf;
    if (buf && this.used + most > buf.length) {
      this.flush();
      buf = undefined;
    }
    if (most > this.chunkBytes) {
      this.sink(Buffer.from(`${line}\n`, 'utf8'), 1);
      return;
    }
    if (!buf) buf = this.start();
    const end = this.used + buf.write(line, this.used, 'utf8');
    buf[end] = 0x0a;
    this.used = end + 1;
    this.lines++;
  }

  private start(): Buffer {
    const buf = Buffer.allocUnsafe(this.chunkBytes);
    this.buf = buf;
    this.used = 0;
    this.lines = 0;
    this.timer = setTimeout(() => this.flush(), this.delayMs).unref();
    return buf;
  }

  /** Writes what was pushed since the last write; no timer of it is left to fire after. */
  flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const buf = this.buf;
    if (!buf) return;
    this.buf = undefined;
    if (this.used) this.sink(buf.subarray(0, this.used), this.lines);
  }
}
