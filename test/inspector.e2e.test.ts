import { Agent, request } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { artifact, launchBrowser } from './helpers/browser.js';
import { deliverSigned } from './helpers/deliver.js';
import { runCli, tempDir } from './helpers/cli.js';
import { post } from './helpers/http.js';
import { startCli, type Running } from './helpers/process.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

// The inspector page in a real headless Chromium, against a real `listen --inspect` and the emulator.

let browser: Browser;
let page: Page;
let emu: Running;
let listen: Running;
let app: TestServer;
let env: Record<string, string>;
let inspectorUrl: string;
let listenUrl: string;
let webhookId: string;
/** Models whose next delivery the app refuses, once (to make the emulator retry it). */
const refuseOnce = new Set<string>();

async function publish(body: Record<string, unknown>): Promise<void> {
  const res = await fetch(`${env.WX_BASE_URL}/emulator/v1/events`, { method: 'POST', headers: { authorization: `Bearer ${env.WX_API_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(202);
}

const rowCount = () => page.locator('.row').count();

beforeAll(async () => {
  browser = await launchBrowser();
  app = await startServer((req, res) => {
    const delivery = req.json as { trigger_id?: string; data?: { model?: string } } | undefined;
    const model = delivery?.data?.model ?? '';
    if (refuseOnce.has(model) && !req.headers['x-wxhooks-replay']) {
      refuseOnce.delete(model);
      return sendJson(res, 500, { error: 'not yet' });
    }
    sendJson(res, 200, { stored: delivery?.trigger_id });
  });
  const dir = tempDir();
  emu = startCli(['emulator', '--port', '0', '--json', '--retry-delays', '1100ms'], { WXHOOKS_CONFIG_DIR: dir }); // a retry a second later: a new timestamp, so a new signature
  const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
  env = { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir };
  const port = await freePort();
  const created = await runCli(
    [
      'webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--json',
      '--subscribe', 'forecast_hour.available:response=gridded',
      '--subscribe', 'tropical_cyclones.available:response=tropical_cyclone_track',
      '--subscribe', 'degree_days.available:response=degree_days',
      '--subscribe', 'initialization_time.available',
    ],
    { env },
  );
  webhookId = (JSON.parse(created.stdout) as { id: string }).id;
  listen = startCli(['listen', '--port', String(port), '--json', '--webhook', webhookId, '--forward-to', `${app.url}/hooks`, '--inspect', `127.0.0.1:${await freePort()}`], env);
  const ready = await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
  listenUrl = ready.url;
  inspectorUrl = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url;
  page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  await page.goto(inspectorUrl);
  await page.locator('.state.live').waitFor();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await listen?.stop();
  await emu?.stop();
  await app?.close();
});

describe('the inspector page', () => {
  it('deliveries appear live, as they arrive', async () => {
    expect(await rowCount()).toBe(0);
    await publish({ type: 'forecast_hour.available', model: 'wm-6', forecast_hour: 6 });
    await publish({ type: 'tropical_cyclones.available', model: 'wm-6' });
    await publish({ type: 'degree_days.available', model: 'wm-6' });
    await page.waitForFunction(() => document.querySelectorAll('.row').length >= 3);
    await page.screenshot({ path: artifact('inspector-live.png') });
  });

  it('a gridded response draws a heat map, a cyclone track its track, degree days their bars: checked on the page', async () => {
    await page.locator('.row', { hasText: 'forecast_hour.available' }).first().click();
    const grid = page.locator('[data-chart="gridded"]');
    await grid.waitFor();
    expect(await grid.getAttribute('data-cells')).toBe('12'); // the emulator's 3 × 4 grid
    // the canvas is drawn: many of its pixels are neither white nor blank
    const coloured = await grid.locator('canvas').evaluate((c: HTMLCanvasElement) => {
      const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i + 3]! > 0 && !(data[i]! > 240 && data[i + 1]! > 240 && data[i + 2]! > 240)) n++;
      return n;
    });
    expect(coloured).toBeGreaterThan(1000);
    await page.screenshot({ path: artifact('inspector-gridded.png') });

    await page.locator('.row', { hasText: 'tropical_cyclones.available' }).first().click();
    const track = page.locator('[data-chart="tropical_cyclone_track"]');
    await track.waitFor();
    expect(await track.getAttribute('data-points')).toBe('5');
    const red = await track.locator('canvas').evaluate((c: HTMLCanvasElement) => {
      const data = c.getContext('2d')!.getImageData(0, 0, c.width, c.height).data;
      let n = 0;
      for (let i = 0; i < data.length; i += 4) if (data[i]! > 150 && data[i + 1]! < 80 && data[i + 2]! < 80) n++;
      return n;
    });
    expect(red).toBeGreaterThan(50);
    await page.screenshot({ path: artifact('inspector-track.png') });

    await page.locator('.row', { hasText: 'degree_days.available' }).first().click();
    const bars = page.locator('[data-chart="degree_days"]');
    await bars.waitFor();
    expect(await bars.getAttribute('data-bars')).toBe('3');
    expect(await bars.locator('.uplot').count()).toBe(1);
  });

  it('the body is a collapsible JSON tree; the verification and the headers are shown', async () => {
    await page.locator('.row', { hasText: 'degree_days.available' }).first().click();
    await expect.poll(() => page.locator('.verdict').textContent()).toContain('Verified: layout standard');
    expect(await page.locator('#detail table.kv').last().textContent()).toContain('webhook-signature');
    expect(await page.locator('.tree summary').count()).toBeGreaterThan(2);
  });

  it('a refused delivery shows its reason and hint', async () => {
    const body = JSON.stringify({ type: 'forged', trigger_id: 'trg_forged' });
    expect((await post(listenUrl, { 'Trigger-Id': 'trg_forged', 'Webhook-Timestamp': String(Math.floor(Date.now() / 1000)), 'Webhook-Signature': `v1,${Buffer.alloc(32, 1).toString('base64')}` }, body)).status).toBe(401);
    const row = page.locator('.row[data-outcome="unverified"]').first();
    await row.waitFor();
    await row.click();
    await expect.poll(() => page.locator('.verdict').textContent()).toContain('No signature matched');
    expect(await page.locator('.verdict .hint').textContent()).toContain('secret');
  });

  it('the filters: by type, by outcome, by text', async () => {
    await page.selectOption('select[aria-label="type"]', 'degree_days.available');
    await expect.poll(() => rowCount()).toBe(1);
    await page.selectOption('select[aria-label="type"]', '');
    await page.selectOption('select[aria-label="outcome"]', 'refused');
    await expect.poll(() => page.locator('.row[data-outcome="accepted"]').count()).toBe(0);
    expect(await page.locator('.row[data-outcome="unverified"]').count()).toBeGreaterThanOrEqual(1);
    await page.selectOption('select[aria-label="outcome"]', '');
    await page.fill('input[aria-label="search"]', 'tropical');
    await expect.poll(() => rowCount()).toBe(1);
    await page.fill('input[aria-label="search"]', '');
    await expect.poll(() => rowCount()).toBeGreaterThanOrEqual(4);
  });

  it('the attempts of one trigger are grouped, with what changed between them', async () => {
    // the app refuses the first delivery of this model: the emulator retries it, signed afresh
    refuseOnce.add('wm-7');
    await publish({ type: 'forecast_hour.available', model: 'wm-7', forecast_hour: 0 });
    const failed = await listen.waitFor<{ outcome?: string; model?: string; trigger_id: string }>((v) => v.outcome === 'forward_failed' && v.model === 'wm-7');
    await listen.waitFor<{ outcome?: string; trigger_id?: string }>((v) => v.outcome === 'accepted' && v.trigger_id === failed.trigger_id);
    await page.waitForFunction((t) => [...document.querySelectorAll('.row')].filter((r) => r.textContent!.includes(t)).length >= 2, failed.trigger_id);
    await page.locator('.row', { hasText: failed.trigger_id }).first().click();
    const attempts = page.locator('table.diff');
    await attempts.waitFor();
    const text = (await attempts.textContent())!;
    expect(text).toContain('502 forward_failed');
    expect(text).toContain('200 accepted');
    expect(text).toContain('changed:'); // the timestamp and the signature of a retry are new
    expect(text).toContain('identical'); // the body is not
    await page.screenshot({ path: artifact('inspector-attempts.png') });
  });

  it('replay re-sends a delivery to the app, signed afresh, and shows its answer in place; it is marked a replay', async () => {
    await page.locator('.row[data-outcome="accepted"]', { hasText: 'degree_days.available' }).first().click();
    const before = app.requests.length;
    await page.click('button:has-text("Replay to your app")');
    const answer = page.locator('#replay-answer');
    await expect.poll(() => answer.textContent()).toContain('your app answered 200');
    const sent = app.requests.slice(before).find((r) => r.headers['x-wxhooks-replay'] === '1');
    expect(sent).toBeDefined();
    expect(Math.abs(Number(sent!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(30);
    await page.locator('.row', { hasText: 'replay ↻' }).first().waitFor();
    await page.screenshot({ path: artifact('inspector-replay.png') });
  });

  it('the runs view: for each run, which forecast hours arrived', async () => {
    await page.click('nav button:has-text("Runs")');
    const run = page.locator('.run').first();
    await run.waitFor();
    expect(await page.locator('.run .cell.in').count()).toBeGreaterThanOrEqual(2);
    await page.screenshot({ path: artifact('inspector-runs.png') });
    await page.click('nav button:has-text("Deliveries")');
  });

  it('reconnects by itself, and fills in what it missed', async () => {
    // the page's stream is cut as a network would cut it; the browser's EventSource reconnects
    const count = await rowCount();
    await page.context().setOffline(true);
    await publish({ type: 'degree_days.available', model: 'wm-8' });
    await page.waitForTimeout(300);
    await page.context().setOffline(false);
    await page.waitForFunction((n) => document.querySelectorAll('.row').length > n, count, { timeout: 15_000 });
  });
});

describe('the inspector refuses what is not its page', () => {
  const raw = (path: string, headers: Record<string, string>, method = 'GET') =>
    new Promise<number>((resolve, reject) => {
      const u = new URL(inspectorUrl);
      const req = request({ host: u.hostname, port: u.port, path, method, headers }, (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      });
      req.on('error', reject);
      req.end();
    });

  it('a foreign Host (DNS rebinding) gets nothing; the API without the token gets nothing; a replay from another site is refused', async () => {
    expect(await raw('/', { host: 'evil.example:8789' })).toBe(421);
    expect(await raw('/api/deliveries', { host: new URL(inspectorUrl).host })).toBe(403);
    const token = new URL(inspectorUrl).searchParams.get('token')!;
    // the page itself does not carry it: it reads it from its own address
    expect(await page.evaluate(() => document.documentElement.outerHTML)).not.toContain(token);
    expect(await raw(`/api/deliveries?token=${token}`, { host: new URL(inspectorUrl).host })).toBe(200);
    expect(await raw('/api/deliveries/1/replay', { host: new URL(inspectorUrl).host, 'x-wxhooks-token': token, 'sec-fetch-site': 'cross-site', origin: 'https://evil.example' }, 'POST')).toBe(403);
    expect(await raw('/api/deliveries/1/replay', { host: new URL(inspectorUrl).host }, 'POST')).toBe(403);
    // the page never holds the webhook's secret
    const html = await (await fetch(inspectorUrl)).text();
    const secret = (await runCli(['secret', 'show', webhookId], { env })).stdout.trim();
    expect(secret).toMatch(/^whsec_/);
    expect(html).not.toContain(secret);
  });});

// last: the flood pushes everything before it out of the page's list
describe('the inspector page under load', () => {
  it('at 1,000 deliveries a second the page keeps up, draws only the rows in view, and lists at most --history', async () => {
    const secret = (await runCli(['secret', 'show', webhookId], { env })).stdout.trim();
    const agent = new Agent({ keepAlive: true, maxSockets: 20 });
    const sent: Promise<number>[] = [];
    const N = 3000;
    for (let tick = 0; tick < N / 100; tick++) {
      for (let i = tick * 100; i < (tick + 1) * 100; i++) sent.push(deliverSigned(listenUrl, agent, secret, `trg_flood_${i}`, { model: 'flood', forecast_hour: i % 48 }));
      if (tick === 15) {
        // halfway: the page still answers a click, with the delivery's detail
        await page.locator('.row', { hasText: 'trg_flood_' }).first().click();
        await expect.poll(() => page.locator('#detail').textContent()).toMatch(/trg_flood_\d+/);
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    expect((await Promise.all(sent)).filter((status) => status !== 200)).toEqual([]);
    agent.destroy();
    // the newest on top, the list as long as the history (500 by default), and only the rows in view drawn
    await page.locator('.row', { hasText: `trg_flood_${N - 1}` }).first().waitFor();
    await expect.poll(() => page.evaluate(() => (document.querySelector('#list .rows') as HTMLElement).style.height)).toBe(`${500 * 28}px`);
    const drawn = await rowCount();
    expect(drawn).toBeGreaterThan(10);
    expect(drawn).toBeLessThan(60);
    expect(await page.locator('.row').first().textContent()).toContain(`trg_flood_${N - 1}`);
    await page.screenshot({ path: artifact('inspector-flood.png') });
  });
});
