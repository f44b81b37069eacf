import { randomBytes } from 'node:crypto';
import { trace } from '@opentelemetry/api';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort, startNats, startPostgres, type Broker, type Postgres } from '../../scripts/harness.js';
import { Webhooks } from '../../src/handler/node.js';
import { startSdk } from '../../src/observe/sdk.js';
import type { SinkConsumer } from '../../src/sinks/sink.js';
import { get, post } from '../helpers/http.js';
import { otlpEnv, samples, startOtlpReceiver } from '../helpers/otlp.js';
import { startCli, type Running } from '../helpers/process.js';
import { startPrometheus, type Prometheus } from '../helpers/prometheus.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { delivery, listener, send } from '../helpers/relay.js';
import { startServer } from '../helpers/server.js';

// Health, metrics and traces with the real parts: a Prometheus server (Debian's) scraping `listen --metrics`
// and `relay serve --metrics`, the figures read back through its query API; /readyz as PostgreSQL and a
// NATS server stop and come back; a trace from `listen --forward-to --sink` into the app and through the
// stream into `webhooks.consume()`, to an OTLP/HTTP receiver in the test.

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const started = (r: Running) => (cleanups.push(() => r.stop()), r);

describe('Prometheus scrapes listen --metrics and relay serve --metrics', () => {
  it('reads back the known deliveries through its own query API: by outcome, the app by status class, a channel backlog; no secret in any series', async () => {
    const app = await startServer((req, res) => {
      res.writeHead((req.json as { trigger_id?: string })?.trigger_id === 'trg_app_fails' ? 500 : 200);
      res.end('ok');
    });
    cleanups.push(() => app.close());
    const [listenMetrics, relayMetrics] = [await freePort(), await freePort()];
    const listen = started(startCli(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--forward-to', app.url, '--metrics', String(listenMetrics)], { WX_SECRET: TEST_SECRET }));
    const token = `relay-token-${randomBytes(12).toString('hex')}`;
    const relay = started(startCli(['relay', 'serve', '--port', '0', '--json', '--metrics', String(relayMetrics)], { WXHOOKS_RELAY_TOKEN: token }));
    const port = (await listen.waitFor<{ event?: string; port: number }>((e) => e.event === 'listening')).port;
    await listen.waitFor<{ event?: string }>((e) => e.event === 'metrics');
    const relayUrl = (await relay.waitFor<{ event?: string; url: string }>((e) => e.event === 'listening')).url;
    await relay.waitFor<{ event?: string }>((e) => e.event === 'metrics');
    const prom: Prometheus = await startPrometheus([
      { job: 'listen', target: `127.0.0.1:${listenMetrics}` },
      { job: 'relay', target: `127.0.0.1:${relayMetrics}` },
    ]);
    cleanups.push(() => prom.stop());

    const url = `http://127.0.0.1:${port}/`;
    const ok = signed('trg_ok');
    expect((await post(url, ok.headers, ok.body)).status).toBe(200);
    expect((await post(url, ok.headers, ok.body)).status).toBe(200);
    const failing = signed('trg_app_fails');
    expect((await post(url, failing.headers, failing.body)).status).toBe(502);
    expect((await post(url, {}, '{}')).status).toBe(400);

    // a channel, made and left with no listen: two deliveries wait in it
    const channel = `metrics-${randomBytes(3).toString('hex')}`;
    const l = listener({ url: relayUrl, token, channel, secrets: [TEST_SECRET] });
    await l.client.start();
    await l.client.close();
    for (const t of ['trg_r1', 'trg_r2']) {
      const d = delivery(TEST_SECRET, t);
      expect((await send(`${relayUrl}/in/${channel}`, 'POST', d.headers, d.body)).status).toBe(200);
    }

    const byOutcome = await prom.until('sum by (outcome) (wxhooks_requests_total{job="listen"})', (r) => r.length === 4);
    expect(Object.fromEntries(byOutcome.map((r) => [r.metric.outcome, r.value]))).toEqual({ accepted: 1, duplicate: 1, forward_failed: 1, bad_request: 1 });
    const app2 = await prom.query('sum by (status_class) (wxhooks_app_response_duration_seconds_count{job="listen"})');
    expect(Object.fromEntries(app2.map((r) => [r.metric.status_class, r.value]))).toEqual({ '2xx': 1, '5xx': 1 });
    expect((await prom.query('wxhooks_refusals_total{job="listen",reason="missing_header"}'))[0]?.value).toBe(1);
    const backlog = await prom.until(`wxhooks_relay_backlog_messages{job="relay",channel="${channel}"}`, (r) => r[0]?.value === 2);
    expect(backlog).toHaveLength(1);
    expect((await prom.query(`wxhooks_relay_listen_connected{channel="${channel}"}`))[0]?.value).toBe(0);
    expect((await prom.query('sum(wxhooks_relay_requests_total{job="relay",outcome="accepted"})'))[0]?.value).toBeGreaterThanOrEqual(2);
    expect((await prom.query('up')).map((r) => r.value)).toEqual([1, 1]);

    // every series Prometheus holds of them: no secret, token, trigger id or body
    const series = await (await fetch(`${prom.url}/api/v1/series?match[]=${encodeURIComponent('{__name__=~"wxhooks_.+"}')}`)).text();
    for (const text of [TEST_SECRET, token, 'trg_', '"note"', 'webhook_id']) expect(series).not.toContain(text);
  }, 120_000);
});

describe('/readyz as what listen needs stops and comes back', () => {
  it('is 503 naming the store while PostgreSQL is stopped, and 200 once it is back', async () => {
    const pg: Postgres = await startPostgres();
    cleanups.push(() => pg.remove());
    const metrics = await freePort();
    const listen = started(startCli(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--store', pg.url, '--metrics', String(metrics)], { WX_SECRET: TEST_SECRET }));
    await listen.waitFor<{ event?: string }>((e) => e.event === 'metrics', 60_000);
    const ready = () => get(`http://127.0.0.1:${metrics}/readyz`);
    expect((await ready()).status).toBe(200);
    await pg.stop();
    const down = await ready();
    expect(down.status).toBe(503);
    expect(JSON.parse(down.body).checks.store).toMatch(/PostgreSQL/);
    expect(down.body).not.toContain(pg.password);
    await pg.start();
    expect((await ready()).status).toBe(200);
    expect((await get(`http://127.0.0.1:${metrics}/healthz`)).status).toBe(200);
  }, 120_000);

  it('is 503 naming the sink while the NATS server is stopped, and 200 once it is back', async () => {
    const nats: Broker = await startNats({ jetstream: true });
    cleanups.push(() => nats.remove());
    const metrics = await freePort();
    const listen = started(
      startCli(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--sink', `${nats.url}/ready.deliveries`, '--metrics', String(metrics)], { WX_SECRET: TEST_SECRET }),
    );
    await listen.waitFor<{ event?: string }>((e) => e.event === 'metrics', 60_000);
    const ready = () => get(`http://127.0.0.1:${metrics}/readyz`);
    expect((await ready()).status).toBe(200);
    await nats.stop();
    await listen.waitFor<{ event?: string }>((e) => e.event === 'sink_lost', 60_000);
    const down = await ready();
    expect(down.status).toBe(503);
    expect(down.body).toMatch(/sink nats:\/\//);
    expect(down.body).not.toContain(nats.password);
    await nats.start();
    await listen.waitFor<{ event?: string }>((e) => e.event === 'sink_restored', 60_000);
    expect((await ready()).status).toBe(200);
  }, 120_000);
});

describe('one trace from listen to the app and through the stream to webhooks.consume()', () => {
  it('the app and the worker see the trace of listen’s span; the worker serves its own figures', async () => {
    const receiver = await startOtlpReceiver();
    cleanups.push(() => receiver.close());
    const nats: Broker = await startNats({ jetstream: true });
    cleanups.push(() => nats.remove());
    const app = await startServer((_req, res) => void res.end('ok'));
    cleanups.push(() => app.close());
    const sink = `${nats.url}/traced.deliveries`;
    const listen = started(
      startCli(['listen', '--port', '0', '--secret-env', 'WX_SECRET', '--json', '--forward-to', app.url, '--sink', sink], {
        WX_SECRET: TEST_SECRET,
        ...otlpEnv(receiver),
        OTEL_SERVICE_NAME: 'receiver',
      }),
    );
    const port = (await listen.waitFor<{ event?: string; port: number }>((e) => e.event === 'listening', 60_000)).port;

    // the worker, in this process, with an SDK of its own (to the same receiver)
    const tracing = await startSdk({ ...otlpEnv(receiver), OTEL_SERVICE_NAME: 'worker' }, { service: 'worker', version: 'test', warn: () => undefined });
    cleanups.push(() => tracing.stop());
    const seen: string[] = [];
    const webhooks = new Webhooks({ secret: TEST_SECRET });
    let handled!: () => void;
    const done = new Promise<void>((resolve) => (handled = resolve));
    webhooks.on('forecast_hour.available', () => {
      seen.push(trace.getActiveSpan()?.spanContext().traceId ?? 'none');
      handled();
    });
    const worker: SinkConsumer = await webhooks.consume(sink, { group: 'traced', metrics: '127.0.0.1:0' });
    cleanups.push(() => worker.stop());

    const d = signed('trg_through');
    expect((await post(`http://127.0.0.1:${port}/`, d.headers, d.body)).status).toBe(200);
    await done;
    const traceId = (app.requests[0]!.headers.traceparent as string).split('-')[1];
    expect(seen).toEqual([traceId]);
    const spans = await receiver.waitFor((s) => ['wxhooks.receive', 'wxhooks.publish', 'wxhooks.forward', 'wxhooks.consume'].every((n) => s.some((x) => x.name === n)));
    const of = (name: string) => spans.find((s) => s.name === name)!;
    expect(new Set(spans.map((s) => s.traceId))).toEqual(new Set([traceId]));
    expect(of('wxhooks.publish').parentSpanId).toBe(of('wxhooks.receive').spanId);
    expect(of('wxhooks.consume')).toMatchObject({ parentSpanId: of('wxhooks.publish').spanId, service: 'worker' });
    expect(of('wxhooks.consume').attributes).toMatchObject({ 'wxhooks.outcome': 'accepted', 'messaging.consumer.group.name': 'traced', 'wxhooks.trigger_id': 'trg_through' });
    expect(of('wxhooks.receive').service).toBe('receiver');
    expect(receiver.bodies.join('\n')).not.toContain(TEST_SECRET);

    // the worker's port: its figures, and its readiness (the broker, the store)
    const m = samples((await get(`${worker.metricsUrl}/metrics`)).body);
    expect(m.get('wxhooks_consumer_messages_total{group="traced",outcome="accepted"}')).toBe(1);
    expect(m.get('wxhooks_consumer_lag_seconds_count{group="traced"}')).toBe(1);
    expect(m.get('wxhooks_consumer_inflight{group="traced"}')).toBe(0);
    expect((await get(`${worker.metricsUrl}/readyz`)).status).toBe(200);
  }, 120_000);
});
