import { describe, expect, it, vi } from 'vitest';
import { isoMillis } from '../src/util/clock.js';
import { LineBuffer } from '../src/util/line-buffer.js';
import { isLoopback } from '../src/util/net.js';

describe('isoMillis', () => {
  it('is toISOString for every millisecond of a second boundary, and far apart times', () => {
    const base = Date.UTC(2026, 10, 21, 23, 59, 59, 0);
    const times = [0, 1, 9, 10, 99, 100, 999, 1000, 1001, 1999, 2000].map((d) => base + d);
    times.push(Date.UTC(2000, 0, 1), Date.UTC(2026, 0, 1, 0, 0, 0, 7), base - 86_400_000 + 42, 1, 999);
    for (const t of times) expect(isoMillis(t)).toBe(new Date(t).toISOString());
  });

  it('gives the same text when asked again for the same millisecond, and the right one after it', () => {
    const t = Date.UTC(2026, 10, 22, 1, 2, 3, 456);
    for (const ms of [t, t, t + 1, t + 1, t, t + 1000, t + 1000, t]) expect(isoMillis(ms)).toBe(new Date(ms).toISOString());
  });
});

describe('LineBuffer', () => {
  const collect = (chunkBytes = 64) => {
    const writes: string[] = [];
    return { writes, lines: new LineBuffer((b) => writes.push(b.toString('utf8')), 10, chunkBytes) };
  };

  it('writes nothing until flushed, then every line and its newline, in order, as one write', () => {
    const { writes, lines } = collect(1024);
    lines.push('one');
    lines.push('twø');
    lines.push('');
    expect(writes).toEqual([]);
    lines.flush();
    lines.flush();
    expect(writes).toEqual(['one\ntwø\n\n']);
  });

  it('starts a new write when a line would not fit, and writes a line larger than a buffer on its own, in order', () => {
    const { writes, lines } = collect(64);
    lines.push('a'.repeat(15));
    lines.push('b'.repeat(20)); // 3 bytes per UTF-16 unit are reserved: 16 + 3 × 20 + 1 > 64
    lines.push('c'.repeat(100));
    lines.push('d');
    lines.flush();
    expect(writes).toEqual([`${'a'.repeat(15)}\n`, `${'b'.repeat(20)}\n`, `${'c'.repeat(100)}\n`, 'd\n']);
  });

  it('takes a line whose worst case fills the buffer exactly into it, and sends one a byte longer on its own', () => {
    const { writes, lines } = collect(64);
    lines.push('x'.repeat(21)); // 21 × 3 + 1 = 64
    lines.push('y');
    lines.push('z'.repeat(22)); // 67
    lines.flush();
    expect(writes).toEqual([`${'x'.repeat(21)}\ny\n`, `${'z'.repeat(22)}\n`]);
  });

  it('flushes on its own after the delay; a flush leaves no timer behind to fire after it (an inspector closing its streams)', () => {
    vi.useFakeTimers();
    try {
      const { writes, lines } = collect(1024);
      lines.push('x');
      vi.advanceTimersByTime(9);
      expect(writes).toEqual([]);
      vi.advanceTimersByTime(1);
      expect(writes).toEqual(['x\n']);
      lines.push('y');
      lines.flush();
      expect(vi.getTimerCount()).toBe(0);
      expect(writes).toEqual(['x\n', 'y\n']);
    } finally {
      vi.useRealTimers();
    }
  });

  it('gives every write a buffer of its own, so a sink may keep it', () => {
    const kept: Buffer[] = [];
    const lines = new LineBuffer((b) => kept.push(b), 10, 1024);
    lines.push('first');
    lines.flush();
    lines.push('second');
    lines.flush();
    expect(kept.map(String)).toEqual(['first\n', 'second\n']);
  });
});

describe('isLoopback', () => {
  it('this machine only: 127.0.0.0/8, ::1, localhost and its subdomains; not every address, nor another machine', () => {
    for (const host of ['127.0.0.1', '127.1.2.3', '::1', '[::1]', 'localhost', 'LOCALHOST', 'app.localhost']) expect(isLoopback(host), host).toBe(true);
    for (const host of ['0.0.0.0', '::', '192.168.1.2', '10.0.0.1', 'example.com', 'localhost.example.com', '128.0.0.1', '127.evil.example', '127.0.0.1.nip.io'])
      expect(isLoopback(host), host).toBe(false);
  });
});

describe('writeFileAtomicSync', () => {
  it('replaces a file whole, 0600, leaving no temporary file; exclusive refuses to replace one (EEXIST)', async () => {
    const { mkdtempSync, readFileSync, readdirSync, statSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const { writeFileAtomicSync } = await import('../src/util/files.js');
    const dir = mkdtempSync(join(process.env.WXHOOKS_TEST_TMP ?? tmpdir(), 'wxhooks-atomic-'));
    const file = join(dir, 'f.json');
    writeFileAtomicSync(file, 'one');
    writeFileAtomicSync(file, Buffer.from('two'), { sync: false });
    expect(readFileSync(file, 'utf8')).toBe('two');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(() => writeFileAtomicSync(file, 'three', { exclusive: true })).toThrow(expect.objectContaining({ code: 'EEXIST' }));
    expect(readFileSync(file, 'utf8')).toBe('two');
    writeFileAtomicSync(join(dir, 'g.json'), 'new', { exclusive: true });
    expect(readdirSync(dir).sort()).toEqual(['f.json', 'g.json']);
  });
});
