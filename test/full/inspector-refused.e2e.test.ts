import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { launchBrowser } from '../helpers/browser.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startCli, type Running } from '../helpers/process.js';

// A refused request in the inspector page's live list, with the set-up it was reported with, step by
// step as a person runs it: the emulator with its export line, a webhook of two subscriptions, an app,
// `listen --inspect` opened by the link it prints (text, not --json), a delivery, then a forged one.

let browser: Browser;
let page: Page;
let emu: Running;
let listen: Running;
let app: Server;
let env: Record<string, string>;
let listenPort: number;

/** The first match of `pattern` in what `process` printed on `where`, once it is printed. */
async function printed(process: Running, pattern: RegExp, where: 'stdout' | 'stderr'): Promise<RegExpExecArray> {
  const stream = where === 'stdout' ? process.child.stdout : process.child.stderr;
  for (;;) {
    // stdout's lines are split as they come; stderr is read whole
    const found = pattern.exec(where === 'stdout' ? process.lines.join('\n') : process.stderr());
    if (found) return found;
    if (process.child.exitCode !== null) throw new Error(`exited before printing ${pattern}\nstdout: ${process.lines.join('\n')}\nstderr: ${process.stderr()}`);
    await new Promise<void>((resolve) => {
      const done = () => {
        stream.off('data', done);
        process.child.off('exit', done);
        setImmediate(resolve); // after the helper's own listener has taken the chunk
      };
      stream.on('data', done);
      process.child.on('exit', done);
    });
  }
}

beforeAll(async () => {
  browser = await launchBrowser();
  const dir = tempDir();
  emu = startCli(['emulator', '--port', '0'], { WXHOOKS_CONFIG_DIR: dir });
  const exported = await printed(emu, /export WX_BASE_URL=(\S+) WX_API_KEY=(\S+)/, 'stdout');
  env = { WX_BASE_URL: exported[1]!, WX_API_KEY: exported[2]!, WXHOOKS_CONFIG_DIR: dir };
  listenPort = await freePort();
  const created = await runCli(
    [
      'webhook',
      'create',
      '--url',
      `http://127.0.0.1:${listenPort}/`,
      '--subscribe',
      'forecast_hour.available:model=wm-6;response=gridded',
      '--subscribe',
      'tropical_cyclones.available:response=tropical_cyclone_track',
      '--json',
    ],
    { env },
  );
  const id = (JSON.parse(created.stdout) as { id: string }).id;
  app = createServer((req, res) => req.resume().on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')));
  await new Promise<void>((resolve) => app.listen(0, '127.0.0.1', resolve));
  const appPort = (app.address() as { port: number }).port;
  const inspectPort = await freePort();
  listen = startCli(['listen', '--port', String(listenPort), '--webhook', id, '--inspect', `127.0.0.1:${inspectPort}`, '--forward-to', `http://127.0.0.1:${appPort}/hook`], env);
  const link = (await printed(listen, /Inspector: (?:\u001b\[[0-9;]*m)*(http\S+?)(?:\u001b\[[0-9;]*m)*(?:\s|$)/, 'stderr'))[1]!;
  const context = await browser.newContext({ viewport: { width: 1400, height: 900 } });
  page = await context.newPage();
  await page.goto(link);
  await page.locator('.state.live').waitFor();
}, 90_000);

afterAll(async () => {
  await browser?.close();
  await listen?.stop();
  await emu?.stop();
  await new Promise((resolve) => app?.close(resolve));
});

describe('the inspector page, beside a forged request', () => {
  it('shows the 401 in its live list, as listen prints it (#41.8)', async () => {
    const pageErrors: string[] = [];
    page.on('pageerror', (err) => pageErrors.push(err.message));
    expect((await runCli(['trigger', 'forecast_hour.available', '--model', 'wm-6', '--forecast-hour', '6'], { env })).code).toBe(0);
    await page.locator('.row', { hasText: 'forecast_hour.available' }).first().waitFor();

    const res = await fetch(`http://127.0.0.1:${listenPort}/`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'trigger-id': 'trg_forged_1',
        'webhook-timestamp': String(Math.floor(Date.now() / 1000)),
        'webhook-signature': `v1,${randomBytes(32).toString('base64')}`,
      },
      body: '{"type":"forecast_hour.available","subscription_id":"1","trigger_id":"trg_forged_1"}',
    });
    expect(res.status).toBe(401);
    await printed(listen, /✗ 401 .*claims trg_forged_1/, 'stdout');

    const refused = page.locator('.row', { hasText: 'trg_forged_1' });
    await refused.waitFor({ timeout: 8_000 });
    expect(await refused.locator('.status').textContent()).toBe('401');
    expect(await refused.textContent()).toContain('not verified');
    expect(await page.locator('#app').textContent()).toContain('401');
    expect(pageErrors).toEqual([]);
  }, 60_000);
});
