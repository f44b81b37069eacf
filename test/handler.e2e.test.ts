import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { Webhooks, createNodeMiddleware } from '../src/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startCliInProcess, type Cli } from './helpers/process.js';

// End to end: the emulator delivers a model run through `listen --forward-to` to an app made with
// createNodeMiddleware; its handler fails once (the service retries), and each forecast hour reaches
// its typed handler once.

const running: Cli[] = [];
afterAll(async () => {
  for (const r of running.reverse()) await r.stop();
});

it('a model run, emulator → listen → your app: each forecast hour reaches its typed handler once, retries included', async () => {
  const dir = tempDir();
  const emu = startCliInProcess(['emulator', '--port', '0', '--json', '--retry-delays', '50ms,50ms,50ms'], { WXHOOKS_CONFIG_DIR: dir });
  running.push(emu);
  const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
  const env = { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir };
  const listenPort = await freePort();
  const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${listenPort}/`, '--json', '--subscribe', 'forecast_hour.available:response=gridded'], { env });
  const webhook = (JSON.parse(created.stdout) as { id: string; secret: string }).id;
  const secret = (await runCli(['secret', 'show', webhook], { env })).stdout.trim();

  // the app, as a user writes it
  const webhooks = new Webhooks({ secret });
  const handled: number[] = [];
  let attempts = 0;
  let failedOnce = false;
  webhooks.on('forecast_hour.available', async (event) => {
    attempts++;
    const { forecast_hour, response } = event.payload.data;
    if (forecast_hour === 6 && !failedOnce) {
      failedOnce = true;
      throw new Error('the database blinked');
    }
    if (response?.type === 'gridded') expect(response.values.length).toBe(response.latitudes.length);
    handled.push(forecast_hour);
  });
  const app = createServer(createNodeMiddleware(webhooks, { path: '/webhooks' }));
  await new Promise<void>((r) => app.listen(0, '127.0.0.1', r));
  try {
    const appUrl = `http://127.0.0.1:${(app.address() as AddressInfo).port}/webhooks`;
    const listen = startCliInProcess(['listen', '--port', String(listenPort), '--json', '--webhook', webhook, '--forward-to', appUrl], env);
    running.push(listen);
    await listen.waitFor<{ event?: string }>((v) => v.event === 'listening');

    const init = '2026-11-24T00:00:00Z';
    for (const hour of [0, 6, 12, 18]) {
      const res = await fetch(`${info.base_url}/emulator/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${info.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'forecast_hour.available', model: 'wm-e2e', initialization_time: init, forecast_hour: hour }),
      });
      expect(res.status).toBe(202);
    }
    // listen reports each accepted delivery: four, one of them after a 502 (the app's 500) and the emulator's retry
    const accepted = new Set<string>();
    await listen.waitFor<{ outcome?: string; model?: string; trigger_id?: string }>((v) => (v.outcome === 'accepted' && v.model === 'wm-e2e' && accepted.add(v.trigger_id!), accepted.size === 4));
    const outcomes = listen.lines
      .map((l) => JSON.parse(l) as { outcome?: string; model?: string })
      .filter((e) => e.model === 'wm-e2e')
      .map((e) => e.outcome);
    expect(outcomes.filter((o) => o === 'forward_failed')).toHaveLength(1);
    expect(handled.sort((a, b) => a - b)).toEqual([0, 6, 12, 18]);
    expect(attempts).toBe(5);
  } finally {
    await new Promise<void>((r) => (app.closeAllConnections(), app.close(() => r())));
  }
}, 60_000);
