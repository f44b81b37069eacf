import { DEGREE_DAYS, filterModels, filtersMatch, FORECAST_HOUR, INIT_TIME, TROPICAL_CYCLONES } from '../delivery/forecast.js';
import { RECONCILABLE, unreconcilable, type ExpectedNotification, type ExpectedRun, type Expectations, type ExpectingSubscription } from '../delivery/reconcile.js';
import { sameInstant } from '../delivery/runs.js';
import { NotFoundError, UsageError } from '../errors.js';
import type { HttpClient } from './http.js';
import { pathId } from './ids.js';
import { notTheService, type Webhook } from './normalize.js';

/**
 * The forecast API's record of what exists (SERVICE.md, last section), beside the webhook calls and with
 * their rules: the same client (authentication, retries of a GET, the timeout, typed errors), and its
 * answers normalised here, once (times written one way, hours as numbers), so that nothing past this
 * module sees the difference between the live service and the emulator.
 */

export interface InitializationTimes {
  latest: string | null;
  available: string[];
  in_progress: string[];
}

export interface RunInformation {
  initialization_time: string;
  in_progress: boolean;
  available: { forecast_hour: number; created_at: string | null }[];
}

type Raw = Record<string, unknown>;
const isObject = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const times = (v: unknown): string[] => (Array.isArray(v) ? v.filter((t): t is string => typeof t === 'string' && !Number.isNaN(Date.parse(t))).map(sameInstant) : []);
const timeOrNull = (v: unknown): string | null => (typeof v === 'string' && !Number.isNaN(Date.parse(v)) ? sameInstant(v) : null);

export class ForecastApi {
  constructor(readonly http: HttpClient) {}

  /** A model's 404 in words a person can act on (the service names models such as wm, wm4, wm-4.5-ens, ecmwf-det). */
  private async model<T>(model: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      throw new NotFoundError(`The forecast API has no model ${model} (404${err.serviceMessage ? `: ${err.serviceMessage}` : ''}).`, {
        status: 404,
        serviceMessage: err.serviceMessage,
        hint: "Check the model in the subscription's filter (`wxhooks subscription list WEBHOOK_ID`) or in --model / --run, and that --base-url names the service (or the emulator that published it).",
      });
    }
  }

  /** `GET /forecasts/v1/{model}/initialization_times`: the runs available, and those in progress. */
  async initializationTimes(model: string): Promise<InitializationTimes> {
    const { data } = await this.model(model, () => this.http.request('GET', `/forecasts/v1/${pathId(model, 'model')}/initialization_times`, { subject: `model ${model}` }));
    if (!isObject(data) || !Array.isArray(data.available)) throw notTheService("the forecast API's initialization times (`available`)", data);
    return { latest: timeOrNull(data.latest), available: times(data.available), in_progress: times(data.in_progress) };
  }

  /** `GET /forecasts/v1/{model}/run_information`: a run's hours, each with when it became available; undefined for a run the API does not know. */
  async runInformation(model: string, init: string): Promise<RunInformation | undefined> {
    let data: unknown;
    try {
      ({ data } = await this.http.request('GET', `/forecasts/v1/${pathId(model, 'model')}/run_information`, { query: { initialization_time: init }, subject: `run ${model}@${init}` }));
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
    if (!isObject(data) || !Array.isArray(data.available)) throw notTheService("the forecast API's run information (`available`)", data);
    const available: RunInformation['available'] = [];
    for (const h of data.available) {
      // an hour, or {forecast_hour, created_at, archived}
      const hour = isObject(h) ? h.forecast_hour : h;
      if (typeof hour === 'number' && Number.isInteger(hour) && hour >= 0) available.push({ forecast_hour: hour, created_at: isObject(h) ? timeOrNull(h.created_at) : null });
    }
    return { initialization_time: timeOrNull(data.initialization_time) ?? sameInstant(init), in_progress: data.in_progress === true, available };
  }

  /** `GET /insights/v1/{model}/calculation_times/degree_days`: the runs whose degree days are available. */
  async degreeDayTimes(model: string): Promise<string[]> {
    const { data } = await this.model(model, () => this.http.request('GET', `/insights/v1/${pathId(model, 'model')}/calculation_times/degree_days`, { subject: `model ${model}` }));
    if (!isObject(data) || !Array.isArray(data.available)) throw notTheService("the forecast API's degree day calculation times (`available`)", data);
    return times(data.available);
  }

  /** `GET /forecasts/v1/{model}/tropical_cyclones`: a run's cyclones, by id; undefined when the run has no calculation. */
  async tropicalCyclones(model: string, init: string): Promise<Raw | undefined> {
    try {
      const { data } = await this.http.request('GET', `/forecasts/v1/${pathId(model, 'model')}/tropical_cyclones`, { query: { initialization_time: init }, subject: `run ${model}@${init}` });
      if (!isObject(data)) throw notTheService("the forecast API's tropical cyclones", data);
      return data;
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }
}

/** Which runs to look at: those initialised since a time (ms), or one run. */
export type Window = { since: number } | { run: { model: string; init: string } };

/** Which models a subscription's notifications come from: its filter's, else those given (--model), else a usage error. */
function modelsOf(sub: ExpectingSubscription, window: Window, given: readonly string[]): string[] {
  const filtered = filterModels(sub.filters);
  if ('run' in window) return filtered.length && !filtered.includes(window.run.model) ? [] : [window.run.model];
  if (filtered.length) return filtered;
  if (given.length) return [...given];
  throw new UsageError(`Subscription ${sub.id} (${sub.type}) has no model filter, and the forecast API cannot be asked for "every model".`, {
    hint: 'Name the models it receives with --model (repeatable), such as --model wm-6, or look at one run with --run MODEL@TIME.',
  });
}

/**
 * What the forecast API says the webhook's subscriptions should have been sent in the window: for each
 * subscription of a type it keeps a record of, each run of each of its models (by its filters: model,
 * initialization_time_hours) and what of it is out. Every call is made before anything is decided, so a
 * forecast API that fails (401, 404, 5xx, a timeout) fails the whole, and changes nothing.
 */
export async function expectedNotifications(api: ForecastApi, hook: Pick<Webhook, 'subscriptions'>, window: Window, models: readonly string[] = []): Promise<Expectations> {
  const out: Expectations = { runs: [], unreconcilable: [] };
  const inWindow = (init: string) => ('run' in window ? sameInstant(init) === sameInstant(window.run.init) : Date.parse(init) >= window.since);
  // each model's answers asked once, however many subscriptions need them
  const cache = new Map<string, Promise<unknown>>();
  const once = <T>(key: string, ask: () => Promise<T>): Promise<T> => {
    let p = cache.get(key) as Promise<T> | undefined;
    if (!p) cache.set(key, (p = ask()));
    return p;
  };
  const runsOf = (model: string): Promise<{ init: string; inProgress: boolean }[]> =>
    once(`times:${model}`, async () => {
      const times = await api.initializationTimes(model); // a model the API does not know fails here, clearly
      if ('run' in window) {
        // a run the API has no hours of may still have degree days or cyclones: it is looked at all the same
        const info = await once(`run:${model}:${window.run.init}`, () => api.runInformation(model, window.run.init));
        return [{ init: info?.initialization_time ?? sameInstant(window.run.init), inProgress: info?.in_progress ?? false }];
      }
      return [...times.available.map((init) => ({ init, inProgress: false })), ...times.in_progress.map((init) => ({ init, inProgress: true }))];
    });
  const info = (model: string, init: string) => once(`run:${model}:${init}`, () => api.runInformation(model, init));

  for (const sub of hook.subscriptions) {
    const kind = RECONCILABLE[sub.type];
    if (!kind) {
      out.unreconcilable.push({ subscription: sub, why: unreconcilable(sub.type)! });
      continue;
    }
    for (const model of modelsOf(sub, window, models)) {
      const runs = (await runsOf(model)).filter((r) => inWindow(r.init) && filtersMatch(sub.filters, { model, initialization_time: r.init }));
      const degreeDays = sub.type === DEGREE_DAYS ? new Set(await once(`dd:${model}`, () => api.degreeDayTimes(model))) : undefined;
      for (const r of runs) {
        const run: ExpectedRun = { subscription: sub, model, initialization_time: r.init, in_progress: r.inProgress, notifications: [] };
        const notify = (created_at: string | null, forecast_hour?: number): ExpectedNotification => ({
          forecast: { type: sub.type, model, initialization_time: r.init, ...(forecast_hour !== undefined ? { forecast_hour } : {}) },
          subscription: sub,
          created_at,
        });
        if (sub.type === FORECAST_HOUR) {
          const hours = await info(model, r.init);
          if (hours) {
            run.in_progress = hours.in_progress;
            run.notifications = hours.available.map((h) => notify(h.created_at, h.forecast_hour));
          }
        } else if (sub.type === INIT_TIME) {
          const hours = await info(model, r.init);
          const complete = hours ? !hours.in_progress : !r.inProgress;
          run.in_progress = !complete;
          // the run's notification is sent once its last hour is out: when that hour became available
          const last =
            hours?.available
              .map((h) => h.created_at)
              .filter((c): c is string => c !== null)
              .sort()
              .at(-1) ?? null;
          if (complete) run.notifications = [notify(last)];
        } else if (sub.type === DEGREE_DAYS) {
          if (degreeDays!.has(r.init)) run.notifications = [notify(null)];
        } else if (sub.type === TROPICAL_CYCLONES) {
          const cyclones = await once(`tc:${model}:${r.init}`, () => api.tropicalCyclones(model, r.init));
          if (cyclones) run.notifications = [{ ...notify(null), found: cyclones }];
        }
        out.runs.push(run);
      }
    }
  }
  return out;
}
