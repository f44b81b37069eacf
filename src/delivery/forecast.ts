import { sameInstant } from './runs.js';
import type { Claim, PairStore } from './store.js';

/**
 * A forecast's own identity, beside the (trigger, subscription) pair: what a notification is about,
 * whichever delivery brought it. The service's delivery of a forecast hour and a catch-up of it built from
 * the forecast API (`reconcile --catch-up`, `webhooks.catchUp`) carry different triggers, and are one
 * notification: so each verified delivery that names a forecast claims its identity too, as a second pair
 * of the same store (its key in place of the trigger, the subscription beside it), and whichever comes
 * first is handled; the other is a duplicate. It imports only the run rules and the store contract's
 * types: every runtime can use it.
 *
 * The identity per type: `forecast_hour.available` a model, an initialisation time and a forecast hour;
 * `initialization_time.available`, `degree_days.available` and `tropical_cyclones.available` a model and
 * an initialisation time (one notification per run); `events.available` a model, an initialisation time
 * and its event type. A test delivery (a ping) has none: it never claims a forecast.
 */
export interface ForecastIdentity {
  type: string;
  model: string;
  /** ISO 8601, as sameInstant writes it. */
  initialization_time: string;
  /** forecast_hour.available only. */
  forecast_hour?: number;
  /** events.available only. */
  event_type?: string;
}

export const FORECAST_HOUR = 'forecast_hour.available';
export const INIT_TIME = 'initialization_time.available';
export const DEGREE_DAYS = 'degree_days.available';
export const TROPICAL_CYCLONES = 'tropical_cyclones.available';
export const EVENTS = 'events.available';

/** The header a catch-up carries (its body says so too, signed: `"catch_up": true`). */
export const CATCH_UP_HEADER = 'wxhooks-catch-up';

/** A time as the service writes it: read without Date.parse (this runs for every delivery). */
const WHOLE_SECONDS = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The forecast a verified delivery's body names, or undefined: a test delivery (a ping), a type with no
 * model or initialisation time, a forecast hour without its hour.
 */
export function forecastOf(payload: Record<string, unknown>): ForecastIdentity | undefined {
  if (payload.test === true || typeof payload.type !== 'string') return undefined;
  const data = isObject(payload.data) ? payload.data : {};
  const { model, initialization_time: init } = data;
  if (typeof model !== 'string' || !model || typeof init !== 'string' || !(WHOLE_SECONDS.test(init) || !Number.isNaN(Date.parse(init)))) return undefined;
  const f: ForecastIdentity = { type: payload.type, model, initialization_time: sameInstant(init) };
  if (payload.type === FORECAST_HOUR) {
    const hour = data.forecast_hour;
    if (typeof hour !== 'number' || !Number.isInteger(hour) || hour < 0) return undefined;
    f.forecast_hour = hour;
  } else if (payload.type === EVENTS) {
    if (typeof data.event_type !== 'string' || !data.event_type) return undefined;
    f.event_type = data.event_type;
  }
  return f;
}

/** The forecast's key: one text per forecast, however its time was written (a store keeps it, prefixed, in place of a trigger). */
export const forecastKey = (f: ForecastIdentity): string => JSON.stringify([f.type, f.model, sameInstant(f.initialization_time), f.forecast_hour ?? f.event_type ?? null]);

/** A forecast in a line: `forecast_hour.available wm-6 2026-11-21T00:00:00Z +6h`. */
export const describeForecast = (f: ForecastIdentity): string =>
  [f.type, f.model, f.initialization_time, f.forecast_hour !== undefined ? `+${f.forecast_hour}h` : undefined, f.event_type].filter(Boolean).join(' ');

function hourOfDay(iso: string): string {
  const d = new Date(iso);
  return `${d.getUTCHours()}:${String(d.getUTCMinutes()).padStart(2, '0')}`;
}

const asList = (v: unknown): string[] => (Array.isArray(v) ? v.map(String) : v === undefined || v === null ? [] : [String(v)]);

/** The models a subscription's filter names (none: every model). */
export const filterModels = (filters: Record<string, unknown> | null | undefined): string[] => asList(filters?.model);

/**
 * Whether a subscription's filters let a forecast through (model, initialization_time_hours, event_type):
 * the rule the emulator publishes by, and reconciling expects by.
 */
export function filtersMatch(filters: Record<string, unknown> | null | undefined, event: { model: string; initialization_time: string; event_type?: string }): boolean {
  const models = asList(filters?.model);
  if (models.length && !models.includes(event.model)) return false;
  const hours = asList(filters?.initialization_time_hours).map((h) => h.replace(/^0(\d):/, '$1:'));
  if (hours.length && !hours.includes(hourOfDay(event.initialization_time))) return false;
  const events = asList(filters?.event_type);
  if (events.length && (!event.event_type || !events.includes(event.event_type))) return false;
  return true;
}

/** A pair as a store keys it. */
export interface Keyed {
  trigger: string;
  subscription: string;
}

/** A delivery's pair with the forecast it names (src/delivery/pair.ts), keyed as its store keys it. */
export interface ForecastNamed extends Keyed {
  /** The forecast's key (forecastKey, or its hash when it is too long to key by). */
  forecast?: string;
  /** The delivery is a catch-up (its signed body says so). */
  catchUp?: true;
}

/**
 * The forecast's own pairs in the store, beside the delivery's: `service`, done once a delivery of the
 * service's of the forecast was handled (and held while one is); `caught`, done once a catch-up of it was
 * handed over (and held while one is). A forecast was handed to the app when either is done.
 */
const servicePair = (p: ForecastNamed): Keyed => ({ trigger: `service:${p.forecast}`, subscription: p.subscription });
const caughtPair = (p: ForecastNamed): Keyed => ({ trigger: `caught:${p.forecast}`, subscription: p.subscription });

/** The pairs that say a forecast was handed over to a subscription's app (by the service's delivery, or by a catch-up): what `reconcile` looks up. */
export const handedKeys = (forecast: string, subscription: string): [Keyed, Keyed] => [servicePair({ trigger: '', subscription, forecast }), caughtPair({ trigger: '', subscription, forecast })];

/** What claiming a delivery found, and the forecast pairs it holds (to complete or let go with it). */
export interface ForecastClaim {
  claim: Claim;
  holding: Keyed[];
}

const isDone = (c: string) => c === 'done' || c === 'stored_now';

/** A pair looked at without claiming it: the store's own look, else a claim let go at once. */
async function peek(store: PairStore, k: Keyed): Promise<'done' | 'held' | 'free'> {
  if (store.peek) return store.peek(k.trigger, k.subscription);
  const c = await store.claim(k.trigger, k.subscription);
  if (c === 'won') await store.release(k.trigger, k.subscription);
  return c === 'won' ? 'free' : isDone(c) ? 'done' : 'held';
}

/**
 * Claims a delivery's pair, and what its forecast needs, in one turn (a shared store does each kind in one
 * statement), and says what they found as one claim:
 * - the service's delivery: its pair claimed; `service` claimed too, as the mark that one is being handled
 *   (found held or done, another delivery of the service for the forecast: the pair rule stays, and this
 *   one is handled all the same); `caught` looked at: done, the forecast was caught up first (a duplicate);
 *   held, a catch-up of it is being handed over (409: the service retries);
 * - a catch-up: its pair, `caught` and `service` claimed: either done, the forecast was handed over already
 *   (a duplicate); either held, one delivery of it is being handled (409: handed over later).
 * A duplicate's pair is marked done (its retries are found at once); what was won and is not needed is let
 * go; a look the store could not make is thrown, after that.
 */
export async function claimWithForecast(store: PairStore, pair: ForecastNamed): Promise<ForecastClaim> {
  if (pair.forecast === undefined) return { claim: await store.claim(pair.trigger, pair.subscription), holding: [] };
  const service = servicePair(pair);
  const caught = caughtPair(pair);
  const claimed = pair.catchUp ? [pair, caught, service] : [pair, service];
  const looks = await Promise.allSettled([...claimed.map((k) => store.claim(k.trigger, k.subscription)), ...(pair.catchUp ? [] : [peek(store, caught)])]);
  const won = claimed.filter((_, i) => looks[i]!.status === 'fulfilled' && (looks[i] as PromiseFulfilledResult<Claim>).value === 'won');
  const letGo = (keys: Keyed[]) => Promise.all(keys.map((k) => store.release(k.trigger, k.subscription)));
  const failed = looks.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failed) {
    await letGo(won);
    throw failed.reason;
  }
  const [own, ...others] = looks.map((r) => (r as PromiseFulfilledResult<string>).value);
  const forecast = won.filter((k) => k !== pair);
  if (own !== 'won') {
    await letGo(forecast);
    return { claim: own as Claim, holding: [] };
  }
  // the service's delivery needs only `caught` clear (its `service` claim is a mark, whatever it found); a catch-up needs both won
  const blocking = pair.catchUp ? others : [others[1]!];
  if (blocking.some(isDone)) {
    await letGo(forecast);
    // a store that cannot write it now keeps it as processed, and writes it later
    await store.complete(pair.trigger, pair.subscription).catch(() => undefined);
    return { claim: 'done', holding: [] };
  }
  if (blocking.some((c) => c === 'held')) {
    await letGo(won);
    return { claim: 'held', holding: [] };
  }
  return { claim: 'won', holding: forecast };
}

/**
 * Marks a handled delivery's pair processed, and its forecast handed over: the service's delivery marks
 * `service` done (held or not: another delivery of the service may hold it); a catch-up marks `caught`
 * done and lets `service` go.
 */
export async function completeWithForecast(store: PairStore, pair: ForecastNamed, holding: readonly Keyed[]): Promise<void> {
  if (pair.forecast === undefined) return store.complete(pair.trigger, pair.subscription);
  const service = servicePair(pair);
  const caught = caughtPair(pair);
  const marked = pair.catchUp ? caught : service;
  // the pair last: a pairs file's newest line stays the delivery's own
  await Promise.all([
    store.complete(marked.trigger, marked.subscription),
    ...holding.filter((k) => k.trigger !== marked.trigger).map((k) => store.release(k.trigger, k.subscription)),
    store.complete(pair.trigger, pair.subscription),
  ]);
}

/** Lets a delivery's pair go unprocessed, and the forecast pairs it holds with it. */
export async function releaseWithForecast(store: PairStore, pair: Keyed, holding: readonly Keyed[]): Promise<void> {
  await Promise.all([store.release(pair.trigger, pair.subscription), ...holding.map((k) => store.release(k.trigger, k.subscription))]);
}
