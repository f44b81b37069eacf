import { describe, expect, it } from 'vitest';
import { claimWithForecast, completeWithForecast, forecastKey, forecastOf, releaseWithForecast, type ForecastNamed } from '../src/delivery/forecast.js';
import { lateOf, reconcile, type ExpectedNotification } from '../src/delivery/reconcile.js';
import { MemoryStore } from '../src/delivery/memory-store.js';
import type { PairStore } from '../src/delivery/store.js';
import { RunTracker, runView } from '../src/delivery/runs.js';
import { FilePairStore } from '../src/store/file-pairs.js';
import { tempDir } from './helpers/cli.js';
import { manualClock } from './helpers/clock.js';

// The forecast's identity beside the pair (#45.4), in the stores that run in this process (PostgreSQL's
// are in test/full/forecast-postgres.test.ts): whichever of the service's delivery and a catch-up comes
// first is handed over, the other is a duplicate; the pair rule stays for the service's own deliveries.

const fh = (hour: number, extra: Record<string, unknown> = {}) => ({
  type: 'forecast_hour.available',
  test: false,
  data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: hour },
  ...extra,
});

describe('the forecast a delivery names', () => {
  it('per type; none for a ping; one key however the time is written', () => {
    expect(forecastOf(fh(6))).toEqual({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 6 });
    expect(forecastOf(fh(6, { test: true }))).toBeUndefined();
    expect(forecastOf({ ...fh(6), data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z' } })).toBeUndefined(); // an hour without its hour
    expect(forecastOf({ type: 'initialization_time.available', data: { model: 'wm-6', initialization_time: '2026-11-22T00:00Z' } })).toEqual({
      type: 'initialization_time.available',
      model: 'wm-6',
      initialization_time: '2026-11-22T00:00:00Z',
    });
    expect(forecastOf({ type: 'events.available', data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', event_type: 'heatwave' } })).toMatchObject({ event_type: 'heatwave' });
    expect(forecastOf({ type: 'degree_days.available', data: { model: '', initialization_time: '2026-11-22T00:00:00Z' } })).toBeUndefined();
    expect(forecastOf({ type: 'degree_days.available', data: { model: 'wm-6', initialization_time: 'yesterday' } })).toBeUndefined();
    expect(forecastKey(forecastOf(fh(6))!)).toBe(forecastKey(forecastOf({ ...fh(6), data: { ...fh(6).data, initialization_time: '2026-11-22T00:00:00.000Z' } })!));
  });
});

/** One delivery through the rules, as settle does them: claimed, handled (or not), completed or released. */
async function deliver(store: PairStore, pair: ForecastNamed, ok = true): Promise<string> {
  const { claim, holding } = await claimWithForecast(store, pair);
  if (claim !== 'won') return claim;
  if (ok) await completeWithForecast(store, pair, holding);
  else await releaseWithForecast(store, pair, holding);
  return ok ? 'handled' : 'released';
}

const F = forecastKey(forecastOf(fh(6))!);
const service = (trigger: string): ForecastNamed => ({ trigger, subscription: '3', forecast: F });
const caughtUp: ForecastNamed = { trigger: 'catchup_x', subscription: '3', forecast: F, catchUp: true };

describe.each([
  ['memory', async () => new MemoryStore()],
  ['file', async () => FilePairStore.open({ dir: tempDir(), ttlMs: 86_400_000, watchMs: 0, clock: manualClock() })],
])('exactly once, whichever comes first (%s store)', (_name, open) => {
  it('the service first: the catch-up is a duplicate', async () => {
    const store = await open();
    expect(await deliver(store, service('trg_1'))).toBe('handled');
    expect(await deliver(store, caughtUp)).toBe('done');
    await store.close();
  });

  it('the catch-up first: the service’s late retry is a duplicate, and so is a second catch-up', async () => {
    const store = await open();
    expect(await deliver(store, caughtUp)).toBe('handled');
    expect(await deliver(store, service('trg_1'))).toBe('done');
    expect(await deliver(store, service('trg_1'))).toBe('done'); // its retries are found at once: its pair is done
    expect(await deliver(store, caughtUp)).toBe('done');
    await store.close();
  });

  it('the pair rule stays: two deliveries of the service for one forecast (two triggers) are each handled, at once too', async () => {
    const store = await open();
    const [a, b] = await Promise.all([deliver(store, service('trg_1')), deliver(store, service('trg_2'))]);
    expect([a, b]).toEqual(['handled', 'handled']);
    expect(await deliver(store, service('trg_1'))).toBe('done');
    await store.close();
  });

  it('while one is being handled, the other waits (409), and nothing is lost when the first fails', async () => {
    const store = await open();
    const first = await claimWithForecast(store, caughtUp);
    expect(first.claim).toBe('won');
    expect((await claimWithForecast(store, service('trg_1'))).claim).toBe('held');
    await releaseWithForecast(store, caughtUp, first.holding); // the app was down: not handed over
    expect(await deliver(store, service('trg_1'))).toBe('handled');
    expect(await deliver(store, caughtUp)).toBe('done');
    // a ping names no forecast: only its pair counts
    expect(await deliver(store, { trigger: 'trg_ping', subscription: '3' })).toBe('handled');
    await store.close();
  });
});

describe('reconciling, late hours and lags (pure)', () => {
  const sub = { id: '3', type: 'forecast_hour.available' };
  const n = (hour: number, created: string | null): ExpectedNotification => ({
    forecast: { type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: hour },
    subscription: sub,
    created_at: created,
  });
  const expected = {
    runs: [
      { subscription: sub, model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', in_progress: true, notifications: [n(0, '2026-11-22T03:00:00Z'), n(6, '2026-11-22T03:10:00Z'), n(12, null)] },
    ],
    unreconcilable: [{ subscription: { id: '4', type: 'events.available' }, why: 'no record' }],
  };

  it('delivered, missing with when each became available, not out yet; late only past --late-after, and never without a time', () => {
    const r = reconcile(expected, (x) => x.forecast.forecast_hour === 0, [0, 6, 12, 18]);
    expect(r.runs[0]).toMatchObject({ available: [0, 6, 12], delivered: [0], missing: [{ forecast_hour: 6 }, { forecast_hour: 12, created_at: null }], not_yet: [18] });
    expect(r.not_reconcilable).toEqual([{ type: 'events.available', subscription_id: '4', why: 'no record' }]);
    expect(lateOf(r, Date.parse('2026-11-22T03:19:59Z'), 10 * 60_000)).toEqual([]);
    expect(lateOf(r, Date.parse('2026-11-22T03:20:00Z'), 10 * 60_000)).toEqual([
      { type: 'forecast_hour.available', subscription_id: '3', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 6, created_at: '2026-11-22T03:10:00Z', late_ms: 600_000 },
    ]);
  });

  it("each hour's delivery lag is its first arrival's received time minus its created_at", () => {
    const t = new RunTracker();
    const base = { type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z' };
    t.add({ ...base, forecast_hour: 6, time: '2026-11-22T03:10:02.500Z', created_at: '2026-11-22T03:10:00Z' });
    t.add({ ...base, forecast_hour: 6, time: '2026-11-22T03:40:00.000Z', created_at: '2026-11-22T03:10:00Z' }); // a retry: not its lag
    t.add({ ...base, forecast_hour: 0 }); // no times: no lag
    expect(runView(t.runs()[0]!)).toEqual({ ...{ model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z' }, hours: [0, 6], init_event: false, lags: [{ forecast_hour: 6, lag_ms: 2500 }] });
  });
});
