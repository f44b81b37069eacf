import { Webhooks, WebhookHandlerError, type WebhookSetupError } from '../../src/index.js';
import { signDelivery } from '../../src/signing/index.js';

// What the tests of the handler library of both tiers share (test/handler.test.ts; its PostgreSQL store:
// test/full/handler.test.ts): the secret, a delivery as the service signs it, and an app as a user writes one.

export const SECRET = 'whsec_' + Buffer.alloc(32, 5).toString('base64');

export function delivery(trigger: string, o: { secret?: string; type?: string; data?: Record<string, unknown>; subscription?: string; timestamp?: number } = {}) {
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
export function app(options: ConstructorParameters<typeof Webhooks>[0] = { secret: SECRET }) {
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
