/**
 * Lines of text gathered into one buffer and handed to `sink` at most every `delayMs`, so a burst of
 * lines costs one write. The text goes into the buffer as it comes (not kept as strings until the
 * write), and each write gets a buffer of its own, so a sink may keep it.
 */
export class LineBuffer {
  private buf: Buffer | undefined;
  private used = 0;

  constructor(
    private readonly sink: (chunk: Buffer) => void,
    private readonly delayMs = 20,
    private readonly chunkBytes = 64 * 1024,
  ) {}

  push(text: string): void {
    // at most 3 bytes of UTF-8 per UTF-16 unit
    if (this.buf && this.used + text.length * 3 > this.buf.length) this.flush();
    if (text.length * 3 > this.chunkBytes) {
      this.sink(Buffer.from(text, 'utf8'));
      return;
    }
    const buf = this.buf ?? this.start();
    this.used += buf.write(text, this.used, 'utf8');
  }

  private start(): Buffer {
    const buf = Buffer.allocUnsafe(this.chunkBytes);
    this.buf = buf;
    this.used = 0;
    setTimeout(() => this.flush(), this.delayMs).unref();
    return buf;
  }

  /** Writes what was pushed since the last write. */
  flush(): void {
    const buf = this.buf;
    if (!buf) return;
    this.buf = undefined;
    if (this.used) this.sink(buf.subarray(0, this.used));
  }
}
