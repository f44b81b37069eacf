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

/**
 * What the forecast API's record can say of each type: `hours` (each forecast hour, with when it became
 * available), `run` (one notification per run the API lists), or nothing (`events.available`: the API has
 * no record of the events products). The guide and the decisions note say the same.
 */
export const RECONCILABLE: Readonly<Record<string, 'hours' | 'run'>> = {
  [FORECAST_HOUR]: 'hours',
  [INIT_TIME]: 'run',
  [DEGREE_DAYS]: 'run',
  [TROPICAL_CYCLONES]: 'run',
};

/** Why a type cannot be reconciled, in words, or undefined when it can. */
export function unreconcilable(type: string): string | undefined {
  if (RECONCILABLE[type]) return undefined;
  if (type === EVENTS) return 'the forecast API keeps no record of the events products (atmospheric rivers, heatwaves, coldwaves, fronts) a run had';
  return 'wxhooks does not know what the forecast API says of this type';
}

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

/** The forecast's key, as a store keeps it in place of a trigger: one text per forecast, however its time was written. */
export const forecastKey = (f: ForecastIdentity): string => `forecast:${JSON.stringify([f.type, f.model, sameInstant(f.initialization_time), f.forecast_hour ?? f.event_type ?? null])}`;

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

/** A subscription as reconciling needs it (the webhook API's, normalised). */
export interface ExpectingSubscription {
  id: string;
  type: string;
  filters?: Record<string, unknown> | null;
  response_options?: Record<string, unknown> | null;
}

/** One notification the forecast API says the service should have sent: its forecast, for which subscription, and since when. */
export interface ExpectedNotification {
  forecast: ForecastIdentity;
  subscription: ExpectingSubscription;
  /** When it became available (the earliest the service could send it); null when the forecast API does not say. */
  created_at: string | null;
  /** What the forecast API answered of it, when that is the product itself (a run's tropical cyclones, by id). */
  found?: Record<string, unknown>;
}

/** A run of a model, as the forecast API lists it for one subscription: what it has published of it so far. */
export interface ExpectedRun {
  subscription: ExpectingSubscription;
  model: string;
  initialization_time: string;
  /** The run is still being published (its last hour is not out). */
  in_progress: boolean;
  /** What of it is out: each forecast hour (`hours` types), or the run's one notification (the others). */
  notifications: ExpectedNotification[];
}

/** What the forecast API says should have been delivered, and the subscriptions it cannot say anything of. */
export interface Expectations {
  runs: ExpectedRun[];
  unreconcilable: { subscription: ExpectingSubscription; why: string }[];
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

/** A run of a forecast_hour.available subscription, reconciled: its hours out, those processed here, those missing, those not out yet. */
export interface ReconciledRun {
  type: string;
  subscription_id: string;
  model: string;
  initialization_time: string;
  in_progress: boolean;
  /** The hours the forecast API lists. */
  available: number[];
  delivered: number[];
  /** Out, and not processed here: each with when it became available. */
  missing: { forecast_hour: number; created_at: string | null }[];
  /** Expected (--expect-hours), and not out yet: not missing. */
  not_yet: number[];
}

/** A run's one notification (initialization_time.available, degree_days.available, tropical_cyclones.available), reconciled. */
export interface ReconciledNotification {
  type: string;
  subscription_id: string;
  model: string;
  initialization_time: string;
  state: 'delivered' | 'missing' | 'not_yet';
  created_at: string | null;
}

export interface Reconciled {
  runs: ReconciledRun[];
  notifications: ReconciledNotification[];
  not_reconcilable: { type: string; subscription_id: string; why: string }[];
  /** What is missing, as the forecast API says it: what a catch-up hands over. */
  missing: ExpectedNotification[];
}

/**
 * What the forecast API says should have been delivered, against what was processed here (`done`: the
 * store's forecast pairs, and the history): per run, the hours delivered, missing and not out yet
 * (`expectHours`, when given; an hour not out is never missing).
 */
export function reconcile(e: Expectations, done: (n: ExpectedNotification) => boolean, expectHours?: readonly number[]): Reconciled {
  const out: Reconciled = { runs: [], notifications: [], not_reconcilable: [], missing: [] };
  for (const u of e.unreconcilable) out.not_reconcilable.push({ type: u.subscription.type, subscription_id: u.subscription.id, why: u.why });
  for (const run of e.runs) {
    const base = { type: run.subscription.type, subscription_id: run.subscription.id, model: run.model, initialization_time: run.initialization_time };
    if (RECONCILABLE[run.subscription.type] === 'hours') {
      const r: ReconciledRun = { ...base, in_progress: run.in_progress, available: [], delivered: [], missing: [], not_yet: [] };
      for (const n of run.notifications) {
        const hour = n.forecast.forecast_hour!;
        r.available.push(hour);
        if (done(n)) r.delivered.push(hour);
        else {
          r.missing.push({ forecast_hour: hour, created_at: n.created_at });
          out.missing.push(n);
        }
      }
      r.not_yet = (expectHours ?? []).filter((h) => !r.available.includes(h));
      out.runs.push(r);
    } else if (!run.notifications.length) out.notifications.push({ ...base, state: 'not_yet', created_at: null });
    for (const n of RECONCILABLE[run.subscription.type] === 'run' ? run.notifications : []) {
      const delivered = done(n);
      out.notifications.push({ ...base, state: delivered ? 'delivered' : 'missing', created_at: n.created_at });
      if (!delivered) out.missing.push(n);
    }
  }
  return out;
}

/** A notification available for longer than it should take to arrive, and not delivered. */
export interface LateNotification {
  type: string;
  subscription_id: string;
  model: string;
  initialization_time: string;
  forecast_hour?: number;
  /** When the forecast API says it became available. */
  created_at: string;
  /** How long ago that was, in milliseconds. */
  late_ms: number;
}

/** What of a reconciled window is late at `now`: missing, and available for longer than `lateAfterMs` (one whose time the API does not give cannot be judged). */
export function lateOf(r: Reconciled, now: number, lateAfterMs: number): LateNotification[] {
  const out: LateNotification[] = [];
  for (const n of r.missing) {
    if (n.created_at === null) continue;
    const age = now - Date.parse(n.created_at);
    if (age < lateAfterMs) continue;
    const f = n.forecast;
    out.push({
      type: f.type,
      subscription_id: n.subscription.id,
      model: f.model,
      initialization_time: f.initialization_time,
      ...(f.forecast_hour !== undefined ? { forecast_hour: f.forecast_hour } : {}),
      created_at: n.created_at,
      late_ms: age,
    });
  }
  return out;
}
