import { DEGREE_DAYS, FORECAST_HOUR, INIT_TIME, TROPICAL_CYCLONES } from '../delivery/forecast.js';
import { syntheticResponse, type PublishedEvent } from './responses.js';

/**
 * The emulator's forecast API: its record of what it published, read back as the service's forecast API
 * answers (SERVICE.md, "The forecast API's record of what exists"). A run's hours appear with their
 * `created_at` as they are published, whether or not any delivery of them succeeded; a run is in progress
 * from its first hour until its initialization_time.available (which `trigger run` sends after the range
 * it was given) closes it; degree days and cyclones appear when they are published. Times are the
 * emulator's clock, in milliseconds.
 */

interface RunRecord {
  initialization_time: string;
  /** Forecast hour → when it was published (ms). */
  hours: Map<number, number>;
  inProgress: boolean;
  /** When its initialization_time.available was published (ms). */
  closedAt?: number;
}

interface ModelRecord {
  runs: Map<string, RunRecord>;
  /** Initialisation time → when its degree days were published (ms). */
  degreeDays: Map<string, number>;
  /** Initialisation time → when its cyclones were published (ms), and the cyclones, by id. */
  cyclones: Map<string, { at: number; cyclones: Record<string, unknown> }>;
}

/** What is kept in the data file, beside the webhooks. */
export interface PersistedForecasts {
  [model: string]: {
    runs: { initialization_time: string; hours: [number, number][]; in_progress: boolean; closed_at?: number }[];
    degree_days: [string, number][];
    cyclones: [string, number, Record<string, unknown>][];
  };
}

/** Why a question to the record found nothing: the model was never published, or this run of it. */
export class Missing {
  constructor(
    readonly missing: 'model' | 'run',
    readonly message: string,
  ) {}
}

const iso = (ms: number) => new Date(ms).toISOString();
const byTime = (a: string, b: string) => Date.parse(a) - Date.parse(b);

export class ForecastRecord {
  private readonly models = new Map<string, ModelRecord>();

  /** Notes a published event (the type decides what it adds). */
  published(event: PublishedEvent, at: number): void {
    const m = this.model(event.model, true)!;
    const init = event.initialization_time;
    if (event.type === FORECAST_HOUR && event.forecast_hour !== undefined) {
      const run = this.run(m, init);
      if (!run.hours.has(event.forecast_hour)) run.hours.set(event.forecast_hour, at);
    } else if (event.type === INIT_TIME) {
      const run = this.run(m, init);
      run.inProgress = false;
      run.closedAt ??= at;
    } else if (event.type === DEGREE_DAYS) {
      if (!m.degreeDays.has(init)) m.degreeDays.set(init, at);
    } else if (event.type === TROPICAL_CYCLONES) {
      if (!m.cyclones.has(init)) {
        const drawn = syntheticResponse({ type: 'tropical_cyclones' }, event, `${event.model}:${init}`) as { cyclones?: { name: string; track: unknown }[] };
        m.cyclones.set(init, { at, cyclones: Object.fromEntries((drawn.cyclones ?? []).map((c) => [c.name, c.track])) });
      }
    }
  }

  private model(name: string, create = false): ModelRecord | undefined {
    let m = this.models.get(name);
    if (!m && create) this.models.set(name, (m = { runs: new Map(), degreeDays: new Map(), cyclones: new Map() }));
    return m;
  }

  private run(m: ModelRecord, init: string): RunRecord {
    let run = m.runs.get(init);
    if (!run) m.runs.set(init, (run = { initialization_time: init, hours: new Map(), inProgress: true }));
    return run;
  }

  private known(model: string): ModelRecord | Missing {
    return this.model(model) ?? new Missing('model', `model ${model} has no forecasts here (the emulator has published none of it)`);
  }

  /** `GET /forecasts/v1/{model}/initialization_times`: the newest available run, the available runs and those in progress, oldest first. */
  initializationTimes(model: string): { latest: string | null; available: string[]; in_progress: string[] } | Missing {
    const m = this.known(model);
    if (m instanceof Missing) return m;
    const runs = [...m.runs.values()];
    const available = runs
      .filter((r) => !r.inProgress)
      .map((r) => r.initialization_time)
      .sort(byTime);
    const inProgress = runs
      .filter((r) => r.inProgress)
      .map((r) => r.initialization_time)
      .sort(byTime);
    return { latest: available.at(-1) ?? null, available, in_progress: inProgress };
  }

  /** `…/initialization_times/archive`: the runs of the 7 days before `pageEnd` (default now). */
  archive(model: string, pageEnd: number): { archived_initialization_times: string[] } | Missing {
    const m = this.known(model);
    if (m instanceof Missing) return m;
    const from = pageEnd - 7 * 86_400_000;
    const inits = [...m.runs.keys()].filter((t) => Date.parse(t) < pageEnd && Date.parse(t) >= from).sort(byTime);
    return { archived_initialization_times: inits };
  }

  /** `GET /forecasts/v1/{model}/run_information`: a run's hours, each with when it became available; the latest run when no time is given. */
  runInformation(
    model: string,
    init: string | undefined,
  ): { initialization_time: string; forecast_zero: string; in_progress: boolean; available: { forecast_hour: number; created_at: string; archived: boolean }[] } | Missing {
    const m = this.known(model);
    if (m instanceof Missing) return m;
    let run: RunRecord | undefined;
    if (init === undefined) {
      const runs = [...m.runs.values()].sort((a, b) => byTime(a.initialization_time, b.initialization_time));
      run = runs.filter((r) => !r.inProgress).at(-1) ?? runs.at(-1);
    } else run = m.runs.get(init);
    if (!run) return new Missing('run', init === undefined ? `model ${model} has no run yet` : `model ${model} has no run initialised at ${init}`);
    const available = [...run.hours.entries()].sort((a, b) => a[0] - b[0]).map(([hour, at]) => ({ forecast_hour: hour, created_at: iso(at), archived: false }));
    return { initialization_time: run.initialization_time, forecast_zero: run.initialization_time, in_progress: run.inProgress, available };
  }

  /** `GET /insights/v1/{model}/calculation_times/degree_days`. */
  degreeDays(model: string): { latest: string | null; available: string[]; in_progress: string[]; incomplete: string[] } | Missing {
    const m = this.known(model);
    if (m instanceof Missing) return m;
    const available = [...m.degreeDays.keys()].sort(byTime);
    return { latest: available.at(-1) ?? null, available, in_progress: [], incomplete: [] };
  }

  /** `GET /forecasts/v1/{model}/tropical_cyclones`: a run's cyclones, by id (the latest run with cyclones when no time is given). */
  tropicalCyclones(model: string, init: string | undefined): Record<string, unknown> | Missing {
    const m = this.known(model);
    if (m instanceof Missing) return m;
    const at = init ?? [...m.cyclones.keys()].sort(byTime).at(-1);
    const found = at === undefined ? undefined : m.cyclones.get(at);
    if (!found) return new Missing('run', `model ${model} has no tropical cyclone calculation${init ? ` for the run initialised at ${init}` : ' yet'}`);
    return found.cyclones;
  }

  toJSON(): PersistedForecasts {
    const out: PersistedForecasts = {};
    for (const [name, m] of this.models) {
      out[name] = {
        runs: [...m.runs.values()].map((r) => ({
          initialization_time: r.initialization_time,
          hours: [...r.hours.entries()],
          in_progress: r.inProgress,
          ...(r.closedAt ? { closed_at: r.closedAt } : {}),
        })),
        degree_days: [...m.degreeDays.entries()],
        cyclones: [...m.cyclones.entries()].map(([init, c]) => [init, c.at, c.cyclones]),
      };
    }
    return out;
  }

  /** The record a data file kept (what is not of its shape is passed over). */
  load(data: unknown): void {
    if (typeof data !== 'object' || data === null) return;
    for (const [name, raw] of Object.entries(data as PersistedForecasts)) {
      const m = this.model(name, true)!;
      for (const r of Array.isArray(raw?.runs) ? raw.runs : []) {
        if (typeof r?.initialization_time !== 'string' || !Array.isArray(r.hours)) continue;
        m.runs.set(r.initialization_time, { initialization_time: r.initialization_time, hours: new Map(r.hours), inProgress: r.in_progress !== false, closedAt: r.closed_at });
      }
      for (const [init, at] of Array.isArray(raw?.degree_days) ? raw.degree_days : []) m.degreeDays.set(init, at);
      for (const [init, at, cyclones] of Array.isArray(raw?.cyclones) ? raw.cyclones : []) m.cyclones.set(init, { at, cyclones });
    }
  }
}
