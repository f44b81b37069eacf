import { join } from 'node:path';
import { expectedNotifications, ForecastApi, type Window } from '../api/forecasts.js';
import type { Webhook } from '../api/normalize.js';
import type { Service } from '../api/service.js';
import { forecastKey, forecastOf, handedKeys, type Keyed } from '../delivery/forecast.js';
import { lateOf, reconcile, type ExpectedNotification, type LateNotification, type Reconciled } from '../delivery/reconcile.js';
import { DELIVERED_OUTCOMES } from '../delivery/outcomes.js';
import type { PairStore } from '../delivery/store.js';
import { NotFoundError } from '../errors.js';
import { pairsFileName } from '../store/file-pairs.js';
import { pairsIn } from '../store/pairs-log.js';
import type { PgStore } from '../store/postgres.js';
import { keyedPair } from './report.js';
import { listStored, type DeliverySource } from './stored.js';

/**
 * `reconcile`, `listen --watch-runs` and `runs watch`: what the forecast API says a webhook's
 * subscriptions should have been sent, against what was processed here (the store's forecast pairs, and
 * what a history or a `--save-dir` folder holds), without claiming anything.
 */

/** The store pairs that say a forecast was handed over to a subscription's app (by the service, or a catch-up), keyed as listen keys them (src/receiver/report.ts, keyedPair). */
function handedOf(subscription: string, forecast: string): [Keyed, Keyed] {
  const keyed = keyedPair({ trigger: '-', subscription, source: 'body', forecast });
  return handedKeys(keyed.forecast!, keyed.subscription);
}

export const keysOf = (n: ExpectedNotification): [Keyed, Keyed] => handedOf(n.subscription.id, forecastKey(n.forecast));

const keyText = (k: Keyed) => `${k.subscription}\u0000${k.trigger}`;

/** Which of a set of forecast pairs were processed: the store's answer, read only. */
export type ProcessedLookup = (pairs: readonly Keyed[]) => Promise<Set<string>>;

/** The file store's answer: the webhook's pairs file (and the shared one, of a listen without --webhook), read without owning them. */
export function fileLookup(dir: string, webhook: string): ProcessedLookup {
  return async (pairs) => {
    const wanted = new Set(pairs.map(keyText));
    const found = await Promise.all([pairsIn(join(dir, pairsFileName(webhook)), wanted), pairsIn(join(dir, pairsFileName()), wanted)]);
    return new Set(found.flatMap((s) => [...s]));
  };
}

/** A PostgreSQL store's answer: its done pairs. */
export const pgLookup =
  (store: PgStore): ProcessedLookup =>
  (pairs) =>
    store.doneAmong(pairs);

/**
 * What a history (a PostgreSQL store's) or a `--save-dir` folder holds that was delivered: the forecast
 * pairs of its verified deliveries, for what was processed before forecasts were kept in the store. A
 * store that keeps no history adds nothing.
 */
export async function deliveredIn(source: DeliverySource): Promise<Set<string>> {
  let entries: Awaited<ReturnType<typeof listStored>>['entries'];
  try {
    ({ entries } = await listStored(source));
  } catch (err) {
    if (err instanceof NotFoundError && 'store' in source) return new Set();
    throw err;
  }
  const out = new Set<string>();
  for (const e of entries) {
    // a folder says `verified` of a new delivery; a history names listen's outcome
    if (e.test || !(e.outcome === 'verified' || (DELIVERED_OUTCOMES as readonly string[]).includes(e.outcome)) || e.subscription_id === undefined) continue;
    const f = forecastOf({ type: e.type, data: { model: e.model, initialization_time: e.initialization_time, forecast_hour: e.forecast_hour } });
    if (f) out.add(keyText(handedOf(e.subscription_id, forecastKey(f))[0]));
  }
  return out;
}

export interface ReconcileOptions {
  service: Service;
  webhook: Webhook;
  window: Window;
  /** The models of subscriptions without a model filter (`--model`). */
  models?: readonly string[];
  /** The hours a run should have: those not out yet are listed as such (never as missing). */
  expectHours?: readonly number[];
  lookup: ProcessedLookup;
  /** Forecast pairs known delivered besides the store's (a history, a folder). */
  also?: ReadonlySet<string>;
}

/** Asks the forecast API (every call first: one that fails changes nothing), then the store, and reconciles. */
export async function reconcileWebhook(o: ReconcileOptions): Promise<Reconciled> {
  const expected = await expectedNotifications(new ForecastApi(o.service.http), o.webhook, o.window, o.models);
  const all = expected.runs.flatMap((r) => r.notifications);
  const done = await o.lookup(all.flatMap(keysOf));
  return reconcile(expected, (n) => keysOf(n).some((k) => done.has(keyText(k)) || Boolean(o.also?.has(keyText(k)))), o.expectHours);
}

export interface RunWatchOptions {
  /** One look: what the forecast API published in the window, reconciled against what arrived. */
  look: () => Promise<Reconciled>;
  lateAfterMs: number;
  intervalMs: number;
  clock: { now(): number; after(ms: number): Promise<void> };
  /** Told of each notification once, when it is first found late. */
  onLate: (late: LateNotification) => void;
  /** Told when a look fails (the forecast API away): the next look tries again. */
  onError: (err: unknown) => void;
}

/**
 * Late runs, as they happen: every interval, one look; a notification available for longer than
 * `lateAfterMs` and not delivered is said once (`onLate`), and listed by `late()` until it arrives.
 * The first look is at once: what was published before the watch started counts too.
 */
export class RunWatch {
  private current: LateNotification[] = [];
  private readonly said = new Set<string>();
  private stopped = false;
  private looking: Promise<void> | undefined;

  constructor(private readonly o: RunWatchOptions) {}

  /** The notifications late at the last look. */
  late(): LateNotification[] {
    return this.current;
  }

  /** Looks now, then every interval until stop(). */
  start(): void {
    void (async () => {
      while (!this.stopped) {
        this.looking = this.lookOnce();
        await this.looking;
        if (this.stopped) break;
        await this.o.clock.after(this.o.intervalMs);
      }
    })();
  }

  /** One look (what `start` does every interval). */
  async lookOnce(): Promise<void> {
    try {
      const r = await this.o.look();
      this.current = lateOf(r, this.o.clock.now(), this.o.lateAfterMs);
      for (const late of this.current) {
        const key = JSON.stringify([late.subscription_id, late.type, late.model, late.initialization_time, late.forecast_hour ?? null]);
        if (this.said.has(key)) continue;
        this.said.add(key);
        this.o.onLate(late);
      }
    } catch (err) {
      this.o.onError(err);
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.looking;
  }
}

/** What a store that listen (or an app) holds says was processed: its own look at each pair (claiming nothing). */
export function storeLookup(store: PairStore): ProcessedLookup {
  return async (pairs) => {
    const out = new Set<string>();
    const looks = await Promise.all(pairs.map((k) => (store.peek ? store.peek(k.trigger, k.subscription) : Promise.resolve('free' as const))));
    looks.forEach((l, i) => l === 'done' && out.add(keyText(pairs[i]!)));
    return out;
  };
}

/** The environment `--on-late CMD` runs in: the caller's, and the late notification's details (WXHOOKS_LATE_*, and all of it as JSON). */
export function lateEnvironment(late: LateNotification, env: Record<string, string | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(env)) if (v !== undefined) out[k] = v;
  Object.assign(out, {
    WXHOOKS_LATE_TYPE: late.type,
    WXHOOKS_LATE_SUBSCRIPTION_ID: late.subscription_id,
    WXHOOKS_LATE_MODEL: late.model,
    WXHOOKS_LATE_INITIALIZATION_TIME: late.initialization_time,
    WXHOOKS_LATE_FORECAST_HOUR: late.forecast_hour === undefined ? '' : String(late.forecast_hour),
    WXHOOKS_LATE_CREATED_AT: late.created_at,
    WXHOOKS_LATE_MS: String(Math.round(late.late_ms)),
    WXHOOKS_LATE_JSON: JSON.stringify(late),
  });
  return out;
}

/**
 * Runs `--on-late CMD` for one late notification, through the shell, with its details in the environment;
 * what it prints goes to `out` (never to stdout, which may be NDJSON); resolves with its exit code (or
 * why it could not run). Never rejects.
 */
export async function runOnLate(cmd: string, late: LateNotification, env: Record<string, string | undefined>, out: { write(text: string): unknown }): Promise<{ code: number | null; error?: string }> {
  const { spawn } = await import('node:child_process');
  return new Promise((resolve) => {
    const child = spawn(cmd, { shell: true, env: lateEnvironment(late, env), stdio: ['ignore', 'pipe', 'pipe'] });
    child.stdout.on('data', (d: Buffer) => out.write(d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => out.write(d.toString('utf8')));
    child.on('error', (err) => resolve({ code: null, error: err.message }));
    child.on('close', (code) => resolve({ code }));
  });
}
