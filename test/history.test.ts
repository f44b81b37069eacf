import { request } from 'node:http';
import { describe, expect, it } from 'vitest';
import type { ReceiverEvent } from '../src/receiver/event.js';
import { History, KEEP_BODY } from '../src/receiver/history.js';
import { startInspector } from '../src/receiver/inspector.js';
import { fromRow, LISTED, listedRow, type Listed } from '../src/receiver/listed.js';
import * as DEFAULTS from '../src/delivery/defaults.js';
import { RunTracker } from '../src/delivery/runs.js';

// The history (what the inspector and replay read), in-process: its rings, its byte budget, and the slabs
// small bodies are copied into.

/** A verified delivery's report (it names the layout that matched). */
const event = (n: number, size: number): ReceiverEvent => ({ time: new Date(1_790_000_000_000 + n).toISOString(), outcome: 'accepted', status: 200, size, trigger_id: `trg_${n}`, layout: 'standard' });
/** A refused request's report. */
const refused = (n: number, size: number): ReceiverEvent => ({
  time: new Date(1_790_000_000_000 + n).toISOString(),
  outcome: 'unverified',
  status: 401,
  size,
  claimed_trigger_id: `trg_${n}`,
  message: 'no signature matched',
});

/** A body whose every byte says which delivery it is, so that one overwritten by another's shows. */
function bodyOf(n: number, size: number): Buffer {
  const b = Buffer.alloc(size);
  for (let i = 0; i < size; i++) b[i] = (n * 31 + i) & 0xff;
  return b;
}

/** Sizes as a busy listen sees them: mostly ~1 KB, some empty, some over the slab limit (16 KiB), one over KEEP_BODY. */
const sizeOf = (n: number) => (n === 777 ? KEEP_BODY + 10 : n % 97 === 0 ? 40_000 : n % 13 === 0 ? 0 : n % 7 === 0 ? 16 * 1024 : 600 + ((n * 37) % 1500));
const raw = (n: number, size: number) => ({ headers: { 'trigger-id': `trg_${n}` }, body: bodyOf(n, size), received: 0, ms: 1 });

describe('History', () => {
  it('keeps the last N requests with their bodies byte for byte, while slabs are reused under them', async () => {
    const history = new History({ rows: 300 });
    const N = 4000;
    for (let n = 1; n <= N; n++) {
      const size = sizeOf(n);
      history.add(event(n, size), raw(n, size));
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

  it('shows a body as text, headers flattened; bodyOf gives a copy that the history does not share; the report given is left as it was', async () => {
    const history = new History({ rows: 10 });
    const given = event(1, 17);
    const copy = { ...given };
    history.add(given, { headers: { 'content-type': 'application/json', 'x-many': ['a', 'b'] }, body: Buffer.from('{"type":"ping"}\n\u00e9'), received: 0, ms: 2 });
    expect(given).toEqual(copy); // the NDJSON line made from it, before or after, is the same
    history.add(event(2, 3), { headers: {}, body: Buffer.from([0xff, 0x00, 0xfe]), received: 0, ms: 2 });
    const one = (await history.get(1))!;
    expect(one.body).toBe('{"type":"ping"}\n\u00e9');
    expect(one.headers).toEqual({ 'content-type': 'application/json', 'x-many': 'a, b' });
    expect(one.ms).toBe(2);
    const binary = (await history.get(2))!;
    expect(binary.body).toBeUndefined();
    expect(binary.body_base64).toBe(Buffer.from([0xff, 0x00, 0xfe]).toString('base64'));
    const bytes = (await history.bodyOf(1))!.body;
    bytes.fill(0);
    expect((await history.get(1))!.body).toBe('{"type":"ping"}\n\u00e9');
  });

  it('refused requests are kept apart, the last 100, each body cut to 4 KiB: 5,000 of 1 MiB evict no verified record and hold at most 400 KiB', async () => {
    const history = new History({ rows: 50 });
    for (let n = 1; n <= 50; n++) history.add(event(n, 1000), raw(n, 1000));
    const junk = Buffer.alloc(1024 * 1024, 0x61);
    for (let n = 51; n <= 5050; n++) history.add(refused(n, junk.length), { headers: {}, body: junk, received: 0, ms: 1 });
    const kept = await history.since(0);
    expect(kept.filter((r) => r.layout).map((r) => r.id)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1));
    const junkKept = kept.filter((r) => !r.layout);
    expect(junkKept).toHaveLength(100);
    expect(junkKept[0]!.id).toBe(4951);
    const last = (await history.get(5050))!;
    expect(last.body_kept).toBe(4096);
    expect(last.size).toBe(1024 * 1024); // marked as cut: the page says "the first 4096 of 1048576 bytes"
    expect(history.heldBytes).toBe(50 * 1000); // the refused bodies are not the verified budget's
    // a refused request is no attempt of the delivery whose Trigger-Id it claims
    history.add({ ...refused(9999, 10), claimed_trigger_id: 'trg_3' }, raw(9999, 10));
    expect((await history.attemptsOf(3)).map((a) => a.id)).toEqual([3]);
    expect(await history.attemptsOf(5051)).toEqual([]);
  });

  it('verified bodies within --history-size: past it, the oldest are cut to their first 4 KiB, then dropped; the newest stay whole', async () => {
    const MiB = 1024 * 1024;
    const history = new History({ rows: 2000, bytes: 8 * MiB });
    for (let n = 1; n <= 40; n++) {
      history.add(event(n, MiB), raw(n, MiB));
      expect(history.heldBytes).toBeLessThanOrEqual(8 * MiB);
    }
    // the newest whole, as many as fit beside the parts of the older
    const newest = (await history.bodyOf(40))!;
    expect(newest.whole).toBe(true);
    expect(newest.body.equals(bodyOf(40, MiB))).toBe(true);
    const oldest = (await history.get(1))!;
    expect(oldest.body_kept).toBe(4096);
    expect(Buffer.from(oldest.body_base64 ?? Buffer.from(oldest.body!).toString('base64'), 'base64').equals(bodyOf(1, MiB).subarray(0, 4096))).toBe(true);
    // every record keeps its report, whatever became of its body
    expect((await history.since(0)).map((r) => r.id)).toEqual(Array.from({ length: 40 }, (_, i) => i + 1));
    // parts past the budget go too: 4,000 small deliveries of 3 KiB in a budget of 1 MiB
    const small = new History({ rows: 5000, bytes: MiB });
    for (let n = 1; n <= 4000; n++) small.add(event(n, 3072), raw(n, 3072));
    expect(small.heldBytes).toBeLessThanOrEqual(MiB);
    expect((await small.bodyOf(4000))!.whole).toBe(true);
    expect(await small.bodyOf(1)).toBeUndefined();
    expect((await small.get(1))!.trigger_id).toBe('trg_1');
  });
});

describe('the stream rows (listed.ts)', () => {
  it('carry every listed field, in the order LISTED says, each once; an accepted delivery has no message', () => {
    expect(new Set(LISTED).size).toBe(LISTED.length);
    const r: Listed = {
      id: 7,
      time: '2026-11-22T00:00:00.000Z',
      outcome: 'unverified',
      status: 401,
      type: 't',
      trigger_id: 'trg',
      claimed_trigger_id: 'trg_c',
      subscription_id: '3',
      webhook_id: '2',
      model: 'wm-6',
      forecast_hour: 12,
      test: true,
      message: 'bad signature',
      replay_of: 4,
      replay_edited: true,
    };
    const { id, replay_of, ...rest } = r;
    const row = listedRow(rest, id, replay_of);
    expect(row).toHaveLength(LISTED.length);
    expect(fromRow(JSON.parse(JSON.stringify(row)) as unknown[])).toEqual(r);
    expect(Object.keys(r).sort()).toEqual([...LISTED].sort());
    expect(fromRow(listedRow({ ...rest, outcome: 'accepted' }, id, replay_of))).toEqual({ ...r, outcome: 'accepted', message: undefined });
    expect(fromRow(listedRow({ time: 't', outcome: 'not_found', status: 404 }, 1))).toEqual({ id: 1, time: 't', outcome: 'not_found', status: 404 });
  });
});

describe("the inspector's event stream", () => {
  it('sends each record as a row of a batch; a record still in the batch when the inspector closes reaches the page before the stream ends', async () => {
    const history = new History({ rows: 10 });
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
            history.add(refused(2, 0));
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
    const rows = message
      .split('\n')
      .filter((l) => l.startsWith('data: '))
      .map((l) => fromRow(JSON.parse(l.slice(6)) as unknown[]));
    expect(rows.map((r) => [r.id, r.outcome, r.message])).toEqual([
      [1, 'accepted', undefined],
      [2, 'unverified', 'no signature matched'],
    ]);
    expect(message).toContain('id: 2\n');
    // (the batch's timer is not left to fire on the ended streams: flush() clears it, test/util.test.ts)
  });
});

describe("the inspector's event stream, from a history that is slow to read (the shared store)", () => {
  it('#32.12: records that come while what a page missed is being read reach it all the same, after its ready message', async () => {
    /** A history whose reads wait until let go, as the database's do; says when one is under way. */
    class SlowHistory extends History {
      gate: Promise<void> | undefined;
      reading = (): void => undefined;
      override async since(after: number) {
        const read = await super.since(after);
        this.reading();
        await this.gate;
        return read;
      }
    }
    const history = new SlowHistory({ rows: 1000 });
    history.add(event(1, 0));
    let letGo: () => void = () => undefined;
    history.gate = new Promise<void>((resolve) => (letGo = resolve));
    const reading = new Promise<void>((resolve) => (history.reading = resolve));
    const inspector = await startInspector({ host: '127.0.0.1', port: 0, history, about: {} });
    try {
      let text = '';
      let wake: () => void = () => undefined;
      const req = request({ host: '127.0.0.1', port: inspector.port, path: `/api/events?token=${inspector.token}` }, (res) => {
        res.setEncoding('utf8').on('data', (d: string) => ((text += d), wake()));
      });
      req.end();
      const until = async (seen: (t: string) => boolean) => {
        while (!seen(text)) await new Promise<void>((resolve) => (wake = resolve));
      };
      // the page's first read is under way: 500 records come meanwhile (more than a batch holds, so
      // batches go while the read still waits)
      await reading;
      for (let n = 2; n <= 501; n++) history.add(event(n, 0));
      letGo();
      await until((t) => t.includes('event: ready'));
      history.add(event(502, 0)); // a record after: once it is there, everything before it has come
      await until((t) => t.includes('data: [502,'));
      const ready = JSON.parse(/event: ready\ndata: (.*)\n/.exec(text)![1]!) as { rows: unknown[][] };
      expect(ready.rows.map((r) => r[0])).toEqual([1]);
      const ids = new Set([...text.matchAll(/^data: \[(\d+),/gm)].map((m) => Number(m[1])));
      expect([...ids].sort((a, b) => a - b)).toEqual(Array.from({ length: 501 }, (_, i) => i + 2));
      expect(text.indexOf('data: [2,')).toBeGreaterThan(text.indexOf('event: ready'));
      req.destroy();
    } finally {
      await inspector.close();
    }
  });
});

describe('the runs view', () => {
  const init = (k: number) => new Date(Date.UTC(2026, 0, 1) + k * 6 * 3_600_000).toISOString().replace('.000Z', 'Z');
  const hourOf = (k: number, hour: number): ReceiverEvent => ({
    ...event(k * 1000 + hour, 10),
    type: 'forecast_hour.available',
    model: 'wm-6',
    initialization_time: init(k),
    forecast_hour: hour,
  });

  it(`keeps the newest ${DEFAULTS.historyRuns} runs by initialisation time, however they arrive: a receiver that runs for months holds no more`, async () => {
    const history = new History({ rows: 10 });
    const total = DEFAULTS.historyRuns + 50;
    // runs arriving out of order (a late run's hours after newer ones'), three hours each
    const order = Array.from({ length: total }, (_, k) => (k * 7) % total);
    for (const k of order) for (const hour of [0, 6, 12]) history.add(hourOf(k, hour));
    const { runs } = await history.runs();
    expect(runs).toHaveLength(DEFAULTS.historyRuns);
    expect(runs.map((r) => r.initialization_time)).toEqual(Array.from({ length: DEFAULTS.historyRuns }, (_, i) => init(total - DEFAULTS.historyRuns + i)));
    expect(runs.every((r) => r.hours.join() === '0,6,12')).toBe(true);
    // a kept run still gathers its hours
    history.add(hourOf(total - 1, 18));
    expect((await history.runs()).runs.at(-1)!.hours).toEqual([0, 6, 12, 18]);
  });

  it('a RunTracker with a target never forgets the target run, even the oldest', () => {
    const t = new RunTracker({ model: 'wm-6', init: init(0), expect: [0, 6], needInit: false }, 3);
    for (let k = 0; k < 10; k++) t.add(hourOf(k, 0));
    expect(t.runs().map((r) => r.initialization_time)).toEqual([init(0), init(8), init(9)]);
    t.add(hourOf(0, 6));
    expect(t.progress()).toMatchObject({ complete: true, have: [0, 6] });
  });
});
