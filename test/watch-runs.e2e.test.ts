import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import type { RunningEmulator } from '../src/emulator/server.js';
import { publishingEmulator, type PublishingEmulator } from './helpers/published.js';
import type { Clock } from '../src/util/clock.js';
import { latestCycle } from '../src/vocabulary.js';
import { tempDir } from './helpers/cli.js';
import { manualClock } from './helpers/clock.js';
import { runInProcess, startInProcess } from './helpers/context.js';

// Late runs as they happen (#45.6): `listen --watch-runs` reports a forecast hour available for longer than
// --late-after and not delivered, within one interval of it becoming late, once, and not an on-time one;
// --on-late runs with its details; the inspector's Runs view lists it, with the delivery lag of each hour
// that came; `runs watch` does the same beside a listen. The clocks are the test's: nothing waits on time.

const INIT = latestCycle();
const MODEL = 'wm-watch';
const OTHER = 'wm-watch-2';
let emu: RunningEmulator;
let published: PublishingEmulator;

beforeAll(async () => {
  published = await publishingEmulator([10]);
  emu = published.emu;
});
afterAll(() => emu.close());

async function publish(event: Record<string, unknown>, model = MODEL): Promise<string> {
  return (await published.publish({ model, initialization_time: INIT, ...event })).trigger;
}

/** The test's clock, which also says when the watch has finished a look and waits for the next (its n-th `after`). */
function watchedClock(): Clock & { advance(ms: number): void; waits(n: number): Promise<void> } {
  const clock = manualClock(Date.now());
  let calls = 0;
  const wake = new Set<() => void>();
  return {
    ...clock,
    after(ms) {
      calls++;
      for (const w of wake) w();
      return clock.after(ms);
    },
    waits: (n) =>
      new Promise<void>((resolve) => {
        const look = () => {
          if (calls < n) return;
          wake.delete(look);
          resolve();
        };
        wake.add(look);
        look();
      }),
  };
}

async function webhookAt(env: Record<string, string>, port: number, model = MODEL): Promise<string> {
  const created = await runInProcess(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', `forecast_hour.available:model=${model}`, '--json'], { env });
  expect(created.code, created.stderr).toBe(0);
  return (JSON.parse(created.stdout) as { id: string }).id;
}

describe('listen --watch-runs', () => {
  it('reports a late hour within one interval, once, and not an on-time one; --on-late runs with its details; the Runs view lists it, and the lag of each hour that came', async () => {
    const dir = tempDir('wxhooks-cfg-');
    const env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: dir };
    const port = await freePort();
    const webhook = await webhookAt(env, port);
    await publish({ type: 'forecast_hour.available', forecast_hour: 6 }); // while nothing listens: never delivered
    const clock = watchedClock();
    const onLate = join(tempDir(), 'late.txt');
    const listen = startInProcess(
      [
        'listen',
        '--port',
        String(port),
        '--webhook',
        webhook,
        '--json',
        // the test's clock runs ahead of the emulator's once it is moved: deliveries still verify
        '--tolerance',
        '3600',
        '--inspect',
        '127.0.0.1:0',
        '--watch-runs',
        '--watch-interval',
        '1s',
        '--late-after',
        '10m',
        '--on-late',
        `printf '%s %s\\n' "$WXHOOKS_LATE_MODEL" "$WXHOOKS_LATE_FORECAST_HOUR" >> '${onLate}'`,
      ],
      { env, clock },
    );
    try {
      await listen.waitFor<{ event?: string }>((v) => v.event === 'listening');
      await publish({ type: 'forecast_hour.available', forecast_hour: 0 }); // on time
      await listen.waitFor<{ outcome?: string }>((v) => v.outcome === 'accepted');
      await clock.waits(1); // the first look is done: +6h is out for less than --late-after, not late yet
      const late = () => listen.lines().filter((l) => (l as { event?: string }).event === 'late_hour');
      expect(late()).toEqual([]);
      clock.advance(10 * 60_000 + 1000);
      await clock.waits(2); // the next look
      await listen.waitFor<{ event?: string }>((v) => v.event === 'late_hour');
      expect(late()).toEqual([
        {
          event: 'late_hour',
          type: 'forecast_hour.available',
          subscription_id: expect.any(String),
          model: MODEL,
          initialization_time: INIT,
          forecast_hour: 6,
          created_at: expect.any(String),
          late_ms: expect.any(Number),
        },
      ]);
      expect((late()[0] as { late_ms: number }).late_ms).toBeGreaterThanOrEqual(10 * 60_000);
      clock.advance(1000);
      await clock.waits(3);
      // said once: what the third look said is written before what listen reports next
      await publish({ type: 'forecast_hour.available', forecast_hour: 18 });
      await listen.waitFor<{ outcome?: string; forecast_hour?: number }>((v) => v.outcome === 'accepted' && v.forecast_hour === 18);
      expect(late()).toHaveLength(1);
      // --on-late ran, with the details in its environment
      await expect.poll(() => readFileSync(onLate, 'utf8'), { interval: 20 }).toBe(`${MODEL} 6\n`);

      const { url } = await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector');
      const u = new URL(url);
      const runs = (await (await fetch(`${u.origin}/api/runs?token=${u.searchParams.get('token')}`)).json()) as {
        runs: { model: string; hours: number[]; lags?: { forecast_hour: number; lag_ms: number }[] }[];
        late: { forecast_hour: number }[];
      };
      expect(runs.late.map((l) => l.forecast_hour)).toEqual([6]);
      const run = runs.runs.find((r) => r.model === MODEL)!;
      expect(run.hours).toEqual([0, 18]);
      expect(run.lags).toEqual([
        { forecast_hour: 0, lag_ms: expect.any(Number) },
        { forecast_hour: 18, lag_ms: expect.any(Number) },
      ]);
      // (what the lags are is the tracker's arithmetic, tested on its own: here the test's clock stands still, then jumps)
    } finally {
      await listen.stop();
    }
  });

  it('runs watch says the same beside a listen, over its store; the flags go with --watch-runs', async () => {
    const dir = tempDir('wxhooks-cfg-');
    const env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: dir };
    const webhook = await webhookAt(env, await freePort(), OTHER);
    await publish({ type: 'forecast_hour.available', forecast_hour: 12 }, OTHER);
    const clock = watchedClock();
    const watch = startInProcess(['runs', 'watch', '--webhook', webhook, '--watch-interval', '1s', '--late-after', '5m', '--json'], { env, clock });
    try {
      await watch.waitFor<{ event?: string }>((v) => v.event === 'watching');
      await clock.waits(1);
      clock.advance(5 * 60_000 + 1000);
      const line = await watch.waitFor<{ event?: string; forecast_hour?: number }>((v) => v.event === 'late_hour');
      expect(line).toMatchObject({ model: OTHER, forecast_hour: 12, initialization_time: INIT });
    } finally {
      expect(await watch.stop()).toBe(130);
    }
    const bad = await runInProcess(['listen', '--secret-env', 'S', '--late-after', '1m'], { env: { S: 'whsec_eA==' } });
    expect(bad.code).toBe(2);
    expect(bad.stderr).toContain('go with --watch-runs');
    const noHook = await runInProcess(['listen', '--secret-env', 'S', '--watch-runs'], { env: { S: 'whsec_eA==' } });
    expect(noHook.code).toBe(2);
    expect(noHook.stderr).toContain('--watch-runs asks the forecast API');
  });
});
