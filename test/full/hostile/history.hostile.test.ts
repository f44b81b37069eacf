import { randomBytes } from 'node:crypto';
import { Agent, request } from 'node:http';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/harness.js';
import type { ReceiverEvent } from '../../../src/receiver/event.js';
import { PgHistory } from '../../../src/receiver/history.js';
import { signDelivery } from '../../../src/signing/index.js';
import { HISTORY_DEFAULTS } from '../../../src/store/history-limits.js';
import type { StoreNotice } from '../../../src/store/pair-store.js';
import { PgStore } from '../../../src/store/postgres.js';
import { startCli } from '../../helpers/process.js';
import { signed, TEST_SECRET } from '../../helpers/receiver.js';
import { sendJson, startServer } from '../../helpers/server.js';
import { sharedPostgresFor, type SharedPostgres } from '../../helpers/services.js';

// What an anonymous sender (and a delivery with odd ids) can do to the history kept in PostgreSQL (#32.11):
// one row the database cannot take must never take the others of its batch with it.

let db: SharedPostgres;
let admin: pg.Client;
let schemas = 0;
const schema = () => `h${++schemas}_${process.pid}`;

sharedPostgresFor((made) => ({ db, admin } = made));

/** `n` characters that do not compress (PostgreSQL compresses a long index entry before it measures it). */
const noise = (n: number) => randomBytes(n).toString('base64url').slice(0, n);

/** POSTs, resolving with the status (0: the connection failed). */
function send(port: number, agent: Agent, headers: Record<string, string>, body: Buffer | string): Promise<number> {
  return new Promise((resolve) => {
    const req = request({ host: '127.0.0.1', port, method: 'POST', path: '/', agent, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    req.on('error', () => resolve(0));
    req.end(body);
  });
}

/** A verified report, as the receiver makes one. */
const report = (trigger: string, extra: Partial<ReceiverEvent> = {}): ReceiverEvent => ({
  time: new Date().toISOString(),
  outcome: 'accepted',
  status: 200,
  type: 'forecast_hour.available',
  trigger_id: trigger,
  subscription_id: '1',
  model: 'wm-6',
  layout: 'standard',
  ...extra,
});

describe('#32.11 the history in PostgreSQL: one bad row never fails another', () => {
  it('50 verified deliveries sent alongside 50 unsigned requests with an 8 KB Trigger-Id: every one of the 50 is in the history, and the claims are kept cut', async () => {
    const s = schema();
    const port = await freePort();
    const proc = startCli(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--store', db.url, '--store-schema', s, '--history', '100'], { S: TEST_SECRET });
    await proc.waitFor<{ event?: string }>((v) => v.event === 'listening', 30_000);
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    try {
      const statuses = await Promise.all(
        Array.from({ length: 50 }, (_, i) => {
          const d = signed(`trg_kept_${i}`);
          return Promise.all([send(port, agent, d.headers, d.body), send(port, agent, { 'trigger-id': `trg_${noise(8000)}_${i}` }, '{}')]);
        }),
      );
      expect(statuses.map(([ok, refused]) => [ok, refused])).toEqual(Array(50).fill([200, 400]));
    } finally {
      agent.destroy();
      await proc.stop();
    }
    expect(await proc.exited).toBe(130);
    const { rows } = await admin.query<{ verified: boolean; n: number; longest: number }>(
      `SELECT verified, count(*)::int AS n, max(length(trigger_id))::int AS longest FROM "${s}".deliveries GROUP BY 1 ORDER BY 1`,
    );
    expect(rows).toEqual([
      { verified: false, n: 50, longest: 65 },
      { verified: true, n: 50, longest: 'trg_kept_49'.length },
    ]);
  }, 60_000);

  it('rows that PostgreSQL would refuse (a 10 KB Trigger-Id, NUL, a lone surrogate) are kept, their ids whole in the record and found by them; a row it refuses all the same is the only one lost, and said', async () => {
    const s = schema();
    const notices: StoreNotice[] = [];
    const store = await PgStore.open({ url: db.url, schema: s, ttlMs: 60_000, leaseMs: 60_000, history: HISTORY_DEFAULTS, onNotice: (n) => notices.push(n) });
    const history = new PgHistory(store, HISTORY_DEFAULTS);
    const long = `trg_long_${noise(10_000)}`;
    const body = (t: string) => ({ headers: { 'trigger-id': 'x' }, body: Buffer.from(JSON.stringify({ trigger_id: t })), received: Date.now(), ms: 1 });
    try {
      // one turn of the event loop: one batch
      for (let i = 0; i < 20; i++) history.add(report(`trg_plain_${i}`), body(`trg_plain_${i}`));
      history.add(report(long), body(long));
      history.add(report('trg_nul\u0000end', { model: 'wm\u00006' }), body('trg_nul'));
      history.add(report('trg_surrogate', { type: 'forecast_hour.available\ud800' }), body('trg_surrogate'));
      history.add({ time: new Date().toISOString(), outcome: 'unverified', status: 401, claimed_trigger_id: `trg_${noise(8000)}`, message: 'no' }, body('x'));
      history.add(report('trg_large_body'), body(noise(200_000))); // a statement of its own, in its place
      // written in the background: wait for it (for at most a while: a batch that fails is written never)
      for (const deadline = Date.now() + 15_000; (await store.historyNewest()) < 25 && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
      const all = await store.historySince(0, 100);
      expect(all).toHaveLength(25);
      expect(all.map((r) => (r.record as { trigger_id?: string }).trigger_id).slice(20, 25)).toEqual([long, 'trg_nul\ufffdend', 'trg_surrogate', undefined, 'trg_large_body']);
      expect((await store.historyOne(all[24]!.id))!.body!.length).toBe(body(noise(200_000)).body.length);
      const byTrigger = new Map(all.map((r) => [(r.record as { trigger_id?: string }).trigger_id, r]));
      expect(byTrigger.get(long)).toBeDefined(); // the whole id, in the record
      expect(byTrigger.get('trg_nul\ufffdend')?.record).toMatchObject({ model: 'wm\ufffd6' });
      expect(byTrigger.get('trg_surrogate')?.record).toMatchObject({ type: 'forecast_hour.available\ufffd' });
      // found by the whole id, and by a start of it longer than the indexed column holds
      expect((await store.historyOfTrigger(long)).map((r) => (r.record as { trigger_id: string }).trigger_id)).toEqual([long]);
      expect(await store.historyTriggers(long.slice(0, 500), 5)).toEqual({ triggers: [long], claims: 0 });
      expect((await history.attemptsOf(byTrigger.get(long)!.id)).length).toBe(1);
      expect(await store.historySearch('trg_nul\u0000', 5)).toEqual([byTrigger.get('trg_nul\ufffdend')!.id]); // a NUL searched for is found as it is kept

      // a row the database refuses for a reason of its own (here, a rule the test adds): only it is lost
      await admin.query(`ALTER TABLE "${s}".deliveries ADD CONSTRAINT no_evil CHECK (type IS DISTINCT FROM 'evil')`);
      for (let i = 0; i < 10; i++) history.add(report(`trg_after_${i}`), body(`trg_after_${i}`));
      history.add(report('trg_evil', { type: 'evil' }), body('trg_evil'));
      for (let i = 10; i < 20; i++) history.add(report(`trg_after_${i}`), body(`trg_after_${i}`));
      for (const deadline = Date.now() + 15_000; !notices.length && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 20));
      expect(notices).toEqual([{ kind: 'history_dropped', rows: 1, reason: expect.stringContaining('no_evil') }]);
      const after = (await store.historySince(25, 100)).map((r) => (r.record as { trigger_id: string }).trigger_id);
      expect(after).toEqual(Array.from({ length: 20 }, (_, i) => `trg_after_${i}`));
    } finally {
      await store.close();
    }
  }, 60_000);
});

describe("#32.11, the pairs: a verified delivery whose Trigger-Id PostgreSQL cannot index or store (the rule is the core's: such an id is hashed before any store sees it)", () => {
  it('a 10 KB trigger_id, and one with a NUL, sent with ordinary deliveries at the same moment: every one answered 200 and forwarded once; their retries are duplicates', async () => {
    const forwarded = new Map<string, number>();
    const app = await startServer((req, res) => {
      const t = (req.json as { trigger_id: string }).trigger_id;
      forwarded.set(t, (forwarded.get(t) ?? 0) + 1);
      sendJson(res, 200, { ok: true });
    });
    const s = schema();
    const port = await freePort();
    const proc = startCli(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--store', db.url, '--store-schema', s, '--forward-to', `${app.url}/hooks`], { S: TEST_SECRET });
    await proc.waitFor<{ event?: string }>((v) => v.event === 'listening', 30_000);
    const agent = new Agent({ keepAlive: true, maxSockets: 16 });
    /** A delivery whose body's trigger_id is `trigger` (the pair's), under an ordinary Trigger-Id header. */
    const delivery = (trigger: string, header: string) => {
      const b = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: trigger, data: { model: 'wm-6', forecast_hour: 0 } }));
      return { headers: signDelivery({ secret: TEST_SECRET, body: b, triggerId: header }) as Record<string, string>, body: b };
    };
    const odd = [`trg_${noise(10_000)}`, 'trg_with\u0000nul'];
    const plain = Array.from({ length: 10 }, (_, i) => `trg_plain_${i}`);
    try {
      const all = [...odd.map((t, i) => delivery(t, `trg_odd_${i}`)), ...plain.map((t) => delivery(t, t))];
      for (let round = 0; round < 2; round++) {
        const statuses = await Promise.all(all.map((d) => send(port, agent, d.headers, d.body)));
        expect(statuses, `round ${round}`).toEqual(Array(all.length).fill(200));
      }
      expect([...odd, ...plain].map((t) => forwarded.get(t) ?? 0)).toEqual(Array(odd.length + plain.length).fill(1));
    } finally {
      agent.destroy();
      await proc.stop();
      await app.close();
    }
  }, 60_000);
});
