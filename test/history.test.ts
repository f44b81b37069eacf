import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { ReceiverEvent } from '../src/receiver/event.js';
import { History, KEEP_BODY } from '../src/receiver/history.js';
import { startInspector } from '../src/receiver/inspector.js';
import { fromRow, LISTED, listedRow, type Listed } from '../src/receiver/listed.js';

// The history (what the inspector and replay read), in-process: its ring, and the slabs small bodies are copied into.

const event = (n: number, size: number): ReceiverEvent => ({ time: new Date(1_790_000_000_000 + n).toISOString(), outcome: 'accepted', status: 200, size, trigger_id: `trg_${n}` });

/** A body whose every byte says which delivery it is, so that one overwritten by another's shows. */
function bodyOf(n: number, size: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (n * 31 + i) & 0xff;
  return b;
}

/** Sizes as a busy listen sees them: mostly ~1 KB, some empty, some over the slab limit (16 KiB), one over KEEP_BODY. */
const sizeOf = (n: number) => (n === 777 ? KEEP_BODY + 10 : n % 97 === 0 ? 40_000 : n % 13 === 0 ? 0 : n % 7 === 0 ? 16 * 1024 : 600 + ((n * 37) % 1500));

describe('History', () => {
  it('keeps the last N requests with their bodies byte for byte, while slabs are reused under them', async () => {
    const history = new History(300);
    const N = 4000;
    for (let n = 1; n <= N; n++) {
      const size = sizeOf(n);
      history.add(event(n, size), { headers: { 'trigger-id': `trg_${n}` }, body: bodyOf(n, size), received: 0, ms: 1 });
      if (n % 50 === 0) {
        // every record still kept has its own bytes; the one before the ring does not exist any more
        for (let id = Math.max(1, n - 299); id <= n; id++) {
          const kept = (await history.bodyOf(id))!;
          const size = sizeOf(id);
          const whole = Math.min(size, KEEP_BODY);
          expect(kept.body.equals(bodyOf(id, size).subarray(0, whole)), `body of ${id} after ${n}`).toBe(true);
          expect(kept.whole).toBe(size <= KEEP_BODY);
        }
        if (n > 300) expect(await history.get(n - 300)).toBeUndefined();
      }
    }
    const records = await history.since(0);
    expect(records.map((r) => r.id)).toEqual(Array.from({ length: 300 }, (_, i) => N - 299 + i));
  });

  it('shows a body as text, headers flattened; bodyOf gives a copy that the history does not share', async () => {
    const history = new History(10);
    history.add(event(1, 17), { headers: { 'content-type': 'application/json', 'x-many': ['a', 'b'] }, body: Buffer.from('{"type":"ping"}\n\u00e9'), received: 0, ms: 2 });
    history.add(event(2, 3), { headers: {}, body: Buffer.from([0xff, 0x00, 0xfe]), received: 0, ms: 2 });
    const one = (await history.get(1))!;
    expect(one.body).toBe('{"type":"ping"}\n\u00e9');
    expect(one.headers).toEqual({ 'content-type': 'application/json', 'x-many': 'a, b' });
    expect(one.ms).toBe(2);
    const binary = (await history.get(2))!;
    expect(binary.body).toBeUndefined();
    expect(binary.body_base64).toBe(Buffer.from([0xff, 0x00, 0xfe]).toString('base64'));
    const copy = (await history.bodyOf(1))!.body;
    copy.fill(0);
    expect((await history.get(1))!.body).toBe('{"type":"ping"}\n\u00e9');
  });
});

describe('the stream rows (listed.ts)', () => {
  it('carry every listed field, in the order LISTED says, each once; an accepted delivery has no message', () => {
    expect(new Set(LISTED).size).toBe(LISTED.length);
    const r: Listed = { id: 7, time: '2026-11-22T00:00:00.000Z', outcome: 'unverified', status: 401, type: 't', trigger_id: 'trg', subscription_id: '3', webhook_id: '2', model: 'wm-6', message: 'bad signature', replay_of: 4 };
    const row = listedRow(r);
    expect(row).toHaveLength(LISTED.length);
    expect(fromRow(JSON.parse(JSON.stringify(row)) as unknown[])).toEqual(r);
    expect(Object.keys(r).sort()).toEqual([...LISTED].sort());
    expect(fromRow(listedRow({ ...r, outcome: 'accepted' }))).toEqual({ ...r, outcome: 'accepted', message: undefined });
    expect(fromRow(listedRow({ id: 1, time: 't', outcome: 'not_found', status: 404 }))).toEqual({ id: 1, time: 't', outcome: 'not_found', status: 404 });
  });
});

describe("the inspector's event stream", () => {
  it('sends each record as a row of a batch; a record still in the batch when the inspector closes reaches the page before the stream ends', async () => {
    const history = new History(10);
    const inspector = await startInspector({ host: '127.0.0.1', port: 0, history, about: {} });
    let text = '';
    let sent = false;
    const ended = new Promise<void>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port: inspector.port, path: `/api/events?token=${inspector.token}` }, (res) => {
        expect(res.statusCode).toBe(200);
        res.setEncoding('utf8').on('data', (d: string) => {
          text += d;
          // the stream is open (its ready event came): the records go now
          if (text.includes('event: ready') && !sent) {
            sent = true;
            history.add(event(1, 0));
            history.add({ ...event(2, 0), outcome: 'unverified', status: 401, message: 'no signature matched' });
            void inspector.close();
          }
        });
        res.on('end', resolve).on('error', reject);
      });
      req.on('error', reject).end();
    });
    await ended;
    const message = text.split('\n\n').find((m) => m.includes('event: deliveries'));
    if (!message) throw new Error(`no deliveries message before the stream ended: ${JSON.stringify(text)}`);
    const rows = message.split('\n').filter((l) => l.startsWith('data: ')).map((l) => fromRow(JSON.parse(l.slice(6)) as unknown[]));
    expect(rows.map((r) => [r.id, r.outcome, r.message])).toEqual([
      [1, 'accepted', undefined],
      [2, 'unverified', 'no signature matched'],
    ]);
    expect(message).toContain('id: 2\n');
    // the batch's timer, had it been left, would fire now, on ended streams
    await new Promise((r) => setTimeout(r, 150));
  });
});
