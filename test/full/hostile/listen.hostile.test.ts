import { readFileSync } from 'node:fs';
import type { Socket } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { tempDir } from '../../helpers/cli.js';
import { body, SECRET, signed, stall } from '../../helpers/hostile-listen.js';
import { post } from '../../helpers/http.js';
import { alive, memoryOf } from '../../helpers/memory.js';
import { startCli, type Running, type StartOptions } from '../../helpers/process.js';

// What an attacker on the network, or a misbehaving service, can send to `listen`, where the process is the
// point: its memory read from /proc within a stated bound, under ulimit, with a stdout nobody reads (the
// built binary). The other cases, in this process: test/hostile/listen.hostile.test.ts.

interface Listening {
  proc: Running;
  url: string;
  port: number;
  pid: number;
}

async function listen(args: string[] = [], options: StartOptions & { env?: Record<string, string> } = {}): Promise<Listening> {
  const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', ...args], { S: SECRET, ...options.env }, undefined, options);
  const ready = await proc.waitFor<{ event?: string; url: string; port: number }>((v) => v.event === 'listening');
  return { proc, url: ready.url, port: ready.port, pid: proc.child.pid! };
}

/** A good delivery is still answered 200: the receiver keeps serving. */
async function stillServes(l: Listening): Promise<void> {
  expect(alive(l.pid)).toBe(true);
  const b = body();
  expect((await post(l.url, signed(b), b)).status).toBe(200);
}

describe('hostile input: listen', () => {
  it('200 connections declaring 25 MiB bodies and sending none, under a 4 GB memory limit: nothing is set aside for them, listen stays up', async () => {
    const l = await listen([], { limits: 'ulimit -v 4000000' });
    try {
      const before = memoryOf(l.pid).rss;
      const sockets = await Promise.all(
        Array.from({ length: 200 }, () => stall(l.port, `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${25 * 1024 * 1024}\r\n\r\n`)),
      );
      // a delivery answered after all their headers arrived: listen has read them
      await stillServes(l);
      expect(memoryOf(l.pid).rss - before).toBeLessThan(50); // MiB: a few KB per connection, not 25 MiB
      sockets.forEach((s) => s.destroy());
    } finally {
      await l.proc.stop();
    }
  });

  it('stalled bodies hold at most --max-inflight: 30 connections sending 4 of 5 MiB against 16 MiB, the rest refused 503 at once and counted', async () => {
    const l = await listen(['--max-inflight', '16MiB']);
    try {
      const before = memoryOf(l.pid).rss;
      const head = `POST / HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${5 * 1024 * 1024}\r\n\r\n`;
      const sockets: Socket[] = [];
      for (let i = 0; i < 30; i++) sockets.push(await stall(l.port, head, 4 * 1024 * 1024));
      const refused = await l.proc.waitFor<{ outcome?: string; message?: string }>(
        (v) => v.outcome === 'overloaded' && /\d+ refused so far/.test(v.message ?? '') && Number(/(\d+) refused so far/.exec(v.message!)![1]) >= 20,
        20_000,
      );
      expect(refused.message).toContain('--max-inflight');
      expect(memoryOf(l.pid).rss - before).toBeLessThan(16 + 80); // the flag's 16 MiB, and a fixed amount
      // while the budget is held, a delivery that does not fit is refused too (503: the service retries it later)
      const big = body({ pad: 'p'.repeat(8 * 1024 * 1024) });
      expect((await post(l.url, signed(big), big).catch(() => ({ status: 503 }))).status).toBe(503);
      // once the stalled connections are gone (each reported), the budget is given back: the large one fits now
      // (each of the 30 ends in one line: refused, or, once destroyed, aborted; and the large one was refused)
      sockets.forEach((s) => s.destroy());
      const ended = () => l.proc.lines.filter((line) => /"outcome":"(overloaded|aborted)"/.test(line)).length;
      await l.proc.waitFor(() => ended() >= 31);
      const again = body({ pad: 'p'.repeat(8 * 1024 * 1024) });
      expect((await post(l.url, signed(again), again)).status).toBe(200);
    } finally {
      await l.proc.stop();
    }
  });

  it('the pairs file cannot be written (EFBIG under ulimit -f): 503 and a line, the file left whole, and listen still up', async () => {
    const dir = tempDir();
    const l = await listen([], { limits: 'ulimit -f 2', env: { WXHOOKS_CONFIG_DIR: dir } });
    const statuses: number[] = [];
    for (let i = 0; i < 60 && l.proc.child.exitCode === null; i++) {
      const b = body();
      statuses.push(
        await post(l.url, signed(b), b).then(
          (r) => r.status,
          () => 0,
        ),
      );
    }
    expect(statuses.slice(0, 10).every((s) => s === 200)).toBe(true);
    expect(statuses).toContain(503);
    const failed = await l.proc.waitFor<{ outcome?: string; message?: string }>((v) => v.outcome === 'store_failed');
    expect(failed.message).toContain('EFBIG');
    expect(failed.message).toContain('not yet stored');
    // the file holds whole lines only: what could not be written was taken back
    const text = readFileSync(join(dir, 'processed-pairs.ndjson'), 'utf8');
    expect(text.endsWith('\n')).toBe(true);
    for (const line of text.trim().split('\n')) expect(() => JSON.parse(line) as unknown).not.toThrow();
    // within the time allowed to recover, it serves on (that time, and exit 10 after it, are in
    // test/full/processed-once.test.ts, on a clock of the test's own)
    expect(alive(l.pid)).toBe(true);
    await l.proc.stop();
  }, 30_000);

  it('output nobody reads is bounded: lines past 8 MiB are dropped and counted, answers never wait, the count is reported once stdout drains', async () => {
    const l = await listen();
    try {
      l.proc.child.stdout.pause(); // a reader that does not read (`listen | sleep 300`)
      const before = memoryOf(l.pid).rss;
      const big = 'x'.repeat(2000); // a long type makes long lines: 8 MiB is passed sooner
      for (let i = 0; i < 8000; i += 50) {
        await Promise.all(
          Array.from({ length: 50 }, async () => {
            const b = body({ type: big });
            expect((await post(l.url, signed(b), b)).status).toBe(200);
          }),
        );
      }
      const grown = memoryOf(l.pid).rss - before;
      expect(grown).toBeLessThan(8 + 60); // MiB
      l.proc.child.stdout.resume();
      const dropped = await l.proc.waitFor<{ event?: string; lines?: number }>((v) => v.event === 'output_dropped', 20_000);
      expect(dropped.lines).toBeGreaterThan(0);
    } finally {
      await l.proc.stop();
    }
  }, 60_000);
});
