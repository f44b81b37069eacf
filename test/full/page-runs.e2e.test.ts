import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { sharedBrowser } from '../helpers/services.js';
import { startInProcess, type InProcessRun } from '../helpers/context.js';
import { post } from '../helpers/http.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';

// The inspector page counts a run complete by the core's rule (src/delivery/runs.ts), as `listen
// --until-run` does: with --no-init-event, without its initialization_time.available (#33).

let browser: Browser;
let listen: InProcessRun;
beforeAll(async () => {
  browser = await sharedBrowser();
});
afterAll(async () => {
  await listen?.stop();
  await browser?.close();
});

it('listen --no-init-event: the runs view calls a run with every expected hour complete, without its initialization_time.available', async () => {
  const port = await freePort();
  // waiting for wm-6's run; wm-7's is the one the page is looked at for (listen goes on running)
  listen = startInProcess(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--inspect', '127.0.0.1:0', '--until-run', 'wm-6', '--expect-hours', '0-6/6', '--no-init-event'], {
    env: { S: TEST_SECRET },
  });
  const inspector = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url;
  const init = '2026-11-22T00:00:00Z';
  for (const hour of [0, 6]) {
    const d = signed(`trg_page_run_${hour}`, { data: { model: 'wm-7', initialization_time: init, forecast_hour: hour } });
    expect((await post(`http://127.0.0.1:${port}/`, d.headers, d.body)).status).toBe(200);
  }
  const page = await browser.newPage();
  await page.goto(inspector);
  await page.click('nav button:has-text("Runs")');
  const run = page.locator(`.run[data-run="wm-7@${init}"]`);
  await run.waitFor();
  expect(await run.getAttribute('data-complete')).toBe('true');
  expect(await run.textContent()).toContain('complete');
  expect(await page.locator('.runs .hint').first().textContent()).toBe('A run is complete when it has +0h, +6h (as listen --until-run counts it).');
});
