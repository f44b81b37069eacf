import type { Browser } from 'playwright-core';
import { afterAll, expect, it } from 'vitest';
import { artifact, launchBrowser } from '../helpers/browser.js';
import { post } from '../helpers/http.js';
import { startCli, type Running } from '../helpers/process.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { startServer } from '../helpers/server.js';

// The inspector's Figures tab in a real Chromium: the counters of this run of listen (per outcome, the
// app's answers with their p50 and p95, the delivery lag), as a person opens it.

const stops: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const s of stops.reverse()) await s();
});

it("the Figures tab shows this run's counts per outcome, the app's answers and the lag, and follows new deliveries", async () => {
  const app = await startServer((req, res) => {
    res.writeHead((req.json as { trigger_id?: string })?.trigger_id === 'trg_fails' ? 500 : 200);
    res.end('ok');
  });
  stops.push(() => app.close());
  const listen: Running = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--forward-to', app.url, '--inspect', '127.0.0.1:0'], { S: TEST_SECRET });
  stops.push(() => listen.stop());
  const port = (await listen.waitFor<{ event?: string; port: number }>((e) => e.event === 'listening')).port;
  const link = (await listen.waitFor<{ event?: string; url: string }>((e) => e.event === 'inspector')).url;
  const send = async (t: string) => {
    const d = signed(t, { body: { created_at: new Date(Date.now() - 20_000).toISOString() } });
    await post(`http://127.0.0.1:${port}/`, d.headers, d.body);
  };
  await send('trg_one');
  await send('trg_fails');

  const browser: Browser = await launchBrowser();
  stops.push(() => browser.close());
  const page = await browser.newPage();
  await page.goto(link);
  await page.getByRole('button', { name: 'Figures' }).click();
  const view = page.getByRole('region', { name: 'figures of this run' });
  await expect.poll(() => view.textContent()).toContain('2 requests answered');
  const text = (await view.textContent())!;
  expect(text).toMatch(/accepted\s*1/);
  expect(text).toMatch(/app failed\s*1/);
  expect(text).toMatch(/2xx\s*1/);
  expect(text).toMatch(/5xx\s*1/);
  expect(text).toMatch(/deliveries\s*1/); // the lag of the one new delivery handed on
  await page.screenshot({ path: artifact('inspector-figures.png') });

  // a new delivery while the tab is open: its figures follow
  await send('trg_two');
  await expect.poll(() => view.textContent()).toContain('3 requests answered');
}, 120_000);
