import { buildCatchUp } from '../api/catch-up.js';
import { resolveCredentials } from '../api/credentials.js';
import { expectedNotifications, ForecastApi } from '../api/forecasts.js';
import { HttpClient } from '../api/http.js';
import { normalizeBaseUrl } from '../api/base-url.js';
import { Service } from '../api/service.js';
import * as DEFAULTS from '../delivery/defaults.js';
import type { ForecastIdentity } from '../delivery/forecast.js';
import { signDelivery } from '../signing/sign.js';
import { duration } from '../util/parse.js';
import type { Receipt, RawBody } from './core.js';

/** What `webhooks.catchUp` takes. */
export interface CatchUpOptions {
  /** The API key (the service's, as `WX_API_KEY`): the webhook API and the forecast API are asked with it. */
  apiKey: string;
  /** For a legacy key only: its client id (as `WX_CLIENT_ID`). */
  clientId?: string;
  webhookId: string;
  /** The runs initialised since: a Date, a duration such as `'24h'`, or milliseconds back from now (default 24 h; at most the store's TTL). */
  since?: Date | string | number;
  /** The service's address (default `WX_BASE_URL`, as the CLI reads it). */
  baseUrl?: string;
  /** The models of a subscription without a model filter. */
  models?: string[];
  /** The deadline of each request to the service, retries included, in milliseconds (default 30 s). */
  timeoutMs?: number;
}

/** One notification the forecast API says exists, and what became of it here. */
export interface CaughtUp extends ForecastIdentity {
  subscription_id: string;
  /** The catch-up's trigger: the same for every catch-up of one forecast. */
  trigger_id: string;
  /** `accepted`: handed to the handlers now; `duplicate`: handled before (the service's delivery, or an earlier catch-up); else not handled, and why is in the receipt's words. */
  outcome: Receipt['outcome'];
  message?: string;
}

/** The runs' start, from `since`. */
function sinceOf(since: CatchUpOptions['since'], now: number): number {
  if (since === undefined) return now - DEFAULTS.reconcileSinceMs;
  if (since instanceof Date) return since.getTime();
  if (typeof since === 'number') return now - since;
  return now - duration(since, 'catchUp({ since })');
}

/**
 * `webhooks.catchUp(…)`: every notification the forecast API says the webhook's subscriptions should have
 * been sent in the window, built as the service would have built it (marked `catch_up`), signed with the
 * webhook's secret (its content came from the authenticated APIs, nothing from a sender) and received as a
 * delivery is: verified, claimed in the app's own store with its forecast, the handlers run with
 * `event.catchUp === true` for what the store has not processed, and nothing for what it has.
 */
export async function catchUp(o: CatchUpOptions, secret: string, receive: (request: { headers: Record<string, string>; body: RawBody }) => Promise<Receipt>): Promise<CaughtUp[]> {
  if (!o.apiKey) throw new TypeError('catchUp needs { apiKey }: the webhook and forecast APIs are asked with it');
  if (!o.webhookId) throw new TypeError('catchUp needs { webhookId }');
  const base = o.baseUrl ?? process.env.WX_BASE_URL;
  if (!base) throw new TypeError("catchUp needs the service's address: { baseUrl }, or WX_BASE_URL");
  const now = Date.now();
  const credentials = resolveCredentials({ WX_API_KEY: o.apiKey, WX_CLIENT_ID: o.clientId }, 'auto', () => Date.now());
  const http = new HttpClient({ baseUrl: normalizeBaseUrl(base, 'catchUp({ baseUrl })'), credentials, timeoutMs: o.timeoutMs ?? DEFAULTS.requestTimeoutMs });
  const hook = await new Service(http).getWebhook(o.webhookId);
  const expected = await expectedNotifications(new ForecastApi(http), hook, { since: sinceOf(o.since, now) }, o.models);
  const out: CaughtUp[] = [];
  for (const n of expected.runs.flatMap((r) => r.notifications)) {
    const c = buildCatchUp(n, hook.id, now);
    const signed = signDelivery({ secret, body: c.body, triggerId: c.triggerId });
    const receipt = await receive({
      headers: { 'content-type': 'application/json', 'trigger-id': signed['Trigger-Id'], 'webhook-timestamp': signed['Webhook-Timestamp'], 'webhook-signature': signed['Webhook-Signature'] },
      body: c.body,
    });
    out.push({ ...n.forecast, subscription_id: n.subscription.id, trigger_id: c.triggerId, outcome: receipt.outcome, ...(receipt.message ? { message: receipt.message } : {}) });
  }
  return out;
}
