import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { Webhooks, createNodeMiddleware } from '../src/handler/node.js';
import { Webhooks as WebWebhooks, createWebHandler } from '../src/handler/web.js';
import { ListenFigures } from '../src/observe/figures.js';
import { watchListen, type ListenWatch } from '../src/observe/listen.js';
import { receiveWatch } from '../src/observe/receive-watch.js';
import { startSdk, type Tracing } from '../src/observe/sdk.js';
import { Buckets, Counter, MAX_SERIES } from '../src/observe/series.js';
import type { LateNotification, Reconciled } from '../src/delivery/reconcile.js';
import type { RunWatch } from '../src/receiver/reconcile.js';
import type { RelayTarget } from '../src/receiver/relay-target.js';
import type { RelayClientEvent } from '../src/relay/client.js';
import { watchedView, type ListenView } from '../src/tasks/listen.js';
import { BIN, cleanEnv, runCli, tempDir } from './helpers/cli.js';
import { startCli } from './helpers/process.js';
import { get, post } from './helpers/http.js';
import { otlpEnv, samples, startOtlpReceiver, type OtlpReceiver } from './helpers/otlp.js';
import { signed, startTestReceiver, TEST_SECRET, type TestReceiver } from './helpers/receiver.js';
import { startServer, type TestServer } from './helpers/server.js';

// Health, Prometheus metrics and OpenTelemetry spans (src/observe/), in this process: listen's receiving
// with its watch, its port of /healthz, /readyz and /metrics, the spans an in-test OTLP/HTTP receiver gets,
// and the library's span around an app's handler. (Prometheus itself, PostgreSQL and the brokers:
// test/full/observe.test.ts.)

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A body marker and the secret: neither may appear in a metric or a span. */
const MARKER = 'body-marker-5d1f0c';

describe('the series', () => {
  it("reads a quantile from its buckets as Prometheus' histogram_quantile does", () => {
    const b = new Buckets([0.1, 0.5, 1]);
    for (const v of [0.05, 0.2, 0.3, 0.4, 0.7]) b.observe(v);
    // rank 2.5 of 5 falls in (0.1, 0.5], which holds 3 after 1: 0.1 + 0.4 × 1.5 / 3
    expect(b.quantile(0.5)).toBeCloseTo(0.3, 10);
    // rank 4.75 falls in (0.5, 1], which holds 1 after 4
    expect(b.quantile(0.95)).toBeCloseTo(0.875, 10);
    b.observe(9); // above every bound: the highest bound, as Prometheus answers
    expect(b.quantile(0.99)).toBe(1);
    expect(new Buckets([1]).quantile(0.5)).toBeUndefined();
  });

  it('keeps at most MAX_SERIES label sets: past it, what a sender could vary is counted as other', () => {
    const c = new Counter('x_total', 'x', ['type']);
    for (let i = 0; i < MAX_SERIES + 50; i++) c.inc([`t${i}`]);
    expect(c.values.size).toBe(MAX_SERIES + 1);
    expect(c.get(['other'])).toBe(50);
  });

  it('counts replays apart, refusals by reason, the lag of first arrivals only', () => {
    const f = new ListenFigures(0);
    const at = '2026-11-28T06:00:30.000Z';
    f.event({ time: at, outcome: 'accepted', status: 200, type: 'forecast_hour.available', model: 'wm-6', created_at: '2026-11-28T06:00:00Z', forward: { ok: true, status: 204, ms: 12 } });
    f.event({ time: at, outcome: 'duplicate', status: 200, type: 'forecast_hour.available', model: 'wm-6', created_at: '2026-11-28T05:00:00Z' });
    f.event({ time: at, outcome: 'unverified', status: 401, reason: 'no_match' });
    f.event({ time: at, outcome: 'too_large', status: 413 });
    f.event({ time: at, outcome: 'replayed', status: 200, replay_of: 1, forward: { ok: true, status: 200, ms: 5 } });
    const figures = f.figures();
    expect(figures.outcomes).toEqual({ accepted: 1, duplicate: 1, unverified: 1, too_large: 1 });
    expect(figures.refusals).toEqual({ no_match: 1, too_large: 1 });
    expect(figures.app).toMatchObject({ count: 1, by_class: { '2xx': 1 } });
    expect(figures.lag.count).toBe(1);
    expect(figures.lag.p50).toBeGreaterThan(15);
    expect(figures.lag.p50).toBeLessThanOrEqual(30);
  });
});

/** listen's receiving with its watch, as `listen --metrics` runs it: a receiver, its app, its port. */
/** A listen's view that shows nothing. */
function quietView(): ListenView {
  const none = () => undefined;
  return { delivery: none, replayed: none, notice: none, link: none, warn: none, ready: none, checked: none, watchRuns: () => ({}) as RunWatch, waiting: none, closed: none };
}

async function watchedListen(
  o: { tracing?: boolean; relay?: boolean; late?: () => { type: string; model: string }[] } = {},
): Promise<{ r: TestReceiver; app: TestServer; w: ListenWatch; metrics: string }> {
  const app = await startServer((req, res) => {
    res.writeHead((req.json as { trigger_id?: string })?.trigger_id === 'trg_app_fails' ? 500 : 200);
    res.end('ok');
  });
  cleanups.push(() => app.close());
  const w = (await watchListen({ metrics: { host: '127.0.0.1', port: 0 }, tracing: false, inspect: false, env: {}, now: Date.now(), version: 'test', warn: () => undefined }))!;
  if (o.tracing) w.receive = receiveWatch({ figures: w.figures, tracing: true });
  const r = await startTestReceiver({ watch: w.receive, forwardTo: `${app.url}/hooks`, onEvent: (e) => w.event(e) });
  cleanups.push(() => r.close());
  const served = await w.serve({ store: r.store, inflight: r.receiver.inflight, relay: Boolean(o.relay), late: o.late });
  cleanups.push(() => w.close());
  return { r, app, w, metrics: served!.url };
}

describe('listen --metrics, in this process', () => {
  it('counts known deliveries by outcome, the app by status class, the lag, each step; serves /healthz and /readyz', async () => {
    const { r, metrics, w } = await watchedListen();
    const made = new Date(Date.now() - 30_000).toISOString();
    const first = signed('trg_one', { body: { created_at: made }, data: { model: 'wm-6', forecast_hour: 6, note: MARKER } });
    expect((await post(r.url, first.headers, first.body)).status).toBe(200);
    expect((await post(r.url, first.headers, first.body)).status).toBe(200); // a duplicate
    const failing = signed('trg_app_fails');
    expect((await post(r.url, failing.headers, failing.body)).status).toBe(502);
    expect((await post(r.url, {}, `{"note":"${MARKER}"}`)).status).toBe(400); // not a delivery
    const forged = signed('trg_forged', { secret: `whsec_${Buffer.alloc(32, 9).toString('base64')}` });
    expect((await post(r.url, forged.headers, forged.body)).status).toBe(401);
    await r.waitFor(() => r.events.length >= 5);

    const page = await get(`${metrics}/metrics`);
    expect(page.status).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    const m = samples(page.body);
    const fh = 'type="forecast_hour.available"';
    expect(m.get(`wxhooks_requests_total{outcome="accepted",${fh}}`)).toBe(1);
    expect(m.get(`wxhooks_requests_total{outcome="duplicate",${fh}}`)).toBe(1);
    expect(m.get(`wxhooks_requests_total{outcome="forward_failed",${fh}}`)).toBe(1);
    expect(m.get('wxhooks_requests_total{outcome="bad_request",type=""}')).toBe(1);
    expect(m.get('wxhooks_requests_total{outcome="unverified",type=""}')).toBe(1);
    expect(m.get('wxhooks_refusals_total{reason="missing_header"}')).toBe(1);
    expect(m.get('wxhooks_refusals_total{reason="no_match"}')).toBe(1);
    expect(m.get('wxhooks_app_response_duration_seconds_count{status_class="2xx"}')).toBe(1);
    expect(m.get('wxhooks_app_response_duration_seconds_count{status_class="5xx"}')).toBe(1);
    // received 30 s after it was made: in (15, 60]
    expect(m.get(`wxhooks_delivery_lag_seconds_bucket{${fh},model="wm-6",le="15"}`)).toBe(0);
    expect(m.get(`wxhooks_delivery_lag_seconds_bucket{${fh},model="wm-6",le="60"}`)).toBe(1);
    expect(m.get('wxhooks_verification_duration_seconds_count{result="ok"}')).toBe(3);
    expect(m.get('wxhooks_verification_duration_seconds_count{result="failed"}')).toBe(2);
    expect(m.get('wxhooks_store_operation_duration_seconds_count{operation="complete"}')).toBeGreaterThanOrEqual(1);
    expect(m.get('wxhooks_inflight_bytes')).toBe(0);
    expect(m.get('wxhooks_inflight_limit_bytes')).toBe(256 * 1024 * 1024);
    expect(m.get('wxhooks_info{door="listen",version="test"}')).toBe(1);
    expect(m.has('process_cpu_seconds_total')).toBe(true);
    // every name and label by Prometheus' conventions: counters end in _total, durations in _seconds, no trigger id
    for (const name of new Set([...m.keys()].map((k) => k.split('{')[0]!).filter((n) => n.startsWith('wxhooks_')))) expect(name).toMatch(/^wxhooks_[a-z_]+$/);
    expect(page.body).not.toMatch(/trg_one|trg_app_fails|trg_forged/);
    expect(page.body).not.toContain(MARKER);
    expect(page.body).not.toContain(TEST_SECRET);

    // the figures the page and MCP show are these same counts
    const f = w.figures.figures();
    expect(f.outcomes).toMatchObject({ accepted: 1, duplicate: 1, forward_failed: 1, bad_request: 1, unverified: 1 });
    expect(f.app).toMatchObject({ count: 2, by_class: { '2xx': 1, '5xx': 1 } });
    expect(f.lag.count).toBe(1);

    expect(await get(`${metrics}/healthz`)).toMatchObject({ status: 200, body: '{"ok":true}\n' });
    const ready = await get(`${metrics}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body)).toEqual({ ready: true, checks: { store: 'ok' } });
    expect((await get(`${metrics}/other`)).status).toBe(404);
    expect((await post(`${metrics}/metrics`, {}, '')).status).toBe(405);
  });

  it('/readyz is 503, naming what is not ready, while the relay link is down, and 200 once it is back', async () => {
    const { w, metrics } = await watchedListen({ relay: true });
    const down = await get(`${metrics}/readyz`);
    expect(down.status).toBe(503);
    expect(JSON.parse(down.body)).toMatchObject({ ready: false, checks: { store: 'ok', relay: 'not connected yet' }, not_ready: ['relay: not connected yet'] });
    // told through listen's view, as the relay door tells it
    const view = watchedView(quietView(), w);
    const relay = { url: 'http://127.0.0.1:1', channel: 'c' } as RelayTarget;
    view.link({ kind: 'connected', again: false, channel: 'c', inboundUrl: 'http://127.0.0.1:1/in/c', created: true, temporary: false, queued: 0, bytes: 0, refused: 0 } as RelayClientEvent, relay);
    expect((await get(`${metrics}/readyz`)).status).toBe(200);
    view.link({ kind: 'disconnected', reason: 'connection reset' }, relay);
    expect(JSON.parse((await get(`${metrics}/readyz`)).body).checks.relay).toBe('unreachable: connection reset');
  });
});

describe('listen --watch-runs on /metrics', () => {
  it('counts each late notification listen says, and gauges those late at its last look, by type and model', async () => {
    let lateNow = [{ type: 'forecast_hour.available', model: 'wm-6' }];
    const { w, metrics } = await watchedListen({ late: () => lateNow });
    // the run watch tells listen's view of each late notification, which tells the watch
    let told: ((late: LateNotification) => void) | undefined;
    const said: LateNotification[] = [];
    watchedView({ ...quietView(), watchRuns: (_look, t) => ((told = t), {} as RunWatch) }, w).watchRuns(
      async () => ({}) as Reconciled,
      (l) => said.push(l),
    );
    const late = { type: 'forecast_hour.available', model: 'wm-6', subscription_id: '3', initialization_time: '2026-11-28T00:00:00Z', forecast_hour: 6 } as LateNotification;
    told!(late);
    expect(said).toEqual([late]);
    let m = samples((await get(`${metrics}/metrics`)).body);
    expect(m.get('wxhooks_late_notifications_total{type="forecast_hour.available",model="wm-6"}')).toBe(1);
    expect(m.get('wxhooks_late_notifications{type="forecast_hour.available",model="wm-6"}')).toBe(1);
    lateNow = [];
    m = samples((await get(`${metrics}/metrics`)).body);
    expect(m.get('wxhooks_late_notifications{type="forecast_hour.available",model="wm-6"}')).toBeUndefined();
    expect(w.figures.figures().late).toEqual({ said: 1, now: 0 });
  });
});

describe('OpenTelemetry spans, to an OTLP/HTTP receiver in the test', () => {
  let receiver: OtlpReceiver;
  let tracing: Tracing;

  async function traced(): Promise<void> {
    receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    // a collector's token: registered as a secret, never in a span
    tracing = await startSdk({ ...otlpEnv(receiver), OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20otlp-token-7f3a' }, { service: 'wxhooks-test', version: 'test', warn: () => undefined });
    cleanups.push(() => tracing.stop());
  }

  it("listen: a span per delivery, a new trace whose context the app gets as traceparent; a sender's traceparent only linked", async () => {
    await traced();
    const { r, app } = await watchedListen({ tracing: true });
    const d = signed('trg_traced', { data: { model: 'wm-6', forecast_hour: 0, note: MARKER } });
    const theirs = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    expect((await post(r.url, { ...d.headers, traceparent: theirs }, d.body)).status).toBe(200);
    const sent = app.requests[0]!.headers.traceparent as string;
    const [, traceId, parent] = sent.split('-');
    expect(traceId).not.toBe('0af7651916cd43dd8448eb211c80319c');
    const spans = await receiver.waitFor((s) => s.some((x) => x.name === 'wxhooks.receive') && s.some((x) => x.name === 'wxhooks.forward'));
    const receive = spans.find((s) => s.name === 'wxhooks.receive')!;
    const forward = spans.find((s) => s.name === 'wxhooks.forward')!;
    expect(receive).toMatchObject({ traceId, parentSpanId: undefined, links: ['0af7651916cd43dd8448eb211c80319c'], service: 'wxhooks-test' });
    expect(receive.attributes).toMatchObject({
      'wxhooks.door': 'listen',
      'wxhooks.outcome': 'accepted',
      'http.response.status_code': 200,
      'wxhooks.trigger_id': 'trg_traced',
      'wxhooks.subscription_id': '1',
      'wxhooks.delivery.type': 'forecast_hour.available',
      'wxhooks.layout': 'standard',
    });
    expect(receive.events).toEqual(expect.arrayContaining(['verified', 'claim', 'completed']));
    expect(forward).toMatchObject({ traceId, spanId: parent, parentSpanId: receive.spanId });
    expect(forward.attributes['http.response.status_code']).toBe(200);
    const exported = receiver.bodies.join('\n');
    for (const secret of [MARKER, TEST_SECRET, 'otlp-token-7f3a', '/hooks']) expect(exported).not.toContain(secret);
  });

  it('listen: a request that does not verify has a span with its reason, and no id it claims', async () => {
    await traced();
    const { r } = await watchedListen({ tracing: true });
    const forged = signed('trg_claimed', { secret: `whsec_${Buffer.alloc(32, 9).toString('base64')}` });
    expect((await post(r.url, forged.headers, forged.body)).status).toBe(401);
    const spans = await receiver.waitFor((s) => s.some((x) => x.attributes['wxhooks.outcome'] === 'unverified'));
    const span = spans.find((x) => x.attributes['wxhooks.outcome'] === 'unverified')!;
    expect(span.attributes).toMatchObject({ 'wxhooks.reason': 'no_match', 'http.response.status_code': 401 });
    expect(receiver.bodies.join('\n')).not.toContain('trg_claimed');
  });

  it("the Node middleware and the web handler: the app's handler runs inside the delivery's span", async () => {
    await traced();
    const seen: string[] = [];
    const webhooks = new Webhooks({ secret: TEST_SECRET });
    webhooks.on('forecast_hour.available', () => void seen.push(trace.getActiveSpan()?.spanContext().traceId ?? 'none'));
    const server = createServer(createNodeMiddleware(webhooks, { path: '/webhooks' }));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    cleanups.push(() => new Promise((resolve) => server.close(resolve)));
    const d = signed('trg_node');
    expect((await post(`http://127.0.0.1:${(server.address() as AddressInfo).port}/webhooks`, d.headers, d.body)).status).toBe(200);

    const web = new WebWebhooks({ secret: TEST_SECRET });
    web.on('forecast_hour.available', () => void seen.push(trace.getActiveSpan()?.spanContext().traceId ?? 'none'));
    const w = signed('trg_web');
    const answer = await createWebHandler(web)(new Request('http://x/', { method: 'POST', headers: w.headers, body: new Uint8Array(w.body) }));
    expect(answer.status).toBe(200);

    const spans = await receiver.waitFor((s) => s.filter((x) => x.attributes['wxhooks.door'] === 'library').length === 2);
    const library = spans.filter((x) => x.attributes['wxhooks.door'] === 'library');
    expect(seen).toHaveLength(2);
    expect(library.map((s) => s.traceId).sort()).toEqual([...seen].sort());
    expect(library.map((s) => s.attributes['wxhooks.trigger_id']).sort()).toEqual(['trg_node', 'trg_web']);
    expect(library.every((s) => s.attributes['wxhooks.outcome'] === 'accepted' && s.kind === 2)).toBe(true); // SERVER: no span of the app's around it
  });
});

describe('relay serve --metrics, with traces', () => {
  it('serves /readyz (its storage asked) and /metrics, and gives each request a span whose route never names the channel', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const relay = startCli(['relay', 'serve', '--port', '0', '--json', '--metrics', '0'], { WXHOOKS_RELAY_TOKEN: 'relay-token-0123456789abcdef', ...otlpEnv(receiver) });
    cleanups.push(() => relay.stop());
    const url = (await relay.waitFor<{ event?: string; url: string }>((e) => e.event === 'listening')).url;
    const metrics = (await relay.waitFor<{ event?: string; url: string }>((e) => e.event === 'metrics')).url.replace(/\/metrics$/, '');
    expect(await relay.waitFor<{ event?: string; protocol: string }>((e) => e.event === 'traces')).toMatchObject({ protocol: 'http/json' });
    const ready = await get(`${metrics}/readyz`);
    expect(ready.status).toBe(200);
    expect(JSON.parse(ready.body).checks).toEqual({ [`storage ${JSON.parse(relay.lines[0]!).store}`]: 'ok' });
    const d = signed('trg_relay');
    expect((await post(`${url}/in/no-such-channel-a1`, d.headers, d.body)).status).toBe(401);
    const spans = await receiver.waitFor((s) => s.some((x) => x.name === 'wxhooks.relay.receive'));
    const span = spans.find((x) => x.name === 'wxhooks.relay.receive')!;
    expect(span).toMatchObject({ service: 'wxhooks-relay', attributes: { 'url.path': '/in/{channel}', 'wxhooks.door': 'relay', 'http.response.status_code': 401 } });
    expect(receiver.bodies.join('\n')).not.toContain('no-such-channel-a1');
    const m = samples((await get(`${metrics}/metrics`)).body);
    expect([...m.entries()].filter(([k]) => k.startsWith('wxhooks_relay_requests_total')).reduce((n, [, v]) => n + v, 0)).toBe(1);
    expect(m.get('wxhooks_info{door="relay",version="0.1.0"}')).toBe(1);
  });
});

describe("what the cost rules say is not loaded (the built CLI's own imports)", () => {
  /** Runs the built CLI with a hook that notes every module it resolves; returns them. */
  async function loaded(args: string[], during?: (lines: string[]) => Promise<void>): Promise<string> {
    const dir = tempDir('wxhooks-loads-');
    const log = join(dir, 'loaded.txt');
    writeFileSync(log, '');
    writeFileSync(
      join(dir, 'hooks.mjs'),
      `import { appendFileSync } from 'node:fs';\nexport async function resolve(s, c, next) { const r = await next(s, c); appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r; }\n`,
    );
    writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module';\nregister('./hooks.mjs', import.meta.url);\n`);
    const child = spawn(process.execPath, ['--import', join(dir, 'register.mjs'), BIN, ...args], {
      env: cleanEnv({ WXHOOKS_CONFIG_DIR: dir, WX_SECRET: TEST_SECRET }),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    const lines: string[] = [];
    child.stdout.setEncoding('utf8').on('data', (d: string) => lines.push(...d.split('\n').filter(Boolean)));
    if (during) await during(lines);
    await new Promise((resolve) => child.on('close', resolve));
    return readFileSync(log, 'utf8');
  }

  const until = async (lines: string[], match: (l: string) => boolean) => {
    while (!lines.some(match)) await new Promise((resolve) => setTimeout(resolve, 20));
    return lines.find(match)!;
  };

  it('wxhooks --version loads no @opentelemetry module and no prom-client; a plain listen neither the SDK nor prom-client', async () => {
    const version = await loaded(['--version']);
    expect(version).toContain('/bin/wxhooks.js');
    expect(version).not.toContain('/dist/'); // bin/wxhooks.js answers --version itself
    expect(version).not.toMatch(/opentelemetry|prom-client/);

    const plain = await loaded(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--exit-after', '1'], async (lines) => {
      const port = JSON.parse(await until(lines, (l) => l.includes('"listening"'))).port as number;
      const d = signed('trg_plain');
      await post(`http://127.0.0.1:${port}/`, d.headers, d.body);
    });
    expect(plain).toContain('/dist/bin/');
    expect(plain).not.toMatch(/opentelemetry|prom-client/);

    const metrics = await loaded(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--exit-after', '1', '--metrics', '0'], async (lines) => {
      const port = JSON.parse(await until(lines, (l) => l.includes('"listening"'))).port as number;
      await until(lines, (l) => l.includes('"metrics"'));
      const d = signed('trg_metrics');
      await post(`http://127.0.0.1:${port}/`, d.headers, d.body);
    });
    expect(metrics).toMatch(/node_modules\/prom-client\//);
    expect(metrics).not.toMatch(/sdk-trace|exporter-trace/);
  });
});

describe('--metrics on the port deliveries come to', () => {
  it('listen and relay serve refuse it (exit 2), naming the port, before they bind anything', async () => {
    const l = await runCli(['listen', '--port', '9470', '--secret-env', 'S', '--metrics', '9470'], { env: { S: TEST_SECRET } });
    expect(l.code).toBe(2);
    expect(l.stderr).toContain("--metrics 9470 is the receiver's own port");
    const r = await runCli(['relay', 'serve', '--port', '9471', '--metrics', '127.0.0.1:9471'], { env: { WXHOOKS_RELAY_TOKEN: 'relay-token-0123456789abcdef' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain("--metrics 9471 is the relay's own port");
  });
});
