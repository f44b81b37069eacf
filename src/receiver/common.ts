import type { VerifyFailure, VerifySuccess } from '../signing/rules.js';
import { toBase64Url } from '../signing/encoding.js';
import { idText } from '../util/bytes.js';
import type { DedupeSource } from './event.js';

/**
 * The rules a receiver shares with the handler library (src/handler/), runtime-neutral: the dedupe key of
 * a verified delivery (each hashes with its own crypto when it must), and what is answered. `listen`'s
 * whole answer table is src/receiver/decide.ts.
 */

/** The largest body read, unless told (`listen --max-body`, the handlers' `maxBody`): larger is answered 413. */
export const MAX_BODY = 25 * 1024 * 1024;
/** The body bytes held at once across every request, unless told (`listen --max-inflight`, the middleware's `maxInflight`). */
export const MAX_INFLIGHT = 256 * 1024 * 1024;

export const OK_BODY = '{"ok":true}';
export const DUPLICATE_BODY = '{"ok":true,"duplicate":true}';
export const IN_PROGRESS_BODY = '{"error":"this notification is being processed; try again later"}';
export const errorBody = (message: string) => JSON.stringify({ error: message });

/** What each verification failure is answered with: 400 for what is not a delivery, 401 for what is not authentic. */
export function statusForFailure(f: VerifyFailure): number {
  if (f.reason === 'not_json_object') return 400;
  if (f.reason === 'missing_header') return f.header === 'Webhook-Signature' ? 401 : 400;
  return 401;
}

/** The pair a verified delivery is deduplicated by. */
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
 * for that, this gives what goes before the body into the SHA-256 (`hashPrefix`), and `hashedPair` the pair.
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
