/**
 * The model-run rules, in one place and import-free (the inspector page bundles them): what counts as a
 * run's delivery (a verified forecast_hour.available or initialization_time.available of a model and an
 * initialisation time; never a test delivery, a ping), when a run is complete (every expected hour, and
 * its initialization_time.available unless told otherwise), and how hours are written. Used by `listen
 * --until-run`, by `wxhooks runs`, by the history and the inspector's runs view; the PostgreSQL store's
 * query says the same in SQL (test/runs-rules.test.ts holds the two to the same answers).
 */

/** What a verified delivery says of its run (the fields of a ReceiverEvent, or of a saved body). */
export interface RunFacts {
  type?: string;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  /** A test delivery (a ping): never part of a run. */
  test?: boolean;
  /** When it was received (ISO 8601), and the notification's own created_at: its delivery lag is the one minus the other. */
  time?: string;
  created_at?: string;
}

/** How long after it became available a forecast hour arrived (its first delivery): received time minus created_at. */
export interface HourLag {
  forecast_hour: number;
  lag_ms: number;
}

/** A model run as the runs view shows it (and the PostgreSQL store's query returns it). */
export interface RunView {
  model: string;
  initialization_time: string;
  hours: number[];
  init_event: boolean;
  /** The delivery lag of each hour whose received time and created_at are known, in hour order (absent when none is). */
  lags?: HourLag[];
}

/** The runs view's data: each run (test deliveries aside), and how many test deliveries there were. */
export interface RunsView {
  runs: RunView[];
  tests: number;
  /** With `listen --watch-runs`: the notifications available for longer than --late-after and not delivered (src/delivery/forecast.ts, LateNotification). */
  late?: { type: string; subscription_id: string; model: string; initialization_time: string; forecast_hour?: number; created_at: string; late_ms: number }[];
}

export interface Run {
  model: string;
  /** ISO 8601, in whole seconds. */
  initialization_time: string;
  /** The forecast hours seen, each once. */
  hours: Set<number>;
  /** Whether its initialization_time.available was seen. */
  initEvent: boolean;
  /** Each hour's delivery lag, from its first arrival (when its times are known). */
  lags?: Map<number, number>;
}

/** The run `--until-run` waits for: a model and an initialisation time, each taken from the first delivery when not given. */
export interface RunTarget {
  model?: string;
  init?: string;
  /** The forecast hours that make it complete. */
  expect: number[];
  /** Whether its initialization_time.available is needed too (not with --no-init-event). */
  needInit: boolean;
}

export interface RunProgress {
  model: string;
  initialization_time: string;
  have: number[];
  missing: number[];
  init_event: boolean;
  complete: boolean;
}

const FORECAST_HOUR = 'forecast_hour.available';
const INIT_TIME = 'initialization_time.available';

/** The types of a run's deliveries: its forecast hours, and its initialisation event. */
export const RUN_TYPES: readonly string[] = [FORECAST_HOUR, INIT_TIME];

/** Whether a verified delivery counts towards a model run: of a run's two types, with a model and an initialisation time, and not a test. */
export const countsTowardRun = (facts: RunFacts): boolean => (facts.type === FORECAST_HOUR || facts.type === INIT_TIME) && !facts.test && Boolean(facts.model) && Boolean(facts.initialization_time);

/** The expected hours a run does not have yet. */
export const missingHours = (hours: ReadonlySet<number> | readonly number[], expect: readonly number[]): number[] => {
  const have = hours instanceof Set ? hours : new Set(hours);
  return expect.filter((h) => !have.has(h));
};

/** Whether a run is complete: no expected hour missing, and its initialization_time.available came (unless it is not needed: `--no-init-event`). */
export const isComplete = (missing: readonly number[], initEvent: boolean, needInit: boolean): boolean => missing.length === 0 && (!needInit || initEvent);

const CANONICAL = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/;

/** The same instant written the same way, so that `2026-11-22T00:00Z` and `2026-11-22T00:00:00.000Z` are one run. */
export function sameInstant(iso: string): string {
  if (CANONICAL.test(iso)) return iso; // as the service writes them: nothing to do (Date.parse and back cost ~1 µs a delivery)
  const t = Date.parse(iso);
  return Number.isNaN(t) ? iso : new Date(t).toISOString().replace(/\.000Z$/, 'Z');
}

export class RunTracker {
  private readonly byKey = new Map<string, Run>();
  private target: RunTarget | undefined;

  /**
   * `maxRuns`: at most this many runs are kept; past it, the one with the oldest initialisation time is
   * forgotten (never the target's). None: every run seen (a command's one look at a history).
   */
  constructor(
    target?: RunTarget,
    private readonly maxRuns?: number,
  ) {
    this.target = target && { ...target, init: target.init === undefined ? undefined : sameInstant(target.init) };
  }

  /**
   * Records one verified delivery. Returns its run, and whether it counted towards the target (a new
   * expected hour, or the run's initialisation event, of the run `--until-run` waits for).
   */
  add(facts: RunFacts): { run: Run; counted: boolean } | undefined {
    if (!countsTowardRun(facts)) return undefined;
    const model = facts.model!;
    const init = sameInstant(facts.initialization_time!);
    const key = `${model}\u0000${init}`;
    let run = this.byKey.get(key);
    if (!run) {
      this.byKey.set(key, (run = { model, initialization_time: init, hours: new Set(), initEvent: false }));
      if (this.maxRuns !== undefined && this.byKey.size > this.maxRuns) this.forgetOldest();
    }
    let fresh = false;
    if (facts.type === INIT_TIME) {
      fresh = !run.initEvent;
      run.initEvent = true;
    } else if (typeof facts.forecast_hour === 'number') {
      fresh = !run.hours.has(facts.forecast_hour);
      run.hours.add(facts.forecast_hour);
      if (fresh && facts.time !== undefined && facts.created_at !== undefined) {
        const lag = Date.parse(facts.time) - Date.parse(facts.created_at);
        if (!Number.isNaN(lag)) (run.lags ??= new Map()).set(facts.forecast_hour, lag);
      }
    }
    const t = this.target;
    if (t) {
      // the defaults: the first run-related delivery's model, then the first initialisation time seen for it
      t.model ??= run.model;
      if (run.model === t.model) t.init ??= init;
    }
    const counted = fresh && t !== undefined && run.model === t.model && init === t.init && (facts.type === INIT_TIME ? t.needInit : t.expect.includes(facts.forecast_hour!));
    return { run, counted };
  }

  /** The run with the oldest initialisation time (once per new run past `maxRuns`: a walk of at most that many). */
  private forgetOldest(): void {
    const t = this.target;
    let oldest: [string, Run] | undefined;
    for (const entry of this.byKey) {
      const r = entry[1];
      if (t && r.model === t.model && r.initialization_time === t.init) continue;
      if (!oldest || r.initialization_time < oldest[1].initialization_time) oldest = entry;
    }
    if (oldest) this.byKey.delete(oldest[0]);
  }

  /** Every run seen, oldest initialisation first. */
  runs(): Run[] {
    return [...this.byKey.values()].sort((a, b) => a.initialization_time.localeCompare(b.initialization_time) || a.model.localeCompare(b.model));
  }

  /** How far the target run has come (undefined until its model is known). */
  progress(): RunProgress | undefined {
    const t = this.target;
    if (!t?.model || !t.init) return undefined;
    const run = this.byKey.get(`${t.model}\u0000${t.init}`);
    return progressOf(run ?? { model: t.model, initialization_time: t.init, hours: new Set(), initEvent: false }, t.expect, t.needInit);
  }

  /** What the target is waiting for, in words, before its model or run is known. */
  waitingFor(): string {
    const t = this.target;
    if (!t) return '';
    return `${t.model ?? 'the first model run'}${t.init ? ` ${t.init}` : ''}`;
  }
}

/** A run's progress against the expected hours. */
export function progressOf(run: Run, expect: number[], needInit: boolean): RunProgress {
  const have = expect.filter((h) => run.hours.has(h));
  const missing = missingHours(run.hours, expect);
  return {
    model: run.model,
    initialization_time: run.initialization_time,
    have,
    missing,
    init_event: run.initEvent,
    complete: isComplete(missing, run.initEvent, needInit),
  };
}

/** A run as the runs view shows it: its hours in order, and their lags when known. */
export const runView = (r: Run): RunView => {
  const view: RunView = { model: r.model, initialization_time: r.initialization_time, hours: [...r.hours].sort((a, b) => a - b), init_event: r.initEvent };
  if (r.lags?.size) view.lags = [...r.lags].sort((a, b) => a[0] - b[0]).map(([forecast_hour, lag_ms]) => ({ forecast_hour, lag_ms }));
  return view;
};

/**
 * Hours as the shortest readable list: `+0h-+180h/6, +186h, +200h-+204h`. A stretch of three or more
 * hours with one step is a range (`/STEP` unless the step is 1); anything else is listed.
 */
export function compressHours(hours: readonly number[]): string {
  const sorted = [...new Set(hours)].sort((a, b) => a - b);
  const parts: string[] = [];
  let i = 0;
  while (i < sorted.length) {
    const step = sorted[i + 1] !== undefined ? sorted[i + 1]! - sorted[i]! : 0;
    let j = i + 1;
    while (step > 0 && j < sorted.length && sorted[j]! - sorted[j - 1]! === step) j++;
    if (j - i >= 3) {
      parts.push(`+${sorted[i]}h-+${sorted[j - 1]}h${step === 1 ? '' : `/${step}`}`);
      i = j;
    } else {
      parts.push(`+${sorted[i]}h`);
      i++;
    }
  }
  return parts.join(', ');
}

/** `MODEL`, `MODEL@INIT`, `@INIT` or nothing: what `--until-run` names. */
export function parseRunName(text: string | true): { model?: string; init?: string } {
  if (text === true || text === '') return {};
  const at = text.indexOf('@');
  if (at === -1) return { model: text };
  return { model: text.slice(0, at) || undefined, init: text.slice(at + 1) };
}
