import { afterAll, expect, it } from 'vitest';
import { get, post } from './helpers/http.js';
import { startMcp, type McpSession } from './helpers/mcp.js';
import { samples } from './helpers/otlp.js';
import { startCli, type Running } from './helpers/process.js';
import { signed, TEST_SECRET } from './helpers/receiver.js';
import { startServer, type TestServer } from './helpers/server.js';
import { tempDir } from './helpers/cli.js';

// The counters of a run of listen, three ways: the inspector's /api/metrics (its Figures tab), wxhooks
// mcp's metrics tool, and --metrics' Prometheus page: the same figures, from the built binaries.

const stops: (() => Promise<unknown>)[] = [];
afterAll(async () => {
  for (const s of stops.reverse()) await s();
});

it("the inspector's Figures and MCP's metrics tool say what /metrics says", async () => {
  const app: TestServer = await startServer((req, res) => {
    res.writeHead((req.json as { trigger_id?: string })?.trigger_id === 'trg_app_fails' ? 503 : 200);
    res.end('ok');
  });
  stops.push(() => app.close());
  const dir = tempDir();
  const listen: Running = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--forward-to', app.url, '--inspect', '127.0.0.1:0', '--metrics', '0'], {
    S: TEST_SECRET,
    WXHOOKS_CONFIG_DIR: dir,
  });
  stops.push(() => listen.stop());
  const port = (await listen.waitFor<{ event?: string; port: number }>((e) => e.event === 'listening')).port;
  const metrics = (await listen.waitFor<{ event?: string; url: string }>((e) => e.event === 'metrics')).url;
  const inspector = (await listen.waitFor<{ event?: string; url: string }>((e) => e.event === 'inspector')).url;
  for (const t of ['trg_one', 'trg_app_fails']) {
    const d = signed(t, { body: { created_at: new Date(Date.now() - 5000).toISOString() } });
    await post(`http://127.0.0.1:${port}/`, d.headers, d.body);
  }
  await post(`http://127.0.0.1:${port}/`, {}, '{}');
  await listen.waitFor<{ outcome?: string }>((e) => e.outcome === 'bad_request');

  const page = await (await fetch(inspector.replace('/?token=', '/api/metrics?token='))).json();
  expect(page.outcomes).toEqual({ accepted: 1, forward_failed: 1, bad_request: 1 });
  expect(page.app).toMatchObject({ count: 2, by_class: { '2xx': 1, '5xx': 1 } });
  expect(page.refusals).toEqual({ missing_header: 1 });
  expect(page.lag.count).toBe(1);

  const agent: McpSession = await startMcp(['--listen', inspector], { WXHOOKS_CONFIG_DIR: dir });
  stops.push(() => agent.close());
  const tool = await agent.call('metrics');
  expect(tool.ok).toBe(true);
  expect(tool.value).toEqual(page);

  const m = samples((await get(metrics)).body);
  expect(m.get('wxhooks_requests_total{outcome="accepted",type="forecast_hour.available"}')).toBe(page.outcomes.accepted);
  expect(m.get('wxhooks_requests_total{outcome="forward_failed",type="forecast_hour.available"}')).toBe(page.outcomes.forward_failed);
  expect(m.get('wxhooks_app_response_duration_seconds_count{status_class="5xx"}')).toBe(page.app.by_class['5xx']);

  // a folder's history keeps no run's figures: the tool says so, and what to start
  const kept: McpSession = await startMcp(['--save-dir', tempDir()], { WXHOOKS_CONFIG_DIR: tempDir() });
  stops.push(() => kept.close());
  const none = await kept.call('metrics');
  expect(none.ok).toBe(false);
  expect(none.value.message).toContain('keeps no run');
}, 120_000);
