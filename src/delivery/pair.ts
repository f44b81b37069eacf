import { toBase64Url } from '../signing/encoding.js';
import type { VerifySuccess } from '../signing/rules.js';
import { idText } from '../util/bytes.js';
import { forecastKey, forecastOf } from './forecast.js';
import type { DedupeSource } from './report.js';

/** The pair a verified delivery is deduplicated by: a delivery is processed once per (trigger, subscription). */
export interface Pair {
  trigger: string;
  subscription: string;
  source: DedupeSource;
  /** A replay's pair (its trigger, the replay's id): the trigger id of the delivery it replays. */
  replayOf?: string;
  /**
   * The key of the forecast the delivery names (src/delivery/forecast.ts), kept beside the pair with the
   * same subscription: the service's delivery of a forecast and a catch-up of it are one notification.
   * None for a test delivery (a ping), or a delivery that names no forecast.
   */
  forecast?: string;
  /** A catch-up (`reconcile --catch-up`): its signed body says so. */
  catchUp?: true;
}

/** A verified delivery, with the id of the replay it is when it carried a valid replay mark (src/delivery/replay-mark.ts). */
export type Verified = VerifySuccess & { replayId?: string };

/**
 * The (trigger, subscription) pair of a verified delivery. The trigger is the body's `trigger_id`,
 * else the Trigger-Id header. When the matched layout does not sign the Trigger-Id, the header could
 * have been changed by anyone: then it is the body's `trigger_id` or, failing that, a hash of what the
 * layout signs (timestamp and body), so a captured delivery re-sent under a new Trigger-Id is a duplicate:
 * for that, this gives what goes before the body into the SHA-256 (`hashPrefix`), and `hashedPair` the
 * pair (each door hashes with its own crypto). A replay that carries a valid mark is keyed by the replay's id.
 */
export function pairFrom(v: Verified): Pair | { subscription: string; hashPrefix: string; forecast?: string; catchUp?: true } {
  const p = v.payload;
  const nested = typeof p.subscription === 'object' && p.subscription !== null ? (p.subscription as Record<string, unknown>).id : undefined;
  const subscription = idText(p.subscription_id) ?? idText(nested) ?? '';
  const named = forecastOf(p);
  const forecast = named && forecastKey(named);
  const catchUp = p.catch_up === true;
  const fromBody = idText(p.trigger_id);
  // a replay is processed once per replay, keyed by its own signed id (and claims no forecast: it is run again on purpose)
  if (v.replayId !== undefined) return { trigger: v.replayId, subscription, source: 'header', replayOf: fromBody ?? v.triggerId };
  if (fromBody !== undefined) return withForecast({ trigger: fromBody, subscription, source: 'body' }, forecast, catchUp);
  if (v.signs.triggerId) return withForecast({ trigger: v.triggerId, subscription, source: 'header' }, forecast, catchUp);
  return withForecast({ subscription, hashPrefix: v.signs.timestamp ? `${v.timestamp}.` : '' }, forecast, catchUp);
}

/** The forecast (and the catch-up mark) only when there is one: an undefined property costs every delivery's copy of its pair. */
const withForecast = <T extends object>(pair: T, forecast: string | undefined, catchUp = false): T & { forecast?: string; catchUp?: true } =>
  forecast === undefined ? pair : catchUp ? { ...pair, forecast, catchUp: true } : { ...pair, forecast };

/** The pair whose trigger is the SHA-256 of the hash prefix and the body. */
export const hashedPair = (subscription: string, digest: Uint8Array, forecast?: string, catchUp?: true): Pair =>
  withForecast({ trigger: `sha256:${toBase64Url(digest)}`, subscription, source: 'hash' as const }, forecast, catchUp);

/**
 * The longest id a store keys a pair by. A real trigger or subscription id is ~30 characters; a sender's
 * may be any length (a 10 KB one passed PostgreSQL's index limit and failed its whole claim batch, #32.11).
 */
export const MAX_ID_LENGTH = 200;

/** Over MAX_ID_LENGTH, or holding what a store cannot keep as text (NUL and the other controls, a lone surrogate). */
export const unkeyable = (id: string): boolean => id.length > MAX_ID_LENGTH || /[\u0000-\u001f]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(id);

/** The ids of a pair that must be stored by their hash (unkeyable): the one rule, every door and every store. */
export const unkeyableIds = (pair: Pair): ('trigger' | 'subscription' | 'forecast')[] => (['trigger', 'subscription', 'forecast'] as const).filter((k) => pair[k] !== undefined && unkeyable(pair[k]));

/**
 * The pair with those ids replaced by `sha256:` and the base64url of the SHA-256 of the id's UTF-8
 * (each door hashes with its own crypto): the same id always gives the same key, so its retries are
 * duplicates, and every store can key it. The id itself is still reported and kept in the history.
 */
export function withHashedIds(pair: Pair, digests: Partial<Record<'trigger' | 'subscription' | 'forecast', Uint8Array>>): Pair {
  const key = (k: 'trigger' | 'subscription' | 'forecast') => (digests[k] ? `sha256:${toBase64Url(digests[k]!)}` : pair[k]);
  return withForecast({ ...pair, trigger: key('trigger')!, subscription: key('subscription')! }, key('forecast'), pair.catchUp);
}
