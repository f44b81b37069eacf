import { lookup, type HeaderSource } from '../signing/rules.js';

/**
 * A replay's own identity (the inspector's "Replay", MCP's `replay_delivery`, `deliveries replay`): a new
 * id, signed with the webhook's secret over the delivery's own timestamp and body, as a delivery of the
 * standard layout whose Trigger-Id is that id. A handler built on `Webhooks` that finds the mark valid
 * keys the delivery by the replay's id (so it runs again, once per replay) and tells it apart
 * (`event.replay`); a mark that does not verify is no mark: the delivery is the original (a duplicate).
 * Anyone can add a header; nobody without the secret can sign one.
 */

export const REPLAY_ID_HEADER = 'x-wxhooks-replay-id';
export const REPLAY_SIGNATURE_HEADER = 'x-wxhooks-replay-signature';

const REPLAY_ID = /^rpl_[A-Za-z0-9_-]{8,64}$/;

/** The mark as a delivery's headers, for the verifier (its id as the Trigger-Id, the delivery's timestamp); none when there is no mark. */
export function markOf(headers: HeaderSource): Record<string, string> | undefined {
  const id = lookup(headers, REPLAY_ID_HEADER, 'X-Wxhooks-Replay-Id');
  const signature = lookup(headers, REPLAY_SIGNATURE_HEADER, 'X-Wxhooks-Replay-Signature', ' ');
  const timestamp = lookup(headers, 'webhook-timestamp', 'Webhook-Timestamp');
  if (id === undefined || signature === undefined || timestamp === undefined || !REPLAY_ID.test(id)) return undefined;
  return { 'trigger-id': id, 'webhook-timestamp': timestamp, 'webhook-signature': signature };
}
