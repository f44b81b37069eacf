import { afterEach, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { doc, shBlocks, swapped, wxhooksCommands } from './helpers/guide.js';
import { get, post } from './helpers/http.js';
import { samples } from './helpers/otlp.js';
import { startCli, type Running } from './helpers/process.js';
import { signed, TEST_SECRET } from './helpers/receiver.js';
import { startServer } from './helpers/server.js';

// docs/production.md's listen line, run as written (its ports and the app's address made the test's):
// the receiver answers on its port, and its own port serves /metrics and /readyz.

const GUIDE = 'docs/production.md';
const cleanups: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

it(`${GUIDE}'s listen --metrics line: deliveries counted on its own port, ready`, async () => {
  const blocks = shBlocks(doc(GUIDE)).filter((b) => b.mark && 'tested' in b.mark && b.mark.tested === 'test/production-guide.test.ts');
  expect(blocks).toHaveLength(1);
  const [listen] = wxhooksCommands(blocks[0]!.body);
  expect(listen).toEqual(['listen', '--secret-env', 'WX_WEBHOOK_SECRET', '--forward-to', 'http://localhost:3000/webhooks', '--metrics', '9464']);
  const app = await startServer((_req, res) => void res.end('ok'));
  cleanups.push(() => app.close());
  const metrics = await freePort();
  const args = [...swapped(listen!, { 'http://localhost:3000': app.url, '9464': String(metrics) }), '--port', '0', '--json'];
  const running: Running = startCli(args, { WX_WEBHOOK_SECRET: TEST_SECRET });
  cleanups.push(() => running.stop());
  const port = (await running.waitFor<{ event?: string; port: number }>((e) => e.event === 'listening')).port;
  expect(await running.waitFor<{ event?: string; url: string }>((e) => e.event === 'metrics')).toMatchObject({ url: `http://127.0.0.1:${metrics}/metrics` });
  const d = signed('trg_guide');
  expect((await post(`http://127.0.0.1:${port}/`, d.headers, d.body)).status).toBe(200);
  expect(app.requests[0]!.path).toBe('/webhooks');
  const m = samples((await get(`http://127.0.0.1:${metrics}/metrics`)).body);
  expect(m.get('wxhooks_requests_total{outcome="accepted",type="forecast_hour.available"}')).toBe(1);
  expect(m.get('wxhooks_app_response_duration_seconds_count{status_class="2xx"}')).toBe(1);
  expect((await get(`http://127.0.0.1:${metrics}/readyz`)).status).toBe(200);
});
