import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyDelivery } from '../src/signing/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startCliInProcess, type Cli } from './helpers/process.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

interface Emu {
  proc: Cli;
  url: string;
  key: string;
  /** The secret half of its current key: a legacy key, for Basic. */
  legacyKey: string;
  env: Record<string, string>;
}

async function emulator(args: string[] = [], dir = tempDir()): Promise<Emu> {
  const proc = startCliInProcess(['emulator', '--port', '0', '--json', '--retry-delays', '100ms,200ms,300ms', ...args], { WXHOOKS_CONFIG_DIR: dir });
  const info = await proc.waitFor<{ base_url: string; api_key: string; legacy_key: string }>((v) => typeof v === 'object' && 'base_url' in v);
  return { proc, url: info.base_url, key: info.api_key, legacyKey: info.legacy_key, env: { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir } };
}

async function raw(url: string, init: RequestInit & { key?: string } = {}) {
  const headers = new Headers(init.headers);
  if (init.key) headers.set('authorization', `Bearer ${init.key}`);
  const res = await fetch(url, { ...init, headers });
  const text = await res.text();
  return { status: res.status, text, json: text ? (JSON.parse(text) as Record<string, unknown>) : undefined, headers: res.headers };
}

describe('the emulator answers like a real service', () => {
  let emu: Emu;
  beforeAll(async () => {
    emu = await emulator();
  });
  afterAll(() => emu.proc.stop());

  it('prints the export line and a hint in pretty mode', async () => {
    const proc = startCliInProcess(['emulator', '--port', '0', '--api-key', 'k_demo_1234']);
    try {
      const line = await proc.waitFor<string>((l) => typeof l === 'string' && l.includes('export WX_BASE_URL='));
      expect(line).toMatch(/export WX_BASE_URL=http:\/\/127\.0\.0\.1:\d+ WX_API_KEY=k_demo_1234/);
      await proc.waitFor<string>((l) => typeof l === 'string' && l.startsWith('Next'));
    } finally {
      expect(await proc.stop('SIGINT')).toBe(130);
    }
  });

  it('401 without credentials, with a JSON error; Bearer and Basic both accepted', async () => {
    const none = await raw(`${emu.url}/debug/v1/auth_status`);
    expect(none.status).toBe(401);
    expect(none.json).toMatchObject({ error: { code: 'unauthorized' } });
    const wrong = await raw(`${emu.url}/webhooks/v1`, { key: 'nope' });
    expect(wrong.status).toBe(401);
    const bearer = await runCli(['auth', 'status', '--json'], { env: emu.env });
    expect(JSON.parse(bearer.stdout)).toMatchObject({ authed: true, client_id: 'emulator', credentials: { scheme: 'bearer', client_id_from: 'the wb_ key' } });
    // its legacy key with its client id: Basic with a signed token
    const legacy = { ...emu.env, WX_API_KEY: emu.legacyKey, WX_CLIENT_ID: 'emulator' };
    const basic = await runCli(['auth', 'status', '--json'], { env: legacy });
    expect(JSON.parse(basic.stdout)).toMatchObject({ authed: true, credentials: { scheme: 'basic' } });
    const badBasic = await runCli(['auth', 'status'], { env: { ...legacy, WX_CLIENT_ID: 'someone_else' } });
    expect(badBasic.code).toBe(3);
    expect(badBasic.stderr).toContain('not this emulator');
  });

  it('malformed JSON 400, unknown route 404, wrong method 405, too large 413, unknown id 404; never crashes', async () => {
    const bad = await raw(`${emu.url}/webhooks/v1`, { method: 'POST', key: emu.key, body: '{"url": ', headers: { 'content-type': 'application/json' } });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: { code: 'invalid_json' } });
    const notObject = await raw(`${emu.url}/webhooks/v1`, { method: 'POST', key: emu.key, body: '[1]' });
    expect(notObject.status).toBe(400);
    const noUrl = await raw(`${emu.url}/webhooks/v1`, { method: 'POST', key: emu.key, body: '{"name":"x"}' });
    expect(noUrl.status).toBe(400);
    expect((await raw(`${emu.url}/nowhere`, { key: emu.key })).status).toBe(404);
    const wrongMethod = await raw(`${emu.url}/webhooks/v1`, { method: 'DELETE', key: emu.key });
    expect(wrongMethod.status).toBe(405);
    expect(wrongMethod.headers.get('allow')).toBe('GET, POST');
    const big = await raw(`${emu.url}/webhooks/v1`, { method: 'POST', key: emu.key, body: JSON.stringify({ url: 'https://x.example/', note: 'x'.repeat(2 * 1024 * 1024) }) }).catch(() => ({
      status: 413,
    }));
    expect(big.status).toBe(413);
    expect((await raw(`${emu.url}/webhooks/v1/12345`, { key: emu.key })).status).toBe(404);
    expect((await raw(`${emu.url}/webhooks/v1/12345/subscriptions/1/ping`, { method: 'POST', key: emu.key })).status).toBe(404);
    expect((await raw(`${emu.url}/webhooks/v1?page_size=500`, { key: emu.key })).status).toBe(400);
    expect((await runCli(['auth', 'status'], { env: emu.env })).code).toBe(0); // still up
  });

  it('the secret appears only in the create response', async () => {
    const made = await runCli(['webhook', 'create', '--url', 'https://example.com/', '--json'], { env: emu.env });
    const hook = JSON.parse(made.stdout) as { id: string; secret: string };
    expect(hook.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    const got = await raw(`${emu.url}/webhooks/v1/${hook.id}`, { key: emu.key });
    const list = await raw(`${emu.url}/webhooks/v1`, { key: emu.key });
    expect(got.text + list.text).not.toContain(hook.secret);
    expect(got.json).toMatchObject({ webhook_id: hook.id, subscriptions: {} });
  });

  it('trigger refuses anything that is not an emulator', async () => {
    const other = await startServer((_q, res) => sendJson(res, 404, { error: 'not here' }));
    try {
      const r = await runCli(['trigger', 'forecast_hour.available'], { env: { WX_BASE_URL: other.url, WX_API_KEY: 'k' } });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('is not a wxhooks emulator');
      expect(other.requests.every((q) => q.method === 'GET')).toBe(true);
    } finally {
      await other.close();
    }
  });
});

describe('end to end: emulator, webhook create, listen, trigger', () => {
  let emu: Emu;
  let receiver: TestServer;
  beforeAll(async () => {
    emu = await emulator();
  });
  afterAll(async () => {
    await emu.proc.stop();
    await receiver?.close();
  });

  it('a model run arrives at `listen --webhook ID`, every delivery verified, with the response data', async () => {
    const made = await runCli(
      ['webhook', 'create', '--url', 'http://127.0.0.1:1/placeholder', '--subscribe', 'forecast_hour.available:model=wm-6;response=gridded', '--subscribe', 'initialization_time.available', '--json'],
      { env: emu.env },
    );
    const hook = JSON.parse(made.stdout) as { id: string };
    // listen reads the webhook's secret from the store, so the webhook comes first; then it is pointed here
    const saveDir = join(tempDir(), 'saved');
    const l = startCliInProcess(['listen', '--port', '0', '--json', '--webhook', hook.id, '--exit-after', '4', '--save-dir', saveDir], emu.env);
    const ready = await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
    expect((await runCli(['webhook', 'update', hook.id, '--url', ready.url], { env: emu.env })).code).toBe(0);
    const run = await runCli(['trigger', 'run', '--hours', '0-12/6', '--init-time', '2026-11-21T00:00:00Z', '--json'], { env: emu.env });
    expect(run.code).toBe(0);
    const published = JSON.parse(run.stdout) as { events: { notifications: number; deliveries: { outcome: string }[] }[] };
    expect(published.events.map((e) => e.notifications)).toEqual([1, 1, 1, 1]);
    expect(published.events.flatMap((e) => e.deliveries.map((d) => d.outcome))).toEqual(['delivered', 'delivered', 'delivered', 'delivered']);
    expect(await l.exited).toBe(0);
    const events = l.lines.slice(1).map((x) => JSON.parse(x) as Record<string, unknown>);
    expect(events.map((e) => [e.outcome, e.type, e.forecast_hour ?? null])).toEqual([
      ['accepted', 'forecast_hour.available', 0],
      ['accepted', 'forecast_hour.available', 6],
      ['accepted', 'forecast_hour.available', 12],
      ['accepted', 'initialization_time.available', null],
    ]);
    expect(events.every((e) => e.layout === 'standard' && e.webhook_id === hook.id)).toBe(true);
    // one trigger per event; the forecast hours carry the gridded response their subscription asked for
    expect(new Set(events.map((e) => e.trigger_id)).size).toBe(4);
    const first = JSON.parse(JSON.parse(readFileSync(events[0]!.saved_to as string, 'utf8')).body) as { data: { response: { type: string; values: number[][] } } };
    expect(first.data.response.type).toBe('gridded');
    expect(first.data.response.values.length).toBeGreaterThan(0);
  });

  it('ping: 204 against a 2xx receiver; exit 7 naming the answer of one that returns 500, never retried', async () => {
    let calls = 0;
    receiver = await startServer((req, res) => {
      calls++;
      if (req.path === '/fail') return sendJson(res, 500, { error: 'kaput' });
      sendJson(res, 200, {});
    });
    const good = JSON.parse((await runCli(['webhook', 'create', '--url', `${receiver.url}/ok`, '--subscribe', 'degree_days.available', '--json'], { env: emu.env })).stdout) as {
      id: string;
      subscriptions: { id: string }[];
    };
    const ok = await runCli(['ping', good.id, good.subscriptions[0]!.id], { env: emu.env });
    expect(ok.code).toBe(0);
    const ping = receiver.requests.at(-1)!;
    expect(JSON.parse(ping.body)).toMatchObject({ test: true, type: 'degree_days.available', webhook_id: good.id });
    const bad = JSON.parse((await runCli(['webhook', 'create', '--url', `${receiver.url}/fail`, '--subscribe', 'degree_days.available', '--json'], { env: emu.env })).stdout) as {
      id: string;
      subscriptions: { id: string }[];
    };
    const before = calls;
    const r = await runCli(['ping', bad.id, bad.subscriptions[0]!.id], { env: emu.env });
    expect(r.code).toBe(7);
    expect(r.stderr).toContain('the receiver answered 500');
    expect(calls - before).toBe(1);
    // and no retry is due: the attempt the emulator recorded has none
    const attempts = (await (await fetch(`${emu.env.WX_BASE_URL}/emulator/v1/deliveries`, { headers: { authorization: `Bearer ${emu.env.WX_API_KEY}` } })).json()) as {
      deliveries: { test: boolean; outcome: string; next_attempt_at?: string }[];
    };
    const failed = attempts.deliveries.filter((d) => d.test && d.outcome === 'failed');
    expect(failed).toHaveLength(1);
    expect(failed[0]!.next_attempt_at).toBeUndefined();
  });

  it('a receiver failing twice gets the notification on the third attempt, each attempt signed afresh with the same trigger id', async () => {
    let n = 0;
    const flaky = await startServer((_q, res) => (++n <= 2 ? sendJson(res, 503, { error: 'busy' }) : sendJson(res, 200, {})));
    try {
      const made = await runCli(['webhook', 'create', '--url', flaky.url, '--subscribe', 'tropical_cyclones.available:response=tropical_cyclone_track', '--json'], { env: emu.env });
      const hook = JSON.parse(made.stdout) as { id: string; secret: string };
      const t = await runCli(['trigger', 'tropical_cyclones.available', '--json'], { env: emu.env });
      const published = JSON.parse(t.stdout) as { trigger_id: string };
      for (let i = 0; i < 50 && flaky.requests.length < 3; i++) await new Promise((r) => setTimeout(r, 50));
      expect(flaky.requests).toHaveLength(3);
      for (const req of flaky.requests) {
        expect(req.headers['trigger-id']).toBe(published.trigger_id);
        const v = verifyDelivery({ secret: hook.secret, headers: req.headers, body: Buffer.from(req.body) });
        expect(v.ok).toBe(true);
      }
      const body = JSON.parse(flaky.requests[2]!.body) as { data: { response: { cyclones: unknown[] } } };
      expect(body.data.response.cyclones.length).toBeGreaterThan(0);
      const attempts = await fetch(`${emu.url}/emulator/v1/deliveries?trigger_id=${published.trigger_id}`, { headers: { authorization: `Bearer ${emu.key}` } });
      const list = ((await attempts.json()) as { deliveries: { attempt: number; outcome: string; status: number }[] }).deliveries;
      expect(list.map((d) => [d.attempt, d.outcome, d.status])).toEqual([
        [1, 'failed', 503],
        [2, 'failed', 503],
        [3, 'delivered', 200],
      ]);
    } finally {
      await flaky.close();
    }
  });

  it('filters that do not match, and inactive webhooks, get nothing; a hanging receiver blocks no one', async () => {
    const hits: string[] = [];
    const rec = await startServer((req, res) => {
      hits.push(req.path);
      if (req.path === '/hang') return; // never answers
      sendJson(res, 200, {});
    });
    try {
      const mk = (path: string, spec: string, extra: string[] = []) => runCli(['webhook', 'create', '--url', `${rec.url}${path}`, '--subscribe', spec, ...extra], { env: emu.env });
      await mk('/other-model', 'events.available:model=wm-9');
      await mk('/other-hour', 'events.available:hours=6:00');
      await mk('/other-event', 'events.available:event_type=coldwave');
      await mk('/inactive', 'events.available', ['--inactive']);
      await mk('/hang', 'events.available');
      await mk('/match', 'events.available:model=wm-6;hours=0:00;event_type=heatwave,front');
      const started = Date.now();
      const t = runCli(['trigger', 'events.available', '--event-type', 'heatwave', '--init-time', '2026-11-21T00:00:00Z', '--json'], { env: emu.env });
      for (let i = 0; i < 40 && !hits.includes('/match'); i++) await new Promise((r) => setTimeout(r, 25));
      expect(hits).toContain('/match');
      expect(Date.now() - started).toBeLessThan(2500);
      const r = await t;
      const published = JSON.parse(r.stdout) as { notifications: number; deliveries: { url: string; outcome: string }[] };
      expect(published.notifications).toBe(2);
      expect(published.deliveries.find((d) => d.url.endsWith('/hang'))!.outcome).toBe('pending');
      expect(hits.sort()).toEqual(['/hang', '/match']);
    } finally {
      await rec.close();
    }
  });
});

describe('emulator state', () => {
  it('--data-file keeps webhooks across a restart, written atomically', async () => {
    const dir = tempDir();
    const file = join(dir, 'emu.json');
    const a = await emulator(['--data-file', file, '--api-key', 'k_persist_1', '--port', '0'], dir);
    expect((await runCli(['webhook', 'create', '--url', 'https://example.com/a', '--subscribe', 'degree_days.available'], { env: a.env })).code).toBe(0);
    await a.proc.stop('SIGTERM');
    expect(JSON.parse(readFileSync(file, 'utf8')).webhooks).toHaveLength(1);
    const b = await emulator(['--data-file', file, '--api-key', 'k_persist_1'], dir);
    try {
      const list = await runCli(['webhook', 'list', '--json'], { env: b.env });
      expect((JSON.parse(list.stdout) as { webhooks: { url: string }[] }).webhooks.map((w) => w.url)).toEqual(['https://example.com/a']);
      const second = await runCli(['webhook', 'create', '--url', 'https://example.com/b', '--json'], { env: b.env });
      expect((JSON.parse(second.stdout) as { id: string }).id).toBe('2');
    } finally {
      await b.proc.stop();
    }
  });

  it('a --data-file it cannot read, or that holds no emulator state, is refused at start (exit 2) and left as it was', async () => {
    const dir = tempDir();
    mkdirSync(join(dir, 'a-folder'));
    writeFileSync(join(dir, 'not-json'), '\u00ff{');
    writeFileSync(join(dir, 'other.json'), '{"webhooks": {}}');
    writeFileSync(join(dir, 'a-file'), 'x');
    const cases: [string, string][] = [
      [join(dir, 'a-folder'), 'it is a folder (EISDIR)'],
      [join(dir, 'not-json'), 'is not valid JSON'],
      [join(dir, 'other.json'), 'holds no emulator state'],
      [join(dir, 'a-file', 'state.json'), `Cannot write to the folder of --data-file "${join(dir, 'a-file')}": it is a file, not a folder.`],
    ];
    for (const [file, words] of cases) {
      const r = await runCli(['emulator', '--port', '0', '--data-file', file], { timeoutMs: 10_000 });
      expect(r.code, file).toBe(2);
      expect(r.stderr).toContain(words);
      expect(r.stderr).not.toMatch(/bug|\n\s+at /);
    }
    expect(readFileSync(join(dir, 'not-json'), 'utf8')).toBe('\u00ff{');
    expect(readFileSync(join(dir, 'other.json'), 'utf8')).toBe('{"webhooks": {}}');
  });

  it('--shape live answers with the live field names', async () => {
    const emu = await emulator(['--shape', 'live']);
    try {
      const made = await runCli(['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'degree_days.available', '--json'], { env: emu.env });
      expect(made.code).toBe(0);
      const got = await raw(`${emu.url}/webhooks/v1/1`, { key: emu.key });
      expect(got.json).toMatchObject({ id: 1, subscriptions: [{ id: 1, subscription_type: 'degree_days.available' }] });
    } finally {
      await emu.proc.stop();
    }
  });

  it('a port in use is a clear usage error', async () => {
    const emu = await emulator();
    try {
      const port = new URL(emu.url).port;
      const r = await runCli(['emulator', '--port', port]);
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`Port ${port}`);
    } finally {
      await emu.proc.stop();
    }
  });
});
