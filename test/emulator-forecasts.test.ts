import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../src/emulator/server.js';
import { freePort } from '../scripts/harness.js';
import { tempDir } from './helpers/cli.js';

// The emulator's forecast API (SERVICE.md, last section): what it answers is what it published, for every
// model it published, whether or not any delivery of it succeeded; a model it never published is a 404.

const INIT = '2026-11-22T00:00:00Z';
const LATER = '2026-11-22T06:00:00Z';
let emu: RunningEmulator | undefined;

afterEach(async () => {
  await emu?.close();
  emu = undefined;
});

async function api(path: string, key = emu!.apiKey): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`${emu!.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

async function publish(event: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${emu!.url}/emulator/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${emu!.apiKey}`, 'content-type': 'application/json' }, body: JSON.stringify(event) });
  expect(res.status).toBe(202);
}

/** An emulator with one webhook whose URL nothing listens on: every delivery fails, and its retries with it. */
async function withUnreachableWebhook(dataFile?: string): Promise<void> {
  emu = await startEmulator({ port: 0, retryDelays: [], dataFile });
  const res = await fetch(`${emu.url}/webhooks/v1`, {
    method: 'POST',
    headers: { authorization: `Bearer ${emu.apiKey}`, 'content-type': 'application/json' },
    body: JSON.stringify({ url: `http://127.0.0.1:${await freePort()}/`, subscriptions: { 'forecast_hour.available': {}, 'initialization_time.available': {} } }),
  });
  expect(res.status).toBe(201);
}

describe('the forecast API of the emulator', () => {
  it('a model it never published is a 404 on every call, as the other routes answer; without the key, 401', async () => {
    emu = await startEmulator({ port: 0, retryDelays: [] });
    for (const path of [
      '/forecasts/v1/wm-6/initialization_times',
      '/forecasts/v1/wm-6/initialization_times/archive',
      `/forecasts/v1/wm-6/run_information?initialization_time=${INIT}`,
      '/forecasts/v1/wm-6/tropical_cyclones',
      '/insights/v1/wm-6/calculation_times/degree_days',
    ]) {
      const r = await api(path);
      expect(r.status, path).toBe(404);
      expect(r.body, path).toEqual({ error: { code: 'not_found', message: expect.stringContaining('model wm-6') } });
      expect((await api(path, 'wrong')).status, path).toBe(401);
    }
    expect((await api('/forecasts/v1/wm-6/nothing_here')).status).toBe(404);
  });

  it('a run is in progress from its first hour until its initialization_time.available, its hours each with when it was published, delivered or not', async () => {
    await withUnreachableWebhook();
    const before = Date.now();
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: INIT, forecast_hour: 0 });
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: INIT, forecast_hour: 6 });
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00Z', forecast_hour: 6 }); // the same hour, written otherwise
    expect((await api('/forecasts/v1/wm-6/initialization_times')).body).toEqual({ latest: null, available: [], in_progress: [INIT] });
    const run = (await api(`/forecasts/v1/wm-6/run_information?initialization_time=${INIT}`)).body;
    expect(run).toMatchObject({ initialization_time: INIT, forecast_zero: INIT, in_progress: true });
    const hours = run.available as { forecast_hour: number; created_at: string; archived: boolean }[];
    expect(hours.map((h) => h.forecast_hour)).toEqual([0, 6]);
    for (const h of hours) expect(Date.parse(h.created_at)).toBeGreaterThanOrEqual(before - 1);
    // every delivery failed: the forecast API says the hours exist all the same
    expect(emu!.state.deliveries.filter((d) => d.outcome === 'delivered')).toEqual([]);

    await publish({ type: 'initialization_time.available', model: 'wm-6', initialization_time: INIT });
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: LATER, forecast_hour: 0 });
    expect((await api('/forecasts/v1/wm-6/initialization_times')).body).toEqual({ latest: INIT, available: [INIT], in_progress: [LATER] });
    expect((await api(`/forecasts/v1/wm-6/run_information?initialization_time=${INIT}`)).body).toMatchObject({ in_progress: false });
    // no time given: the latest available run
    expect((await api('/forecasts/v1/wm-6/run_information')).body).toMatchObject({ initialization_time: INIT });
    expect((await api('/forecasts/v1/wm-6/run_information?initialization_time=2026-11-23T00:00:00Z')).status).toBe(404);
    expect((await api('/forecasts/v1/wm-6/run_information?initialization_time=yesterday')).status).toBe(400);
    expect((await api(`/forecasts/v1/wm-6/initialization_times/archive?page_end=2026-11-23T00:00:00Z`)).body).toEqual({ archived_initialization_times: [INIT, LATER] });
  });

  it('degree days and tropical cyclones appear when published; a run without a cyclone calculation is a 404; the record survives a restart', async () => {
    const dataFile = join(tempDir(), 'emulator.json');
    await withUnreachableWebhook(dataFile);
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: INIT, forecast_hour: 0 });
    expect((await api('/insights/v1/wm-6/calculation_times/degree_days')).body).toEqual({ latest: null, available: [], in_progress: [], incomplete: [] });
    await publish({ type: 'degree_days.available', model: 'wm-6', initialization_time: INIT });
    await publish({ type: 'tropical_cyclones.available', model: 'wm-6', initialization_time: INIT });
    expect((await api('/insights/v1/wm-6/calculation_times/degree_days')).body).toEqual({ latest: INIT, available: [INIT], in_progress: [], incomplete: [] });
    const cyclones = (await api(`/forecasts/v1/wm-6/tropical_cyclones?initialization_time=${INIT}`)).body;
    expect(Object.keys(cyclones)).toEqual(['EMU-01']);
    expect((await api(`/forecasts/v1/wm-6/tropical_cyclones?initialization_time=${LATER}`)).status).toBe(404);
    await emu!.close();
    emu = await startEmulator({ port: 0, retryDelays: [], dataFile });
    expect((await api('/insights/v1/wm-6/calculation_times/degree_days')).body).toMatchObject({ available: [INIT] });
    expect((await api(`/forecasts/v1/wm-6/run_information?initialization_time=${INIT}`)).body).toMatchObject({ available: [{ forecast_hour: 0 }] });
    expect((await api(`/forecasts/v1/wm-6/tropical_cyclones?initialization_time=${INIT}`)).body).toEqual(cyclones);
  });
});
