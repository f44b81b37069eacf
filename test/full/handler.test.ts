import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhooks, WebhookHandlerError, type WebhookSetupError, openStore } from '../../src/index.js';
import { signDelivery } from '../../src/signing/index.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';

// The handler library's PostgreSQL store (the rest of the library: test/handler.test.ts), on a database
// of this file's own on the run's server.

const SECRET = 'whsec_' + Buffer.alloc(32, 5).toString('base64');

function delivery(trigger: string, o: { secret?: string; type?: string; data?: Record<string, unknown>; subscription?: string; timestamp?: number } = {}) {
  const body = JSON.stringify({
    type: o.type ?? 'forecast_hour.available',
    webhook_id: 7,
    subscription_id: o.subscription ?? '1',
    trigger_id: trigger,
    created_at: '2026-11-24T06:00:00Z',
    test: false,
    data: o.data ?? { model: 'wm-6', initialization_time: '2026-11-24T00:00:00Z', forecast_hour: 6 },
  });
  return { headers: { 'content-type': 'application/json', ...(signDelivery({ secret: o.secret ?? SECRET, body, triggerId: trigger, timestamp: o.timestamp }) as Record<string, string>) }, body };
}

/** An app as a user writes one: a handler per type, what it saw kept, and a switch to make it throw. */
function app(options: ConstructorParameters<typeof Webhooks>[0] = { secret: SECRET }) {
  const webhooks = new Webhooks(options);
  const seen: string[] = [];
  const errors: WebhookHandlerError[] = [];
  const setup: WebhookSetupError[] = [];
  const failFor = new Set<string>();
  webhooks.on('forecast_hour.available', async (event) => {
    if (failFor.delete(event.id)) throw new Error('the database is down');
    seen.push(`${event.id} +${event.payload.data.forecast_hour}h`);
  });
  webhooks.onError((error) => void (error instanceof WebhookHandlerError ? errors.push(error) : setup.push(error)));
  return { webhooks, seen, errors, setup, failFor };
}

describe('openStore(postgres://): two instances of an app on one database', () => {
  let pg: SharedPostgres;
  beforeAll(async () => void (pg = await sharedPostgres()));
  afterAll(() => pg?.remove());

  it('a delivery sent to both, at once and again, is processed once', async () => {
    const stores = [await openStore(pg.url, { schema: 'handler_test' }), await openStore(pg.url, { schema: 'handler_test' })];
    try {
      const apps = stores.map((store) => app({ secret: SECRET, store }));
      const triggers = Array.from({ length: 20 }, (_, i) => `trg_pg_${i}`);
      const receipts = await Promise.all(triggers.flatMap((t) => apps.map((a) => a.webhooks.verifyAndReceive(delivery(t)))));
      // at once: one of the two processes it, the other finds it done or still held (409: the service retries)
      expect(receipts.filter((r) => r.outcome === 'accepted')).toHaveLength(20);
      const again = await Promise.all(triggers.map((t) => apps[1]!.webhooks.verifyAndReceive(delivery(t))));
      expect(again.every((r) => r.outcome === 'duplicate')).toBe(true);
      expect([...apps[0]!.seen, ...apps[1]!.seen].sort()).toEqual(triggers.map((t) => `${t} +6h`).sort());
    } finally {
      for (const s of stores) await s.close();
    }
  }, 60_000);
});
