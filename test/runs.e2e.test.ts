import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compressHours, parseRunName, RunTracker } from '../src/delivery/runs.js';
import { openSaveDir, saveDelivery, savedMeta } from '../src/receiver/saved.js';
import { freePort } from '../scripts/harness.js';
import { runCli, tempDir } from './helpers/cli.js';
import { manualClock } from './helpers/clock.js';
import { runInProcess, startInProcess } from './helpers/context.js';
import { startCliInProcess, type Cli } from './helpers/process.js';

// A model run tracked to its last hour, end to end with the emulator: `listen --until-run`, its progress,
// and `wxhooks runs` over what was saved.

describe('the run tracker', () => {
  it('compresses hours into ranges with their step', () => {
    expect(compressHours([0, 6, 12, 18, 24])).toBe('+0h-+24h/6');
    expect(compressHours([186, 192, 198, 204])).toBe('+186h-+204h/6');
    expect(compressHours([1, 2, 3, 10, 11])).toBe('+1h-+3h, +10h, +11h');
    expect(compressHours([5])).toBe('+5h');
    expect(compressHours([])).toBe('');
  });

  it('takes the first model, then the first run of that model; order and repeats do not matter; other runs are not counted', () => {
    const t = new RunTracker({ expect: [0, 6, 12], needInit: true });
    const fh = (model: string, init: string, h: number) => ({ type: 'forecast_hour.available', model, initialization_time: init, forecast_hour: h });
    expect(t.add(fh('wm-6', '2026-11-22T00:00:00Z', 12))?.counted).toBe(true);
    expect(t.add(fh('wm-6', '2026-11-22T00:00Z', 12))?.counted).toBe(false); // the same hour again, the same instant written otherwise
    expect(t.add(fh('wm-5', '2026-11-22T00:00:00Z', 0))?.counted).toBe(false); // another model
    expect(t.add(fh('wm-6', '2026-11-22T06:00:00Z', 0))?.counted).toBe(false); // another run of the model
    expect(t.add(fh('wm-6', '2026-11-22T00:00:00Z', 18))?.counted).toBe(false); // not expected
    t.add(fh('wm-6', '2026-11-22T00:00:00Z', 0));
    t.add(fh('wm-6', '2026-11-22T00:00:00Z', 6));
    expect(t.progress()).toMatchObject({ have: [0, 6, 12], missing: [], complete: false });
    t.add({ type: 'initialization_time.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z' });
    expect(t.progress()?.complete).toBe(true);
    expect(t.runs()).toHaveLength(3);
  });

  it('reads MODEL, MODEL@INIT and @INIT', () => {
    expect(parseRunName(true)).toEqual({});
    expect(parseRunName('wm-6')).toEqual({ model: 'wm-6' });
    expect(parseRunName('wm-6@2026-11-22T00:00Z')).toEqual({ model: 'wm-6', init: '2026-11-22T00:00Z' });
    expect(parseRunName('@2026-11-22T00:00Z')).toEqual({ model: undefined, init: '2026-11-22T00:00Z' });
  });
});

describe('a ping is no part of a model run (#33)', () => {
  it('`runs --dir` leaves test deliveries out, as the history and the SQL do, and says how many', async () => {
    const dir = join(tempDir(), 'saved');
    const store = tempDir('wxhooks-cfg-');
    await openSaveDir(dir, store); // marked by this store's key, as listen --save-dir marks what it saves
    const save = (trigger: string, test: boolean, hour: number) => {
      const body = Buffer.from(
        JSON.stringify({
          type: 'forecast_hour.available',
          webhook_id: '1',
          subscription_id: '1',
          trigger_id: trigger,
          test,
          data: { model: test ? 'wm-ping' : 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: hour },
        }),
      );
      return saveDelivery(dir, savedMeta('2026-11-22T01:00:00.000Z', 'POST', '/', { 'trigger-id': trigger }, 'standard'), body, trigger);
    };
    await save('trg_ping', true, 0);
    await save('trg_real', false, 6);
    const r = await runCli(['runs', '--dir', dir, '--json'], { env: { WXHOOKS_CONFIG_DIR: store } });
    expect(r.code).toBe(0);
    expect(JSON.parse(r.stdout)).toEqual({ runs: [{ model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', hours: [6], init_event: false }], deliveries: 2, tests: 1 });
    const text = await runCli(['runs', '--dir', dir], { env: { WXHOOKS_CONFIG_DIR: store } });
    expect(text.stdout).not.toContain('wm-ping');
    expect(text.stderr).toContain('1 test delivery (a ping) is left out of the runs.');
  });

  it('the tracker leaves a test delivery out, whatever else it says', () => {
    const t = new RunTracker({ expect: [0], needInit: false });
    expect(t.add({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 0, test: true })).toBeUndefined();
    expect(t.runs()).toEqual([]);
    expect(t.add({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 0 })?.counted).toBe(true);
  });
});

describe('bad input: exit 2, naming the part', () => {
  it.each([
    [['--expect-hours', ''], '"" is empty'],
    [['--expect-hours', '24-0'], '"24-0" is reversed'],
    [['--expect-hours', '0-24/0'], '"0-24/0" has a step of 0'],
    [['--expect-hours', '0-390/6'], '"0-390/6" goes past hour 384'],
    [['--expect-hours', '0-24/6,x'], '"x" is not an hour'],
  ])('--until-run wm-6 %j', async (args, says) => {
    const r = await runInProcess(['listen', '--secret-env', 'S', '--until-run', 'wm-6', ...args], { env: { S: 'whsec_eA==' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(says);
  });

  it('an @INIT that is not an ISO time; --until-run without --expect-hours', async () => {
    const bad = await runInProcess(['listen', '--secret-env', 'S', '--until-run', 'wm-6@yesterday', '--expect-hours', '0-6'], { env: { S: 'whsec_eA==' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('("yesterday") must be an ISO 8601 time');
    const none = await runInProcess(['listen', '--secret-env', 'S', '--until-run'], { env: { S: 'whsec_eA==' } });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('--until-run needs --expect-hours');
  });
});

describe('end to end with the emulator', () => {
  let emu: Cli;
  let env: Record<string, string>;
  let webhook: string;
  let port: number;
  const INIT = '2026-11-22T00:00:00Z';

  beforeAll(async () => {
    const dir = tempDir();
    emu = startCliInProcess(['emulator', '--port', '0', '--json', '--retry-delays', '100ms'], { WXHOOKS_CONFIG_DIR: dir });
    const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
    env = { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir };
    port = await freePort();
    const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available', '--json'], {
      env,
    });
    webhook = (JSON.parse(created.stdout) as { id: string }).id;
  });
  afterAll(() => emu.stop());

  /** `listen` in this process, on a clock the test moves (to run out a --within without waiting for it). */
  async function listening(args: string[], saveDir?: string) {
    const clock = manualClock(Date.now());
    const run = startInProcess(['listen', '--port', String(port), '--json', '--webhook', webhook, ...(saveDir ? ['--save-dir', saveDir] : []), ...args], { env, clock });
    await run.waitFor<{ event?: string }>((v) => v.event === 'listening');
    return {
      clock,
      exited: run.done,
      get lines() {
        return run.io.stdout.text.split('\n').filter(Boolean);
      },
      stderr: () => run.io.stderr.text,
    };
  }

  const trigger = (args: string[]) => runCli(['trigger', 'run', '--model', 'wm-6', '--init-time', INIT, ...args], { env });

  it('a shuffled run with a repeat completes: exit 0; the NDJSON events in order', async () => {
    const proc = await listening(['--until-run', `wm-6@${INIT}`, '--expect-hours', '0-24/6']);
    expect((await trigger(['--hours', '0-24/6', '--shuffle', '--repeat-hours', '6'])).code).toBe(0);
    expect(await proc.exited).toBe(0);
    const events = proc.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const progress = events.filter((e) => e.event === 'run_progress');
    expect(progress).toHaveLength(6); // five hours and the initialisation event, each once (the repeat is not counted)
    expect(progress.map((p) => (p.have as number[]).length)).toEqual([1, 2, 3, 4, 5, 5]);
    expect(progress.at(-1)).toMatchObject({ model: 'wm-6', initialization_time: INIT, missing: [], init_event: true, complete: true });
    expect(events.at(-1)).toMatchObject({ event: 'run_complete', complete: true });
    // each progress event follows the delivery it counted
    const firstProgress = events.findIndex((e) => e.event === 'run_progress');
    expect(events[firstProgress - 1]).toMatchObject({ outcome: 'accepted', type: 'forecast_hour.available' });
  });

  it('two skipped hours: exit 9 at --within, naming exactly those hours', async () => {
    const proc = await listening(['--until-run', 'wm-6', '--expect-hours', '0-48/6', '--within', '3s']);
    expect((await trigger(['--hours', '0-48/6', '--skip-hours', '18,36'])).code).toBe(0);
    proc.clock.advance(3000);
    expect(await proc.exited).toBe(9);
    expect(proc.stderr()).toContain(`Run wm-6 ${INIT} is not complete after 3s (7/9 hours): missing +18h, +36h.`);
  });

  it("another model's run interleaved is shown but not counted", async () => {
    const proc = await listening(['--until-run', `wm-6@${INIT}`, '--expect-hours', '0-12/6', '--no-init-event', '--within', '5s']);
    await runCli(['trigger', 'run', '--model', 'wm-9', '--init-time', INIT, '--hours', '0-12/6'], { env });
    await trigger(['--hours', '0-6/6']);
    await runCli(['trigger', 'run', '--model', 'wm-6', '--init-time', '2026-11-22T06:00:00Z', '--hours', '12'], { env });
    proc.clock.advance(5000);
    expect(await proc.exited).toBe(9);
    expect(proc.stderr()).toContain('missing +12h');
    const events = proc.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    expect(events.filter((e) => e.outcome === 'accepted' && e.model === 'wm-9').length).toBeGreaterThan(0);
    expect(events.filter((e) => e.event === 'run_progress').every((e) => e.model === 'wm-6' && e.initialization_time === INIT)).toBe(true);
    // and the run completes when its last hour comes
    const again = await listening(['--until-run', `wm-6@${INIT}`, '--expect-hours', '0-12/6', '--no-init-event']);
    await trigger(['--hours', '0-12/6']);
    expect(await again.exited).toBe(0);
  });

  it('`runs` over a save-dir: each run, its hours, what is missing, and its initialisation event', async () => {
    const saveDir = join(tempDir(), 'saved');
    mkdirSync(saveDir);
    const proc = await listening(['--exit-after', '6'], saveDir);
    await trigger(['--hours', '0-24/6', '--skip-hours', '12']);
    await runCli(['trigger', 'run', '--model', 'wm-9', '--init-time', INIT, '--hours', '0'], { env });
    await proc.exited;
    const r = await runCli(['runs', '--dir', saveDir, '--expect-hours', '0-24/6', '--json'], { env }); // the store folder of the listen that saved them: its mark
    expect(r.code).toBe(0);
    const runs = (JSON.parse(r.stdout) as { runs: Record<string, unknown>[] }).runs;
    expect(runs).toContainEqual({ model: 'wm-6', initialization_time: INIT, hours: [0, 6, 18, 24], init_event: true, missing: [12], complete: false, lags: expect.any(Array) });
    // each hour's delivery lag: received (by listen's clock, the test's here) minus the notification's created_at (#45.6)
    const lags = runs.find((r) => r.model === 'wm-6' && r.initialization_time === INIT)!.lags as { forecast_hour: number; lag_ms: number }[];
    expect(lags.map((l) => l.forecast_hour)).toEqual([0, 6, 18, 24]);
    for (const l of lags) expect(Number.isFinite(l.lag_ms)).toBe(true);
    const text = await runCli(['runs', '--dir', saveDir, '--expect-hours', '0-24/6'], { env });
    expect(text.stdout.split('\n')[0]).toMatch(/^MODEL\tINITIALISED\tHOURS\tMISSING\tINIT EVENT$/);
    expect(text.stdout).toContain(`wm-6\t${INIT}\t+0h, +6h, +18h, +24h\t+12h\tyes`);
  });
});
