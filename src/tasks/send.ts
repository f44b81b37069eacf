import type { Clock } from '../util/clock.js';
import { UnreachableError } from '../errors.js';
import type { LayoutName } from '../signing/layouts.js';
import { buildPayload } from '../signing/payload.js';
import { signDelivery, type SignedHeaders } from '../signing/sign.js';
import { networkReason, readStart } from '../util/net.js';
import { latestCycle } from '../vocabulary.js';

/** The body `send` makes when none is given: a delivery of `type` as the service would send it, for the latest model cycle. */
export function generatedBody(o: { type: string; webhookId: string; subscriptionId: string; model: string; triggerId: string }): Buffer {
  const data: Record<string, unknown> = { model: o.model, initialization_time: latestCycle() };
  if (o.type === 'forecast_hour.available') data.forecast_hour = 0;
  return buildPayload({ type: o.type, webhookId: o.webhookId, subscriptionId: o.subscriptionId, triggerId: o.triggerId, data });
}

export interface SignedPost {
  to: string;
  body: Buffer;
  triggerId: string;
  secret: string;
  layout: LayoutName;
  /** Sign with this Unix time instead of now. */
  timestamp?: number;
  timeoutMs: number;
  clock: Clock;
}

/**
 * Signs `body` and POSTs it to `to`, as the service would (`send`, and the MCP server's send_delivery): the
 * receiver's status and the start of its answer. A receiver that cannot be reached is an error (exit 6);
 * any answer is an answer, 2xx or not: the caller says what it means.
 */
export async function postSigned(o: SignedPost): Promise<{ ok: boolean; status: number; text: string; ms: number; headers: SignedHeaders }> {
  const headers = signDelivery({ secret: o.secret, body: o.body, triggerId: o.triggerId, layout: o.layout, timestamp: o.timestamp });
  const { request } = await import('undici');
  const started = o.clock.monotonic();
  let status: number;
  let text: string;
  try {
    const res = await request(o.to, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'user-agent': 'wxhooks-send', ...headers },
      body: o.body,
      signal: AbortSignal.timeout(o.timeoutMs),
    });
    status = res.statusCode;
    // The status decides; of the answer, only its start is read (a receiver may answer without end).
    text = (await readStart(res.body)).replace(/\s+/g, ' ').trim().slice(0, 300);
  } catch (err) {
    throw new UnreachableError(`Could not deliver to ${o.to}: ${networkReason(err, o.timeoutMs)}.`, { hint: 'Is your receiver running on that address?' });
  }
  return { ok: status >= 200 && status < 300, status, text, ms: Math.round(o.clock.monotonic() - started), headers };
}
