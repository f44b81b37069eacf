import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import type { RunningEmulator } from '../src/emulator/server.js';
import { publishingEmulator, type PublishingEmulator } from './helpers/published.js';
import { Webhooks, createNodeMiddleware, openStore, type PairStore, type WebhookEvent } from '../src/index.js';
import { buildPayload } from '../src/signing/payload.js';
import { signDelivery } from '../src/signing/sign.js';
import { latestCycle } from '../src/vocabulary.js';
import { tempDir } from './helpers/cli.js';
import { post } from './helpers/http.js';

// The library's webhooks.catchUp (#45.5): with the app's own store (a file, across a restart), what the app
// has not processed is handed to its handlers with event.catchUp, once; what it has is not; and the
// service's late delivery of what was caught up is a duplicate.

const INIT = latestCycle();
const MODEL = 'wm-lib';
let emu: RunningEmulator;
let published: PublishingEmulator;

beforeAll(async () => {
  published = await publishingEmulator([10]);
  emu = published.emu;
});
afterAll(() => emu.close());

const api = (path: string, init: RequestInit = {}) => fetch(`${emu.url}${path}`, { ...init, headers: { authorization: `Bearer ${emu.apiKey}`, 'content-type': 'application/json', ...init.headers } });

/** Publishes an event; resolves with its trigger once its delivery was made, or failed for good. */
const publish = async (event: Record<string, unknown>): Promise<string> => (await published.publish({ model: MODEL, initialization_time: INIT, ...event })).trigger;

/** The app: its handlers keep what they saw (and whether it was a catch-up), its store a file. */
function appOf(secret: string, store: PairStore) {
  const webhooks = new Webhooks({ secret, store });
  const seen: string[] = [];
  const record = (e: WebhookEvent) => void seen.push([e.type, 'forecast_hour' in e.payload.data ? `+${e.payload.data.forecast_hour}h` : '', e.catchUp ? 'catch-up' : ''].filter(Boolean).join(' '));
  webhooks.on('forecast_hour.available', record).on('initialization_time.available', record);
  return { webhooks, seen };
}

async function serve(webhooks: Webhooks, port: number): Promise<Server> {
  const server = createServer(createNodeMiddleware(webhooks, { path: '/hooks' }));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return server;
}
const close = (server: Server) => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));

describe('webhooks.catchUp with the app’s own store', () => {
  it('hands the handlers what the store has not processed, once, with event.catchUp; the service’s late delivery is then a duplicate; across a restart', async () => {
    const port = await freePort();
    const created = await api('/webhooks/v1', {
      method: 'POST',
      body: JSON.stringify({
        url: `http://127.0.0.1:${port}/hooks`,
        subscriptions: { 'forecast_hour.available': { filters: { model: MODEL } }, 'initialization_time.available': { filters: { model: MODEL } } },
      }),
    });
    const hook = (await created.json()) as { webhook_id: string; secret: string; subscriptions: Record<string, { subscription_id: string }> };
    const dir = tempDir();
    const store = await openStore('file', { dir });
    const app = appOf(hook.secret, store);
    const server = await serve(app.webhooks, port);
    await publish({ type: 'forecast_hour.available', forecast_hour: 0 });
    await close(server); // the app is down: these are retried, then given up
    const missed = await publish({ type: 'forecast_hour.available', forecast_hour: 6 });
    await publish({ type: 'initialization_time.available' });
    expect(app.seen).toEqual(['forecast_hour.available +0h']);

    const options = { apiKey: emu.apiKey, webhookId: hook.webhook_id, since: '24h', baseUrl: emu.url };
    const caught = await app.webhooks.catchUp(options);
    expect(caught.map((c) => [c.type, c.forecast_hour ?? null, c.outcome])).toEqual([
      ['forecast_hour.available', 0, 'duplicate'],
      ['forecast_hour.available', 6, 'accepted'],
      ['initialization_time.available', null, 'accepted'],
    ]);
    expect(app.seen).toEqual(['forecast_hour.available +0h', 'forecast_hour.available +6h catch-up', 'initialization_time.available catch-up']);
    // again: nothing new for the handlers
    expect((await app.webhooks.catchUp(options)).every((c) => c.outcome === 'duplicate')).toBe(true);
    expect(app.seen).toHaveLength(3);

    // a restart of the app, on the same store file: still nothing new; the service's late delivery of +6h is a duplicate
    await store.close();
    const store2 = await openStore('file', { dir });
    const again = appOf(hook.secret, store2);
    try {
      expect((await again.webhooks.catchUp({ ...options, since: 86_400_000 })).every((c) => c.outcome === 'duplicate')).toBe(true);
      const server2 = await serve(again.webhooks, port);
      try {
        const body = buildPayload({
          type: 'forecast_hour.available',
          webhookId: hook.webhook_id,
          subscriptionId: hook.subscriptions['forecast_hour.available']!.subscription_id,
          triggerId: missed,
          data: { model: MODEL, initialization_time: INIT, forecast_hour: 6 },
        });
        const late = await post(`http://127.0.0.1:${(server2.address() as AddressInfo).port}/hooks`, signDelivery({ secret: hook.secret, body, triggerId: missed }), body);
        expect(late.status).toBe(200);
        expect(JSON.parse(late.body)).toEqual({ ok: true, duplicate: true });
      } finally {
        await close(server2);
      }
      expect(again.seen).toEqual([]);
    } finally {
      await store2.close();
    }
  });

  it('a forecast API that refuses the key rejects before any handler runs', async () => {
    const app = appOf('whsec_' + Buffer.alloc(32, 1).toString('base64'), await openStore('file', { dir: tempDir() }));
    await expect(app.webhooks.catchUp({ apiKey: `wb_${Buffer.from('emulator:0123456789abcdef0123456789abcdef').toString('base64')}`, webhookId: '1', baseUrl: emu.url })).rejects.toThrow(
      /refused the credentials \(401\)/,
    );
    await expect(app.webhooks.catchUp({ apiKey: emu.apiKey, webhookId: '1' })).rejects.toThrow(/needs the service's address/);
    expect(app.seen).toEqual([]);
  });
});
