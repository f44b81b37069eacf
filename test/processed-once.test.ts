import { readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { connect } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import type { ReceiverEvent } from '../src/receiver/event.js';
import { FilePairStore } from '../src/store/file-pairs.js';
import type { StoreNotice } from '../src/store/pair-store.js';
import { tempDir } from './helpers/cli.js';
import { manualClock } from './helpers/clock.js';
import { countingApp, deliver, processedOnce } from './helpers/processed-once.js';
import { signed, startTestReceiver } from './helpers/receiver.js';

// Processed once, whatever the clock, the file or the connection does: each fault in turn, against a
// receiver in this process (real sockets, a real file store, an app that counts what it is forwarded),
// and the rule itself asserted each time: no delivery forwarded twice, none acknowledged that was not.
// A full disk (a small tmpfs, mounted as root) and a closed output pipe (the process is the point):
// test/full/processed-once.test.ts.

const DAY = 86_400_000;

describe('the wall clock', () => {
  it('jumps 2 days forward, then back, while running: the pairs file keeps every pair, and nothing acknowledged is forwarded again', async () => {
    const clock = manualClock(Date.UTC(2026, 10, 23, 12));
    const dir = tempDir();
    const app = await countingApp();
    const notices: StoreNotice[] = [];
    const store = await FilePairStore.open({ dir, ttlMs: DAY, clock, watchMs: 0, onNotice: (n) => notices.push(n) });
    const r = await startTestReceiver({ store, clock, forwardTo: `${app.url}/hooks` });
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const ts = () => Math.floor(clock.now() / 1000);
    try {
      const ids = Array.from({ length: 300 }, (_, i) => `trg_clock_${i}`);
      expect(await Promise.all(ids.map((t) => deliver(r.url, agent, t, ts())))).toEqual(ids.map(() => 200));
      const size = statSync(store.file).size;
      store.watch(); // settles the clocks' baseline
      clock.step(2 * DAY);
      clock.advance(66_000);
      store.watch(); // what its timer does: sees the jump, expires what expired by both clocks (nothing)
      store.expire();
      await store.settled();
      expect(notices.find((n) => n.kind === 'clock_jump')).toMatchObject({ kind: 'clock_jump', ms: 2 * DAY });
      expect(statSync(store.file).size).toBe(size);
      expect(store.size).toBe(300);
      clock.step(-2 * DAY);
      store.watch();
      // the service retries, signed by its own clock (which is right)
      expect(await Promise.all(ids.map((t) => deliver(r.url, agent, t, ts())))).toEqual(ids.map(() => 200));
      expect(r.events.filter((e) => e.outcome === 'duplicate')).toHaveLength(300);
      processedOnce(app.forwarded, ids);
      expect(app.forwarded).toHaveLength(300);
    } finally {
      agent.destroy();
      await r.close();
      await store.close();
      await app.close();
    }
  });

  it('a start with the clock 2 days ahead empties nothing; with it 2 days behind, pairs dated in the future are kept', async () => {
    const dir = tempDir();
    const now = Date.UTC(2026, 10, 23, 12);
    const first = await FilePairStore.open({ dir, ttlMs: DAY, clock: manualClock(now) });
    for (let i = 0; i < 2000; i++) {
      await first.claim(`trg_${i}`, '1');
      await first.complete(`trg_${i}`, '1');
    }
    await first.close();
    const bytes = readFileSync(join(dir, 'processed-pairs.ndjson'));
    expect(bytes.length).toBeGreaterThan(64 * 1024); // big enough to be compacted, if anything were dropped

    const ahead = await FilePairStore.open({ dir, ttlMs: DAY, clock: manualClock(now + 2 * DAY) });
    expect(ahead.isDone('trg_0', '1')).toBe(false); // by the wall clock now, they are old: no longer duplicates...
    await ahead.settled();
    await ahead.close();
    expect(readFileSync(join(dir, 'processed-pairs.ndjson')).equals(bytes)).toBe(true); // ...but the file keeps them all

    const behind = await FilePairStore.open({ dir, ttlMs: DAY, clock: manualClock(now - 2 * DAY) });
    try {
      expect(behind.size).toBe(2000);
      for (let i = 0; i < 2000; i += 97) expect(await behind.claim(`trg_${i}`, '1')).toBe('done');
    } finally {
      await behind.close();
    }
  });
});

describe('the pairs file deleted or replaced while running', () => {
  for (const how of ['deleted', 'replaced'] as const) {
    it(`${how}: noticed within a second, every live pair written to a new file there, said on one line; a restart skips them all`, async () => {
      const dir = tempDir();
      const notices: StoreNotice[] = [];
      const store = await FilePairStore.open({ dir, ttlMs: DAY, watchMs: 0, onNotice: (n) => notices.push(n) });
      const r = await startTestReceiver({ store });
      const agent = new Agent({ keepAlive: true, maxSockets: 10 });
      try {
        const before = Array.from({ length: 500 }, (_, i) => `trg_file_a${i}`);
        expect(await Promise.all(before.map((t) => deliver(r.url, agent, t)))).toEqual(before.map(() => 200));
        const file = join(dir, 'processed-pairs.ndjson');
        if (how === 'deleted') rmSync(file);
        else {
          writeFileSync(`${file}.other`, '{"t":"someone_else","s":"1","at":1}\n');
          renameSync(`${file}.other`, file);
        }
        store.watch(); // what its timer does every second
        await store.settled();
        expect(notices).toEqual([{ kind: 'file_replaced', file, how, pairs: 500 }]);
        const after = Array.from({ length: 500 }, (_, i) => `trg_file_b${i}`);
        expect(await Promise.all(after.map((t) => deliver(r.url, agent, t)))).toEqual(after.map(() => 200));
      } finally {
        agent.destroy();
        await r.close();
        await store.close();
      }
      const again = await FilePairStore.open({ dir, ttlMs: DAY });
      try {
        expect(again.size).toBe(1000);
      } finally {
        await again.close();
      }
    });
  }
});

describe('an answer that could not be sent', () => {
  it('pipelined good then malformed: the client gets only the 400; the good one is processed, and its line says its answer was not sent', async () => {
    const app = await countingApp();
    app.hold();
    const r = await startTestReceiver({ forwardTo: `${app.url}/hooks` });
    try {
      const { headers, body } = signed('trg_pipelined');
      const head = Object.entries({ ...headers, host: 'x', 'content-length': String(body.length) })
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      const answer = await new Promise<string>((resolve) => {
        const socket = connect(r.port, '127.0.0.1', () => socket.write(Buffer.concat([Buffer.from(`POST / HTTP/1.1\r\n${head}\r\n`), body, Buffer.from('NOT HTTP AT ALL\r\n\r\n')])));
        let text = '';
        socket.setEncoding('latin1').on('data', (d: string) => (text += d));
        socket.on('close', () => resolve(text));
        socket.on('error', () => undefined);
      });
      expect(answer.startsWith('HTTP/1.1 400')).toBe(true);
      expect(answer).not.toContain('200');
      await waitForForward(app, 1);
      app.release();
      const line = await r.waitFor((e) => e.trigger_id === 'trg_pipelined');
      expect(line).toMatchObject({ outcome: 'accepted', status: 200, answer_sent: false });
      expect(await r.store.claim('trg_pipelined', '1')).toBe('done'); // its retry is a duplicate
    } finally {
      await r.close();
      await app.close();
    }
  });

  it('stopped during slow forwards: each forward ends and its pair is stored; the lines say the client got nothing', async () => {
    const app = await countingApp();
    app.hold();
    const dir = tempDir();
    const r = await startTestReceiver({ dir, forwardTo: `${app.url}/hooks`, closeGraceMs: 0 });
    const agent = new Agent({ keepAlive: true, maxSockets: 10 });
    const ids = Array.from({ length: 5 }, (_, i) => `trg_stop_${i}`);
    const statuses = Promise.all(ids.map((t) => deliver(r.url, agent, t)));
    await waitForForward(app, 5);
    const closed = r.close(); // as SIGTERM does: no new request; the connections are cut
    expect(await statuses).toEqual(ids.map(() => 0)); // the clients got nothing
    app.release();
    await closed;
    agent.destroy();
    await app.close();
    expect(r.events.map((e: ReceiverEvent) => [e.trigger_id, e.outcome, e.answer_sent])).toEqual(expect.arrayContaining(ids.map((t) => [t, 'accepted', false])));
    const again = await FilePairStore.open({ dir, ttlMs: DAY });
    try {
      for (const t of ids) expect(await again.claim(t, '1')).toBe('done'); // nothing is lost: each retry is a duplicate
    } finally {
      await again.close();
    }
  });
});

/** Resolves once the app has been forwarded `n` deliveries. */
async function waitForForward(app: { forwarded: string[] }, n: number): Promise<void> {
  while (app.forwarded.length < n) await new Promise((r) => setTimeout(r, 5));
}
