import { toBase64Url } from '../signing/encoding.js';
import type { VerifySuccess } from '../signing/rules.js';
import { idText } from '../util/bytes.js';
import type { DedupeSource } from './report.js';

/** The pair a verified delivery is deduplicated by: a delivery is processed once per (trigger, subscription). */
export interface Pair {
  trigger: string;
  subscription: string;
  source: DedupeSource;
}

/**
 * The (trigger, subscription) pair of a verified delivery. The trigger is the body's `trigger_id`,
 * else the Trigger-Id header. When the matched layout does not sign the Trigger-Id, the header could
 * have been changed by anyone: then it is the body's `trigger_id` or, failing that, a hash of what the
 * layout signs (timestamp and body), so a captured delivery re-sent under a new Trigger-Id is a duplicate:
 * for that, this gives what goes before the body into the SHA-256 (`hashPrefix`), and `hashedPair` the
 * pair (each door hashes with its own crypto).
 */
export function pairFrom(v: VerifySuccess): Pair | { subscription: string; hashPrefix: string } {
  const p = v.payload;
  const nested = typeof p.subscription === 'object' && p.subscription !== null ? (p.subscription as Record<string, unknown>).id : undefined;
  const subscription = idText(p.subscription_id) ?? idText(nested) ?? '';
  const fromBody = idText(p.trigger_id);
  if (fromBody !== undefined) return { trigger: fromBody, subscription, source: 'body' };
  if (v.signs.triggerId) return { trigger: v.triggerId, subscription, source: 'header' };
  return { subscription, hashPrefix: v.signs.timestamp ? `${v.timestamp}.` : '' };
}

/** The pair whose trigger is the SHA-256 of the hash prefix and the body. */
export const hashedPair = (subscription: string, digest: Uint8Array): Pair => ({ trigger: `sha256:${toBase64Url(digest)}`, subscription, source: 'hash' });
