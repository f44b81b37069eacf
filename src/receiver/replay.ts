import type { Dispatcher } from 'undici';
import { layoutNamed, type Layout } from '../signing/layouts.js';
import { signDelivery } from '../signing/sign.js';
import { forwardDelivery, type ForwardResult } from './forward.js';

/** The header a replayed delivery carries, so that an app (and a person reading its logs) can tell. */
export const REPLAY_HEADER = 'x-wxhooks-replay';

const SIGNATURE_HEADERS = new Set(['trigger-id', 'webhook-timestamp', 'webhook-signature']);

/**
 * Re-sends a delivery as the service would send a retry: the same body and Trigger-Id, signed afresh
 * with the current time (in the layout it came in, else the service's), the other headers as they
 * came, and `X-Wxhooks-Replay: 1`.
 */
export async function replayDelivery(options: {
  headers: Record<string, string>;
  body: Buffer;
  secret: string;
  layout?: string;
  to: string;
  timeoutMs: number;
  dispatcher: Dispatcher;
}): Promise<ForwardResult & { trigger_id: string }> {
  const triggerId = options.headers['trigger-id'] ?? 'trg_replay';
  const layout: Layout = layoutNamed(options.layout ?? 'standard') ?? layoutNamed('standard')!;
  const headers: Record<string, string> = {};
  for (const [name, value] of Object.entries(options.headers)) if (!SIGNATURE_HEADERS.has(name.toLowerCase())) headers[name] = value;
  const signed = signDelivery({ secret: options.secret, body: options.body, triggerId, layout });
  const result = await forwardDelivery(options.to, { ...headers, 'trigger-id': signed['Trigger-Id'], 'webhook-timestamp': signed['Webhook-Timestamp'], 'webhook-signature': signed['Webhook-Signature'] }, options.body, options.timeoutMs, options.dispatcher, {
    [REPLAY_HEADER]: '1',
  });
  return { ...result, trigger_id: triggerId };
}
