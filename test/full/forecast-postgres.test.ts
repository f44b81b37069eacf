import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';
import { claimWithForecast, completeWithForecast, forecastKey, forecastOf, releaseWithForecast, type ForecastNamed } from '../../src/delivery/forecast.js';
import type { PairStore } from '../../src/delivery/store.js';
import type { RunningEmulator } from '../../src/emulator/server.js';
import { publishingEmulator, type PublishingEmulator } from '../helpers/published.js';
import { buildPayload } from '../../src/signing/payload.js';
import { signDelivery } from '../../src/signing/sign.js';
import { PgStore } from '../../src/store/postgres.js';
import { latestCycle } from '../../src/vocabulary.js';
import { tempDir } from '../helpers/cli.js';
import { runInProcess } from '../helpers/context.js';
import { post } from '../helpers/http.js';
import { startCli, type Running } from '../helpers/process.js';
import { startServer } from '../helpers/server.js';

// The forecast's identity in the PostgreSQL store (#45.4), and reconcile --catch-up with two receivers
// sharing it: the catch-up goes through the listen that runs, once; the service's late retry to the other
// receiver is then a duplicate. A database of its own on the run's server, dropped after.

let db: SharedPostgres;
let schemas = 0;
beforeAll(async () => {
  db = await sharedPostgres();
}, 60_000);
afterAll(async () => {
  await db?.remove();
});

const F = forecastKey(forecastOf({ type: 'forecast_hour.available', data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 6 } })!);
const service = (trigger: string): ForecastNamed => ({ trigger, subscription: '3', forecast: F });
const caughtUp: ForecastNamed = { trigger: 'catchup_x', subscription: '3', forecast: F, catchUp: true };

async function deliver(store: PairStore, pair: ForecastNamed): Promise<string> {
  const { claim, holding } = await claimWithForecast(store, pair);
  if (claim !== 'won') return claim;
  await completeWithForecast(store, pair, holding);
  return 'handled';
}

describe('the forecast beside the pair, in PostgreSQL', () => {
  it('whichever comes first is handed over, across two stores on one schema; the pair rule stays; a look claims nothing', async () => {
    const schema = `fc${++schemas}_${process.pid}`;
    const a = await PgStore.open({ url: db.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const b = await PgStore.open({ url: db.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      expect(await b.peek('caught:x', '3')).toBe('free');
      expect(await deliver(a, caughtUp)).toBe('handled');
      expect(await deliver(b, service('trg_1'))).toBe('done'); // the other instance: a duplicate
      expect(await deliver(a, caughtUp)).toBe('done');
      // another forecast: the service first, the catch-up after is a duplicate; two triggers of the service, at once, both handled
      const G = forecastKey(forecastOf({ type: 'forecast_hour.available', data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 12 } })!);
      const [x, y] = await Promise.all([deliver(a, { trigger: 'trg_2', subscription: '3', forecast: G }), deliver(b, { trigger: 'trg_3', subscription: '3', forecast: G })]);
      expect([x, y]).toEqual(['handled', 'handled']);
      expect(await deliver(b, { ...caughtUp, trigger: 'catchup_y', forecast: G })).toBe('done');
      // one being handled holds the other off (409), and lets go when it fails
      const H = 'h';
      const held = await claimWithForecast(a, { trigger: 'catchup_z', subscription: '3', forecast: H, catchUp: true });
      expect((await claimWithForecast(b, { trigger: 'trg_4', subscription: '3', forecast: H })).claim).toBe('held');
      await releaseWithForecast(a, { trigger: 'catchup_z', subscription: '3' }, held.holding);
      expect(await deliver(b, { trigger: 'trg_4', subscription: '3', forecast: H })).toBe('handled');
      expect(
        await b.doneAmong([
          { trigger: `service:${H}`, subscription: '3' },
          { trigger: `caught:${H}`, subscription: '3' },
        ]),
      ).toEqual(new Set([`3\u0000service:${H}`]));
    } finally {
      await a.close();
      await b.close();
    }
  });
});

describe('reconcile --catch-up with two receivers on one PostgreSQL store', () => {
  let emu: RunningEmulator;
  let published: PublishingEmulator;
  const procs: Running[] = [];
  beforeAll(async () => {
    published = await publishingEmulator([10]);
    emu = published.emu;
  });
  afterAll(async () => {
    for (const p of procs) await p.stop();
    await emu.close();
  });

  it('the catch-up goes through the listen that runs, once; the service’s late retry to the other receiver is a duplicate', async () => {
    const INIT = latestCycle();
    const dir = tempDir('wxhooks-cfg-');
    const store = `${db.url}`;
    const schema = `fc${++schemas}_${process.pid}`;
    const env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: dir, WXHOOKS_STORE_URL: store };
    const [portA, portB] = [await freePort(), await freePort()];
    const created = await runInProcess(['webhook', 'create', '--url', `http://127.0.0.1:${portA}/`, '--subscribe', 'forecast_hour.available:model=wm-pg', '--json'], { env });
    const hook = JSON.parse(created.stdout) as { id: string; secret: string; subscriptions: { id: string }[] };
    const app = await startServer((_req, res) => void res.writeHead(200).end('{"ok":true}'));
    const listen = (port: number) => {
      const p = startCli(['listen', '--port', String(port), '--webhook', hook.id, '--store-schema', schema, '--forward-to', `${app.url}/hooks`, '--json'], env);
      procs.push(p);
      return p;
    };
    const publish = async (hour: number) => (await published.publish({ type: 'forecast_hour.available', model: 'wm-pg', initialization_time: INIT, forecast_hour: hour })).trigger;
    try {
      // A is down (the webhook's URL), B runs: +6h is missed
      const b = listen(portB);
      await b.waitFor<{ event?: string }>((v) => v.event === 'listening');
      const missed = await publish(6);
      const r = await runInProcess(['reconcile', '--webhook', hook.id, '--store-schema', schema, '--catch-up', '--json'], { env });
      expect(r.code, r.stderr).toBe(0);
      const doc = JSON.parse(r.stdout) as { via: string; caught_up: { forecast_hour: number; outcome: string }[] };
      expect(doc.via).toContain(`127.0.0.1:${portB}`);
      expect(doc.caught_up).toMatchObject([{ forecast_hour: 6, outcome: 'accepted' }]);
      // A comes back, and the service's late retry of +6h lands there: a duplicate, through the shared store
      const a = listen(portA);
      await a.waitFor<{ event?: string }>((v) => v.event === 'listening');
      const body = buildPayload({
        type: 'forecast_hour.available',
        webhookId: hook.id,
        subscriptionId: hook.subscriptions[0]!.id,
        triggerId: missed,
        data: { model: 'wm-pg', initialization_time: INIT, forecast_hour: 6 },
      });
      const late = await post(`http://127.0.0.1:${portA}/`, signDelivery({ secret: hook.secret, body, triggerId: missed }), body);
      expect(JSON.parse(late.body)).toEqual({ ok: true, duplicate: true });
      expect(app.requests.map((q) => (q.json as { catch_up?: boolean; data: { forecast_hour: number } }).data.forecast_hour)).toEqual([6]);
      // and nothing is missing for reconcile any more
      expect((await runInProcess(['reconcile', '--webhook', hook.id, '--store-schema', schema], { env })).code).toBe(0);
    } finally {
      await app.close();
    }
  }, 60_000);
});
