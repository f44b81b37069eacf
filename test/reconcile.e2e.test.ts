import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import type { RunningEmulator } from '../src/emulator/server.js';
import type { DeliveryAttempt } from '../src/emulator/state.js';
import { publishingEmulator, type PublishingEmulator } from './helpers/published.js';
import { buildPayload } from '../src/signing/payload.js';
import { signDelivery } from '../src/signing/sign.js';
import { Verifier } from '../src/signing/verify.js';
import { latestCycle } from '../src/vocabulary.js';
import { tempDir } from './helpers/cli.js';
import { runInProcess, startInProcess, testContext, type InProcessRun } from './helpers/context.js';
import { buildCatchUp } from '../src/api/catch-up.js';
import { serviceFor } from '../src/tasks/service.js';
import { handToListen } from '../src/receiver/catch-up.js';
import { fileLookup, reconcileWebhook } from '../src/receiver/reconcile.js';
import { post } from './helpers/http.js';
import { API_KEY, startService, type FakeService } from './helpers/service.js';
import { startServer, type TestServer } from './helpers/server.js';

// Nothing missed (#45), against the emulator with no mocks: a model run published while listen is stopped
// and the emulator's retries exhausted; reconcile names exactly the missing hours; --catch-up hands each to
// the app once; the service's late delivery of one afterwards is a duplicate; the same the other way round;
// across a restart of listen; and a forecast API that fails changes nothing.

/** A run of today's: within reconcile's window, whatever the date. */
const INIT = latestCycle();

let emu: RunningEmulator;
let published: PublishingEmulator;

beforeAll(async () => {
  published = await publishingEmulator([10, 10, 10]);
  emu = published.emu;
});
afterAll(() => emu.close());

interface Setup {
  env: Record<string, string>;
  port: number;
  webhook: string;
  secret: string;
  /** The subscription ids, by type. */
  subs: Record<string, string>;
  app: TestServer;
  listen(args?: string[]): Promise<InProcessRun>;
  /** Publishes one event; resolves with its trigger once its delivery is settled. */
  publish(event: Record<string, unknown>): Promise<{ trigger: string; attempt: DeliveryAttempt }>;
}

const running: InProcessRun[] = [];
const apps: TestServer[] = [];
afterEach(async () => {
  for (const r of running.splice(0)) await r.stop();
  for (const a of apps.splice(0)) await a.close();
});

/** A webhook of its own (model wm-6 only), its secret stored in a store folder of its own; an app that answers 200. */
async function setUp(model = `wm-${Math.random().toString(36).slice(2, 8)}`): Promise<Setup & { model: string }> {
  const dir = tempDir('wxhooks-cfg-');
  const env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: dir };
  const port = await freePort();
  const created = await runInProcess(
    ['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', `forecast_hour.available:model=${model}`, '--subscribe', `initialization_time.available:model=${model}`, '--json'],
    { env },
  );
  expect(created.code, created.stderr).toBe(0);
  const hook = JSON.parse(created.stdout) as { id: string; secret: string; subscriptions: { id: string; type: string }[] };
  const app = await startServer((_req, res) => void res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}'));
  apps.push(app);
  return {
    model,
    env,
    port,
    webhook: hook.id,
    secret: hook.secret,
    subs: Object.fromEntries(hook.subscriptions.map((s) => [s.type, s.id])),
    app,
    async listen(args = []) {
      const run = startInProcess(['listen', '--port', String(port), '--webhook', hook.id, '--forward-to', `${app.url}/hooks`, '--json', ...args], { env });
      running.push(run);
      await run.waitFor<{ event?: string }>((v) => v.event === 'listening');
      return run;
    },
    publish: (event) => published.publish({ model, initialization_time: INIT, ...event }),
  };
}

async function stopListen(run: InProcessRun): Promise<void> {
  running.splice(running.indexOf(run), 1);
  await run.stop();
}

/** The service's late retry of a notification: the same trigger and body, signed afresh, as the emulator would send it. */
function serviceRetry(s: Setup & { model: string }, trigger: string, hour: number) {
  const body = buildPayload({
    type: 'forecast_hour.available',
    webhookId: s.webhook,
    subscriptionId: s.subs['forecast_hour.available']!,
    triggerId: trigger,
    data: { model: s.model, initialization_time: INIT, forecast_hour: hour },
  });
  return post(`http://127.0.0.1:${s.port}/`, { 'content-type': 'application/json', ...signDelivery({ secret: s.secret, body, triggerId: trigger }) }, body);
}

/** What the app got: the forecast hours of the deliveries forwarded to it, and whether each was a catch-up. */
const received = (app: TestServer) =>
  app.requests.map((r) => {
    const p = r.json as { data: { forecast_hour?: number }; catch_up?: boolean; type: string };
    return { type: p.type, hour: p.data.forecast_hour, catch_up: p.catch_up === true };
  });

describe('reconcile, then --catch-up, exactly once', () => {
  it('names exactly the missing hours (not those still unpublished); --catch-up --forward-to hands each to the app once, marked and signed; a late delivery of the service is then a duplicate', async () => {
    const s = await setUp();
    const listen = await s.listen();
    await s.publish({ type: 'forecast_hour.available', forecast_hour: 0 });
    await s.publish({ type: 'forecast_hour.available', forecast_hour: 6 });
    await stopListen(listen);
    // listen is down: these are retried, then given up
    const h12 = await s.publish({ type: 'forecast_hour.available', forecast_hour: 12 });
    const h18 = await s.publish({ type: 'forecast_hour.available', forecast_hour: 18 });
    expect([h12.attempt.outcome, h12.attempt.attempt, h18.attempt.outcome]).toEqual(['failed', 4, 'failed']);

    const report = await runInProcess(['reconcile', '--webhook', s.webhook, '--run', `${s.model}@${INIT}`, '--expect-hours', '0-24/6', '--json'], { env: s.env });
    expect(report.code, report.stderr).toBe(11);
    const doc = JSON.parse(report.stdout) as { runs: Record<string, unknown>[]; notifications: Record<string, unknown>[]; missing: number };
    expect(doc.runs).toEqual([
      {
        type: 'forecast_hour.available',
        subscription_id: s.subs['forecast_hour.available'],
        model: s.model,
        initialization_time: INIT,
        in_progress: true,
        available: [0, 6, 12, 18],
        delivered: [0, 6],
        missing: [
          { forecast_hour: 12, created_at: expect.any(String) },
          { forecast_hour: 18, created_at: expect.any(String) },
        ],
        not_yet: [24],
      },
    ]);
    // the run is in progress: its initialization_time.available is not out yet, and not missing
    expect(doc.notifications).toEqual([expect.objectContaining({ type: 'initialization_time.available', state: 'not_yet' })]);
    expect(doc.missing).toBe(2);
    expect(report.stderr).toContain('2 notifications are missing');
    const text = await runInProcess(['reconcile', '--webhook', s.webhook, '--run', `${s.model}@${INIT}`, '--expect-hours', '0-24/6'], { env: s.env });
    expect(text.stdout).toMatch(/4 available, 2 delivered, 2 missing/);
    expect(text.stdout).toMatch(/missing \+12h, available since \d\d:\d\d:\d\d, [\d.]+(ms|s|m) ago/);
    expect(text.stdout).toContain('not out yet: +24h');

    const before = s.app.requests.length;
    const caught = await runInProcess(['reconcile', '--webhook', s.webhook, '--catch-up', '--forward-to', `${s.app.url}/hooks`, '--json'], { env: s.env });
    expect(caught.code, caught.stderr).toBe(0);
    const caughtDoc = JSON.parse(caught.stdout) as { caught_up: { forecast_hour: number; outcome: string }[]; via: string };
    expect(caughtDoc.via).toBe('here');
    expect(caughtDoc.caught_up.map((c) => [c.forecast_hour, c.outcome])).toEqual([
      [12, 'accepted'],
      [18, 'accepted'],
    ]);
    const handed = s.app.requests.slice(before);
    expect(handed.map((r) => (r.json as { data: { forecast_hour: number } }).data.forecast_hour)).toEqual([12, 18]);
    for (const r of handed) {
      expect(r.headers['wxhooks-catch-up']).toBe('1');
      expect(r.json).toMatchObject({ catch_up: true, test: false, type: 'forecast_hour.available', webhook_id: s.webhook, data: { model: s.model, initialization_time: INIT } });
      // signed with the webhook's secret, as the service signs: the app's own verification accepts it
      const v = new Verifier({ secret: s.secret }).verify(r.headers, Buffer.from(r.body), Date.now());
      expect(v.ok).toBe(true);
    }

    // nothing is missing now, and a second catch-up hands nothing over
    expect((await runInProcess(['reconcile', '--webhook', s.webhook, '--run', `${s.model}@${INIT}`], { env: s.env })).code).toBe(0);
    // the service's late delivery of hour 12 (its own trigger) is a duplicate: the app does not get it again
    const again = await s.listen();
    const late = await serviceRetry(s, h12.trigger, 12);
    expect(late.status).toBe(200);
    expect(JSON.parse(late.body)).toEqual({ ok: true, duplicate: true });
    await again.waitFor<{ outcome?: string; trigger_id?: string }>((e) => e.outcome === 'duplicate' && e.trigger_id === h12.trigger);
    expect(received(s.app).filter((r) => r.hour === 12)).toEqual([{ type: 'forecast_hour.available', hour: 12, catch_up: true }]);
  });

  it('beside a running listen, --catch-up goes through it (its forward, its store), once; the service retry that comes first makes the catch-up a duplicate; across a restart', async () => {
    const s = await setUp();
    await s.publish({ type: 'forecast_hour.available', forecast_hour: 0 });
    const h6 = await s.publish({ type: 'forecast_hour.available', forecast_hour: 6 });
    await s.publish({ type: 'forecast_hour.available', forecast_hour: 12 });
    await s.publish({ type: 'initialization_time.available' });
    const listen = await s.listen();
    // the service's retry of +6h lands first (the receiver is back)
    expect((await serviceRetry(s, h6.trigger, 6)).status).toBe(200);
    await listen.waitFor<{ outcome?: string }>((e) => e.outcome === 'accepted');
    const r = await runInProcess(['reconcile', '--webhook', s.webhook, '--catch-up', '--json'], { env: s.env });
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout) as { caught_up: { type: string; forecast_hour?: number; outcome: string }[]; via: string };
    expect(doc.via).toMatch(/^listen \d+ at http:\/\/127\.0\.0\.1:\d+\/$/);
    expect(doc.caught_up.map((c) => [c.type, c.forecast_hour ?? null, c.outcome])).toEqual([
      ['forecast_hour.available', 0, 'accepted'],
      ['forecast_hour.available', 12, 'accepted'],
      ['initialization_time.available', null, 'accepted'],
    ]);
    // listen reported each catch-up as one
    await listen.waitFor<{ outcome?: string; catch_up?: boolean; type?: string }>((e) => e.catch_up === true && e.type === 'initialization_time.available');
    expect(received(s.app)).toEqual([
      { type: 'forecast_hour.available', hour: 6, catch_up: false },
      { type: 'forecast_hour.available', hour: 0, catch_up: true },
      { type: 'forecast_hour.available', hour: 12, catch_up: true },
      { type: 'initialization_time.available', hour: undefined, catch_up: true },
    ]);
    // across a restart of listen: a catch-up again is a duplicate, and so is the service's late retry of +6h
    await stopListen(listen);
    const restarted = await s.listen();
    expect((await serviceRetry(s, h6.trigger, 6)).status).toBe(200);
    await restarted.waitFor<{ outcome?: string }>((e) => e.outcome === 'duplicate');
    const none = await runInProcess(['reconcile', '--webhook', s.webhook, '--json'], { env: s.env });
    expect(none.code, none.stderr).toBe(0);
    expect((JSON.parse(none.stdout) as { missing: number }).missing).toBe(0);
    expect(received(s.app)).toHaveLength(4);
  });
});

describe('whichever comes first', () => {
  it('a catch-up built while the hour was missing, handed over after the service retry landed, is a duplicate: the app gets the hour once', async () => {
    const s = await setUp();
    const h0 = await s.publish({ type: 'forecast_hour.available', forecast_hour: 0 });
    const ctx = testContext({ env: s.env });
    const { service } = await serviceFor(ctx);
    const report = await reconcileWebhook({
      service,
      webhook: await service.getWebhook(s.webhook),
      window: { since: Date.now() - 86_400_000 },
      lookup: fileLookup(s.env.WXHOOKS_CONFIG_DIR!, s.webhook),
    });
    expect(report.missing.map((n) => n.forecast.forecast_hour)).toEqual([0]);
    const catchUps = report.missing.map((n) => buildCatchUp(n, s.webhook, Date.now()));
    const listen = await s.listen();
    expect((await serviceRetry(s, h0.trigger, 0)).status).toBe(200);
    const url = `http://127.0.0.1:${s.port}/`;
    const [result] = await handToListen(url, catchUps, { secret: s.secret, clock: ctx.clock, timeoutMs: 5000 });
    expect(result!.outcome).toBe('duplicate');
    // and a second catch-up of it too (its trigger is the forecast's own)
    expect((await handToListen(url, catchUps, { secret: s.secret, clock: ctx.clock, timeoutMs: 5000 }))[0]!.outcome).toBe('duplicate');
    await listen.waitFor<{ outcome?: string; catch_up?: boolean }>((e) => e.outcome === 'duplicate' && e.catch_up === true);
    expect(received(s.app)).toEqual([{ type: 'forecast_hour.available', hour: 0, catch_up: false }]);
  });
});

describe('a forecast API that fails: a clear error, and nothing changed', () => {
  let svc: FakeService;
  const hung: (() => void)[] = [];
  beforeAll(async () => {
    svc = await startService('documented', tempDir('wxhooks-cfg-'));
  });
  afterAll(async () => {
    for (const release of hung) release();
    await svc.stop();
  });

  it.each([
    ['401', 401, ['--since', '24h'], 3, /The service refused the credentials \(401\): not for you/],
    ['404: a model it never published', undefined, ['--run', `wm-never@${INIT}`], 4, /The forecast API has no model wm-never \(404: model wm-never has no forecasts here/],
    ['503, after its retries', 503, ['--since', '24h'], 6, /The service answered 503 after 4 attempts: down for maintenance/],
    ['no answer within --timeout', 'hang', ['--since', '24h', '--timeout', '1s'], 6, /did not answer within 1s/],
  ] as const)('%s', async (_name, answer, args, code, says) => {
    const env = { ...svc.env, WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-') };
    const model = answer === undefined ? 'wm-never' : 'wm-6';
    const created = await runInProcess(['webhook', 'create', '--url', 'http://127.0.0.1:9/', '--subscribe', `forecast_hour.available:model=${model}`, '--json'], { env });
    const webhook = (JSON.parse(created.stdout) as { id: string }).id;
    await runInProcess(['trigger', 'forecast_hour.available', '--model', 'wm-6', '--init-time', INIT, '--forecast-hour', '0'], { env });
    const app = await startServer((_req, res) => void res.writeHead(200).end());
    apps.push(app);
    svc.before = (req, res) => {
      if (!req.path.startsWith('/forecasts/') || answer === undefined) return false;
      if (answer === 'hang') hung.push(() => res.destroy());
      else res.writeHead(answer, { 'content-type': 'application/json' }).end(JSON.stringify({ message: answer === 401 ? 'not for you' : 'down for maintenance' }));
      return true;
    };
    try {
      const r = await runInProcess(['reconcile', '--webhook', webhook, ...args, '--catch-up', '--forward-to', `${app.url}/hooks`], { env });
      expect(r.code, r.stderr).toBe(code);
      expect(r.stderr).toMatch(says);
      expect(r.stderr).not.toContain(API_KEY);
      expect(r.stdout).toBe('');
      // nothing handed over, nothing stored
      expect(app.requests).toHaveLength(0);
      expect(() => readFileSync(join(env.WXHOOKS_CONFIG_DIR, `processed-pairs.webhook-${webhook}.ndjson`))).toThrow(/ENOENT/);
    } finally {
      svc.before = undefined;
    }
  });
});
