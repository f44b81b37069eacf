import { DEGREE_DAYS, EVENTS, FORECAST_HOUR, INIT_TIME, TROPICAL_CYCLONES, type ForecastIdentity } from './forecast.js';

/**
 * Reconciling, as a function of data: what the forecast API says a webhook's subscriptions should have
 * been sent (the expectations src/api/forecasts.ts gathers), against what a store says was handed over;
 * per run, what was delivered, what is missing, what is not out yet; and what of the missing is late.
 * Used by `reconcile`, `webhooks.catchUp`, `listen --watch-runs` and `runs watch`.
 */

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
