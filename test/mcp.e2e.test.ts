import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { ResourceListChangedNotificationSchema, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { verifyDelivery } from '../src/signing/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { post } from './helpers/http.js';
import { startMcpInProcess, unmarked, type McpSession } from './helpers/mcp.js';
import { startCliInProcess, type Cli } from './helpers/process.js';
import { publishEvent } from './helpers/published.js';
import { signed } from './helpers/receiver.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

// `wxhooks mcp` as a coding agent uses it: the SDK's own client speaking its stdio protocol (in this
// process: the command's stdin and stdout are streams here; the built binary over a pipe:
// test/full/mcp-store.e2e.test.ts), the emulator, a real `listen --inspect` that forwards to an app of this
// test, no mocks. Every answer and every log line is kept, and at the end searched for the API key, the
// webhook secrets and the inspector's token.

const OTHER_SECRET = `whsec_${Buffer.alloc(32, 3).toString('base64')}`;
let dir: string;
let env: Record<string, string>;
let emu: Cli;
let listen: Cli;
let app: TestServer;
let webhookId: string;
let secret: string;
let token: string;
let listenUrl: string;
let inspectorUrl: string;
let saveDir: string;
/** Every secret an answer must never hold. */
const secrets: string[] = [];
/** Every session, for the final search of their answers and logs. */
const sessions: McpSession[] = [];
let agent: McpSession;
/** The same server with --allow-write: what signs a body the agent wrote. */
let writer: McpSession;

async function mcp(args: string[] = [], extra: Record<string, string> = {}): Promise<McpSession> {
  const s = await startMcpInProcess(args, { ...env, ...extra });
  sessions.push(s);
  return s;
}

const publish = (body: Record<string, unknown>) => publishEvent(env, body);

beforeAll(async () => {
  dir = tempDir();
  saveDir = tempDir();
  emu = startCliInProcess(['emulator', '--port', '0', '--json'], { WXHOOKS_CONFIG_DIR: dir });
  const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
  env = { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir, OTHER: OTHER_SECRET };
  // the app: 422 for a body it cannot use, its input echoed back when asked, else 200
  app = await startServer((req, res) => {
    if (req.body.includes('"fail"')) return sendJson(res, 422, { error: 'missing data.model' }, { 'x-app': 'demo' });
    if (req.body.includes('"echo"')) return sendJson(res, 200, { echo: req.json });
    sendJson(res, 200, { stored: (req.json as { trigger_id?: string } | undefined)?.trigger_id ?? null }, { 'x-app': 'demo' });
  });
  const port = await freePort();
  const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--json', '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available'], {
    env,
  });
  webhookId = (JSON.parse(created.stdout) as { id: string }).id;
  secret = (await runCli(['secret', 'show', webhookId], { env })).stdout.trim();
  listen = startCliInProcess(
    ['listen', '--port', String(port), '--json', '--webhook', webhookId, '--forward-to', `${app.url}/hooks`, '--save-dir', saveDir, '--expect-hours', '0-18/6', '--inspect', '127.0.0.1:0'],
    env,
  );
  listenUrl = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening')).url;
  inspectorUrl = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url;
  token = new URL(inspectorUrl).searchParams.get('token')!;
  secrets.push(info.api_key, secret, token);
  [agent, writer] = await Promise.all([mcp(), mcp(['--allow-write'])]);
}, 120_000);

afterAll(async () => {
  for (const s of sessions) await s.close().catch(() => undefined);
  await listen?.stop();
  await emu?.stop();
  await app?.close();
});

describe('wxhooks mcp beside a running listen --inspect', () => {
  it('finds the running listen through the store folder, and says which: its pid, inspector (no token), receiver, app and webhook', async () => {
    const { ok, value } = await agent.call('status');
    expect(ok).toBe(true);
    expect(value.attached).toMatchObject({
      kind: 'listen',
      where: inspectorUrl.replace(/\?token=.*/, ''),
      listen: { pid: listen.pid, receiver: listenUrl, forward_to: `${app.url}/hooks`, webhook_id: webhookId },
      replay_to: `${app.url}/hooks`,
    });
    expect(value.write_tools).toBe(false);
    expect(agent.stderr()).toContain(`attached to listen ${listen.pid}`);
  }, 120_000);

  let accepted: number;
  it("an agent's session: a delivery it waited for; a refused one and why; a replay with an edit and the app's new answer beside the old", async () => {
    const { value: before } = await agent.call('list_deliveries');
    const waiting = agent.call('wait_for_delivery', { type: 'forecast_hour.available', after_id: before.newest_id, timeout_seconds: 30 });
    await publish({ type: 'forecast_hour.available', model: 'wm-6', forecast_hour: 6 });
    const { value: came } = await waiting;
    expect(came).toMatchObject({ arrived: true, delivery: { type: 'forecast_hour.available', outcome: 'accepted', model: 'wm-6', forecast_hour: 6 } });
    accepted = came.delivery.id;

    // a request signed with another secret, and one signed an hour ago: refused, and the page of refused ones says so
    expect((await post(listenUrl, signed('trg_wrong_secret', { secret: OTHER_SECRET }).headers, signed('trg_wrong_secret', { secret: OTHER_SECRET }).body)).status).toBe(401);
    const stale = signed('trg_stale', { secret, timestamp: Math.floor(Date.now() / 1000) - 3600 });
    expect((await post(listenUrl, stale.headers, stale.body)).status).toBe(401);
    const { value: refused } = await agent.call('list_deliveries', { verified: false });
    expect(refused.deliveries.map((d: { claimed_trigger_id: string }) => d.claimed_trigger_id)).toEqual(['trg_stale', 'trg_wrong_secret']);
    const { value: wrong } = await agent.call('get_delivery', { id: refused.deliveries[1].id });
    expect(wrong.verification).toMatchObject({ verified: false, reason: 'no_match' });
    expect(wrong.verification.message).toMatch(/secret/);
    expect(wrong.verification.hint).toBeTruthy();
    expect(wrong.request.headers['trigger-id']).toBe('trg_wrong_secret');
    expect(JSON.parse(wrong.request.body)).toMatchObject({ trigger_id: 'trg_wrong_secret' });
    expect(wrong.app).toBeNull();
    const { value: old } = await agent.call('get_delivery', { id: refused.deliveries[0].id });
    expect(old.verification).toMatchObject({ verified: false, reason: 'timestamp_out_of_window' });
    expect(old.verification.skew_seconds).toBeGreaterThanOrEqual(3600);

    // the delivery whole: headers, body, verdict, the app's answer, its attempts
    const { value: whole } = await agent.call('get_delivery', { id: accepted, max_body_bytes: 40 });
    expect(whole).toMatchObject({ id: accepted, type: 'forecast_hour.available', verification: { verified: true, layout: 'standard' }, app: { ok: true, status: 200, headers: { 'x-app': 'demo' } } });
    expect(whole.request.shown).toBeLessThanOrEqual(40);
    expect(whole.request).toMatchObject({ cut: 'max_body_bytes', size: Number(whole.request.headers['content-length']) });
    expect(whole.attempts.count).toBe(1);

    // replay with an edit: the app now refuses it, and says why, beside its earlier 200
    const { value: full } = await agent.call('get_delivery', { id: accepted });
    expect(full.request.cut).toBeNull();
    const edited = JSON.stringify({ ...JSON.parse(full.request.body), data: { fail: 'no model' } });
    const sentBefore = app.requests.length;
    // read-only, an edited replay is not offered (it would sign the agent's body with the webhook's secret)
    const readOnly = await agent.call('replay_delivery', { id: accepted, body: edited });
    expect(readOnly.ok).toBe(false);
    expect(readOnly.text).toContain('"body"');
    expect(app.requests.length).toBe(sentBefore);
    const { ok, value: replay } = await writer.call('replay_delivery', { id: accepted, body: edited });
    expect(ok).toBe(true);
    expect(replay).toMatchObject({ replayed: accepted, edited: true, to: `${app.url}/hooks`, before: { ok: true, status: 200 }, now: { ok: false, status: 422, headers: { 'x-app': 'demo' } } });
    expect(JSON.parse(replay.now.body)).toEqual({ error: 'missing data.model' });
    const got = app.requests[sentBefore]!;
    expect(got.body).toBe(edited);
    expect(got.headers['x-wxhooks-replay']).toBe('edited');
    expect(verifyDelivery({ secret, headers: got.headers, body: got.body }).ok).toBe(true); // signed afresh
    const { value: replays, marked } = await agent.call('list_deliveries', { outcome: 'replayed' });
    expect(marked).toBe(true);
    expect(replays.deliveries[0]).toMatchObject({ id: replay.replay_id, replay_of: accepted, replay_edited: true });

    // what did not verify is never signed again
    const { ok: no, value: never } = await agent.call('replay_delivery', { id: refused.deliveries[1].id });
    expect(no).toBe(false);
    expect(never).toMatchObject({ error: 'not verified', exit_code: 9 });
  }, 120_000);

  it('waits for a whole run: complete when every hour came, and when one is missing, it says which', async () => {
    const init = '2026-11-20T06:00:00Z';
    const run = runCli(['trigger', 'run', '--model', 'wm-6', '--init-time', init, '--hours', '0-12/6'], { env });
    const { value: three } = await agent.call('wait_for_run', { model: 'wm-6', initialization_time: init, expect_hours: '0-12/6', timeout_seconds: 30 });
    expect((await run).code).toBe(0);
    expect(three).toMatchObject({ complete: true, run: { model: 'wm-6', initialization_time: init, have: [0, 6, 12], missing: [], init_event: true } });

    // the listen expects 0-18/6: +18h has not come
    const { value: short } = await agent.call('wait_for_run', { model: 'wm-6', initialization_time: '2026-11-20T06:00Z', timeout_seconds: 0.5 });
    expect(short).toMatchObject({ complete: false, run: { have: [0, 6, 12], missing: [18] }, missing_hours: '+18h' });
    expect(short.said).toContain('missing +18h');
    const { value: runs } = await agent.call('list_runs');
    expect(runs.runs.find((r: { initialization_time: string }) => r.initialization_time === init)).toMatchObject({ hours: '+0h-+12h/6', missing: '+18h', complete: false, init_event: true });

    // and when it comes while waiting, the wait ends with it
    const waiting = agent.call('wait_for_run', { model: 'wm-6', initialization_time: init, timeout_seconds: 30 });
    await publish({ type: 'forecast_hour.available', model: 'wm-6', initialization_time: init, forecast_hour: 18 });
    expect((await waiting).value).toMatchObject({ complete: true, run: { have: [0, 6, 12, 18], missing: [] } });

    // without initialization_time: the next run to become complete, not one complete already (#41.19)
    const first = '2026-11-21T00:00:00Z';
    expect((await runCli(['trigger', 'run', '--model', 'wm-next', '--init-time', first, '--hours', '0-12/6'], { env })).code).toBe(0);
    await agent.call('wait_for_run', { model: 'wm-next', initialization_time: first, expect_hours: '0-12/6', timeout_seconds: 30 });
    const { value: notYet } = await agent.call('wait_for_run', { model: 'wm-next', expect_hours: '0-12/6', timeout_seconds: 0.5 });
    expect(notYet).toMatchObject({ complete: false, run: null });
    expect(notYet.said).toContain('not complete when the wait began');
    const next = '2026-11-21T06:00:00Z';
    const waitingNext = agent.call('wait_for_run', { model: 'wm-next', expect_hours: '0-12/6', timeout_seconds: 30 });
    expect((await runCli(['trigger', 'run', '--model', 'wm-next', '--init-time', next, '--hours', '0-12/6'], { env })).code).toBe(0);
    expect((await waitingNext).value).toMatchObject({ complete: true, run: { model: 'wm-next', initialization_time: next, missing: [] } });
  }, 120_000);

  it('deliveries are resources: read one whole, and a subscriber is told when a new one arrives', async () => {
    const listed = await agent.client.listResources();
    expect(listed.resources.map((r) => r.uri)).toContain('wxhooks://deliveries');
    expect(listed.resources.some((r) => /^wxhooks:\/\/deliveries\/\d+$/.test(r.uri))).toBe(true);
    const one = await agent.client.readResource({ uri: `wxhooks://deliveries/${accepted}` });
    expect(JSON.parse(unmarked((one.contents[0] as { text: string }).text)!)).toMatchObject({ id: accepted, verification: { verified: true } });

    const updated: string[] = [];
    let told: () => void = () => undefined;
    agent.client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => {
      updated.push(n.params.uri);
      told();
    });
    agent.client.setNotificationHandler(ResourceListChangedNotificationSchema, () => undefined);
    await agent.client.subscribeResource({ uri: 'wxhooks://deliveries' });
    const notified = new Promise<void>((resolve) => (told = resolve));
    await publish({ type: 'initialization_time.available', model: 'wm-6' });
    await notified;
    expect(updated).toContain('wxhooks://deliveries');
    const list = JSON.parse(unmarked(((await agent.client.readResource({ uri: 'wxhooks://deliveries' })).contents[0] as { text: string }).text)!);
    expect(list.deliveries[0]).toMatchObject({ type: 'initialization_time.available' });
    await agent.client.unsubscribeResource({ uri: 'wxhooks://deliveries' });
    await expect(agent.client.readResource({ uri: 'wxhooks://deliveries/999999' })).rejects.toThrow(/No delivery 999999 is kept/);
  }, 120_000);

  it("verifies a delivery offline (kept, saved, or given), and sends a signed one: the receiver's answer, 2xx or not", async () => {
    expect((await agent.call('verify_delivery', { id: accepted })).value).toMatchObject({ verified: true, layout: 'standard', type: 'forecast_hour.available', webhook_id: webhookId });
    const file = join(saveDir, readdirSync(saveDir)[0]!);
    expect((await agent.call('verify_delivery', { file })).value).toMatchObject({ verified: true });
    const saved = JSON.parse(readFileSync(file, 'utf8')) as { headers: Record<string, string>; body: string; received_at: string };
    // the body as a framework would hand it over, parsed and written again: the verdict says so
    const given = await agent.call('verify_delivery', { headers: saved.headers, body: JSON.stringify(JSON.parse(saved.body), null, 2), at: saved.received_at });
    expect(given.value).toMatchObject({ verified: false, reason: 'body_reformatted' });
    expect(given.value.hint).toBeTruthy();
    expect((await agent.call('verify_delivery', { id: accepted, secret_env: 'OTHER' })).value).toMatchObject({ verified: false, reason: 'no_match' });

    expect((await writer.call('send_delivery', { to: `${app.url}/hooks`, type: 'degree_days.available' })).value).toMatchObject({ delivered: true, status: 200, layout: 'standard' });
    const last = app.requests.at(-1)!;
    expect(last.json).toMatchObject({ type: 'degree_days.available' });
    expect(verifyDelivery({ secret, headers: last.headers, body: last.body }).ok).toBe(true);
    // a stale timestamp: the listen refuses it, and the answer says so (an answer, not an error)
    expect((await writer.call('send_delivery', { to: listenUrl, timestamp: 1_700_000_000 })).value).toMatchObject({ delivered: false, status: 401 });
    // what an app echoes back is redacted: the API key never comes back through an answer
    const echo = await writer.call('send_delivery', { to: `${app.url}/hooks`, body: JSON.stringify({ echo: env.WX_API_KEY }) });
    expect(echo.value.answer_start).toContain('***');
  });

  it('the service: credentials, webhooks and subscriptions read, a ping, the doctor', async () => {
    expect((await agent.call('auth_status')).value).toMatchObject({ authed: true, client_id: 'emulator', base_url: env.WX_BASE_URL, base_url_from: 'WX_BASE_URL' });
    const { value: hooks } = await agent.call('list_webhooks', { page_size: 5 });
    expect(hooks.webhooks.map((h: { id: string }) => h.id)).toContain(webhookId);
    const { value: one } = await agent.call('get_webhook', { webhook_id: webhookId });
    expect(one).toMatchObject({ webhook: { id: webhookId }, secret_stored: true });
    expect(one.webhook.subscriptions.map((s: { type: string }) => s.type).sort()).toEqual(['forecast_hour.available', 'initialization_time.available']);
    const sub = one.webhook.subscriptions.find((s: { type: string }) => s.type === 'forecast_hour.available').id;

    const { value: newest } = await agent.call('list_deliveries', { limit: 1 });
    expect((await agent.call('ping', { webhook_id: webhookId, subscription_id: sub })).value).toEqual({ delivered: true, webhook_id: webhookId, subscription_id: sub });
    const { value: test } = await agent.call('wait_for_delivery', { after_id: newest.newest_id, timeout_seconds: 30 });
    expect(test.delivery).toMatchObject({ test: true, outcome: 'accepted' });

    const { value: doctor } = await agent.call('doctor');
    expect(doctor.checks[0]).toMatchObject({ name: 'credentials', ok: true });
    expect(doctor.webhooks.map((h: { id: string }) => h.id)).toContain(webhookId);
    const { value: chain } = await agent.call('doctor', { webhook_id: webhookId });
    expect(chain.checks.find((c: { name: string }) => c.name === 'secret')).toMatchObject({ ok: true });
  }, 120_000);

  it('errors keep their meaning: not found, refused, credentials, unreachable', async () => {
    expect((await agent.call('get_webhook', { webhook_id: '987654' })).value).toMatchObject({ error: 'not found', exit_code: 4, status: 404 });
    expect((await agent.call('get_delivery', { id: 987_654 })).value).toMatchObject({ error: 'not found', exit_code: 4 });
    expect((await agent.call('ping', { webhook_id: webhookId, subscription_id: '987654' })).value).toMatchObject({ error: 'not found', exit_code: 4 });
    const [wrongKey, away] = await Promise.all([
      mcp(['--service-only'], { WX_API_KEY: `wb_${Buffer.from('emulator:not-the-key').toString('base64')}` }),
      freePort().then((port) => mcp(['--service-only'], { WX_BASE_URL: `http://127.0.0.1:${port}` })),
    ]);
    expect((await wrongKey.call('auth_status')).value).toMatchObject({ error: 'credentials', exit_code: 3, status: 401 });
    const { ok, value } = await away.call('list_webhooks');
    expect(ok).toBe(false);
    expect(value).toMatchObject({ error: 'unreachable', exit_code: 6 });
    expect(value.message).toContain('connection refused');
    // --service-only offers no delivery tools at all
    expect((await away.client.listTools()).tools.map((t) => t.name)).not.toContain('list_deliveries');
  }, 120_000);

  it('bad arguments: an unknown one is refused, not ignored, and every error names the argument', async () => {
    const unknown = await agent.call('list_deliveries', { limt: 5 });
    expect(unknown.ok).toBe(false);
    expect(unknown.text).toContain('"limt"');
    const wrongType = await agent.call('get_delivery', { id: 'seven' });
    expect(wrongType.ok).toBe(false);
    expect(wrongType.text).toMatch(/expected number.*\bid\b/);
    const tooMany = await agent.call('list_deliveries', { limit: 5000 });
    expect(tooMany.text).toMatch(/limit/);
    expect((await agent.call('wait_for_run', { expect_hours: '0-12/0', timeout_seconds: 1 })).value).toMatchObject({ error: 'usage', exit_code: 2 });
    expect((await agent.call('wait_for_run', { expect_hours: '0-12/0', timeout_seconds: 1 })).value.message).toContain('expect_hours');
    expect((await agent.call('list_deliveries', { since: 'yesterday' })).value.message).toContain('since');
    expect((await agent.call('verify_delivery', { id: accepted, file: 'x.json' })).value.message).toBe('Give one of id, file or headers, not id and file.');
    expect((await writer.call('send_delivery', { to: `${app.url}/hooks`, body: '{}', type: 'x' })).value.message).toContain('type is for a body made here');
    expect((await writer.call('send_delivery', { to: 'localhost:3000' })).value.message).toContain('to has no scheme');
    expect((await agent.call('get_webhook', { webhook_id: '../all' })).value.message).toContain('webhook_id');
  }, 120_000);
});

describe('write tools', () => {
  it('are not offered without --allow-write: not listed, and not callable', async () => {
    const names = (await agent.client.listTools()).tools.map((t) => t.name);
    for (const w of ['send_delivery', 'create_webhook', 'update_webhook', 'delete_webhook', 'add_subscription', 'update_subscription', 'remove_subscription']) expect(names).not.toContain(w);
    const r = await agent.call('create_webhook', { url: 'http://127.0.0.1:9/' });
    expect(r.ok).toBe(false);
    expect(r.text).toContain('Tool create_webhook not found');
  }, 120_000);

  it('with --allow-write, each is planned with dry_run (the exact requests, what would change, nothing sent), then done', async () => {
    const w = await mcp(['--allow-write']);
    const count = async () => ((await w.call('list_webhooks')).value as { total: number }).total;
    const total = await count();
    const target = `http://127.0.0.1:${await freePort()}/hooks`;
    const subscriptions = [{ type: 'degree_days.available', models: ['wm-6'], hours: ['0:00', '12:00'] }];
    const plan = await w.call('create_webhook', { url: target, name: 'from the agent', subscriptions, dry_run: true });
    expect(plan.value).toEqual({
      dry_run: true,
      requests: [
        {
          method: 'POST',
          url: `${env.WX_BASE_URL}/webhooks/v1`,
          body: { url: target, name: 'from the agent', subscriptions: { 'degree_days.available': { filters: { model: 'wm-6', initialization_time_hours: ['0:00', '12:00'] } } } },
        },
      ],
      changes: [expect.objectContaining({ action: 'create' })],
      warnings: [],
    });
    expect(await count()).toBe(total);

    const made = await w.call('create_webhook', { url: target, name: 'from the agent', subscriptions });
    expect(made.value).toMatchObject({ created: { url: target, name: 'from the agent', subscriptions: [{ type: 'degree_days.available' }] }, secret_stored: true });
    const id = made.value.created.id as string;
    const stored = (await runCli(['secret', 'show', id], { env })).stdout.trim();
    expect(stored).toMatch(/^whsec_/);
    secrets.push(stored);
    expect(await count()).toBe(total + 1);

    const off = await w.call('update_webhook', { webhook_id: id, active: false, note: 'paused by the agent', dry_run: true });
    expect(off.value).toEqual({
      dry_run: true,
      requests: [{ method: 'PATCH', url: `${env.WX_BASE_URL}/webhooks/v1/${id}`, body: { note: 'paused by the agent', active: false } }],
      changes: [{ action: 'update', webhook_id: id, fields: { note: { from: null, to: 'paused by the agent' }, active: { from: true, to: false } } }],
    });
    expect((await w.call('get_webhook', { webhook_id: id })).value.webhook.active).toBe(true);
    expect((await w.call('update_webhook', { webhook_id: id, active: false })).value.updated.active).toBe(false);

    const twice = await w.call('add_subscription', { webhook_id: id, type: 'degree_days.available', dry_run: true });
    expect(twice.value.would_fail).toContain('409');
    expect((await w.call('add_subscription', { webhook_id: id, type: 'degree_days.available' })).value).toMatchObject({ error: 'refused', exit_code: 5, status: 409 });
    const add = await w.call('add_subscription', { webhook_id: id, type: 'events.available', event_types: ['heatwave'], dry_run: true });
    expect(add.value.requests).toEqual([
      { method: 'PATCH', url: `${env.WX_BASE_URL}/webhooks/v1/${id}/subscriptions`, body: { subscription_type: 'events.available', filters: { event_type: ['heatwave'] } } },
    ]);
    expect((await w.call('get_webhook', { webhook_id: id })).value.webhook.subscriptions).toHaveLength(1);
    const added = (await w.call('add_subscription', { webhook_id: id, type: 'events.available', event_types: ['heatwave'] })).value.added;
    expect(added).toMatchObject({ type: 'events.available', filters: { event_type: ['heatwave'] } });

    const change = await w.call('update_subscription', { webhook_id: id, subscription_id: added.id, event_types: ['coldwave'], response: 'event_context', dry_run: true });
    expect(change.value.changes[0].fields).toEqual({
      filters: { from: { event_type: ['heatwave'] }, to: { event_type: ['coldwave'] } },
      response_options: { from: null, to: { type: 'event_context' } },
    });
    expect((await w.call('update_subscription', { webhook_id: id, subscription_id: added.id, event_types: ['coldwave'], response: 'event_context' })).value.updated).toMatchObject({
      filters: { event_type: ['coldwave'] },
      response_options: { type: 'event_context' },
    });
    expect((await w.call('update_subscription', { webhook_id: id, subscription_id: added.id, response_options: { coordinates: '1,2' }, dry_run: true })).value.message).toBe(
      'response_options go with response: the options belong to a response type.',
    );
    expect((await w.call('update_subscription', { webhook_id: id, subscription_id: added.id })).value.message).toMatch(/^Nothing to update: give models, hours/);
    const cut = await w.call('remove_subscription', { webhook_id: id, subscription_id: added.id, dry_run: true });
    expect(cut.value.requests).toEqual([{ method: 'DELETE', url: `${env.WX_BASE_URL}/webhooks/v1/${id}/subscriptions/${added.id}` }]);
    expect((await w.call('get_webhook', { webhook_id: id })).value.webhook.subscriptions).toHaveLength(2);
    expect((await w.call('remove_subscription', { webhook_id: id, subscription_id: added.id })).value).toEqual({ removed: true, webhook_id: id, subscription_id: added.id });

    const gone = await w.call('delete_webhook', { webhook_id: id, dry_run: true });
    expect(gone.value).toMatchObject({
      requests: [{ method: 'DELETE', url: `${env.WX_BASE_URL}/webhooks/v1/${id}` }],
      changes: [{ action: 'delete', subscriptions: 1, stored_secret: 'would be forgotten' }],
    });
    expect(await count()).toBe(total + 1);
    expect((await w.call('delete_webhook', { webhook_id: id })).value).toEqual({ deleted: true, webhook_id: id, secret_removed: true });
    expect((await w.call('get_webhook', { webhook_id: id })).value).toMatchObject({ error: 'not found' });
    expect((await runCli(['secret', 'show', id], { env })).code).toBe(4);
    expect((await w.call('update_webhook', { webhook_id: id, dry_run: true })).value.message).toBe('Nothing to update: give url, name, note or active.');
  }, 120_000);
});

describe('a kept history: a --save-dir folder', () => {
  it('lists and opens what listen saved, waits for a new file, and replays only with --forward-to', async () => {
    const [readOnly, s] = await Promise.all([mcp(['--save-dir', saveDir]), mcp(['--save-dir', saveDir, '--forward-to', `${app.url}/hooks`, '--webhook', webhookId])]);
    expect((await readOnly.call('status')).value.attached).toMatchObject({ kind: 'save-dir', where: saveDir, replay_to: null });
    const { value: listed } = await readOnly.call('list_deliveries', { type: 'forecast_hour.available', limit: 100 });
    expect(listed.deliveries.length).toBe(readdirSync(saveDir).filter((n) => JSON.parse(readFileSync(join(saveDir, n), 'utf8')).body.includes('forecast_hour.available')).length);
    expect((await readOnly.call('replay_delivery', { id: listed.deliveries[0].id })).value).toMatchObject({ error: 'refused' });

    const { value: all } = await s.call('list_deliveries');
    const waiting = s.call('wait_for_delivery', { type: 'forecast_hour.available', after_id: all.newest_id, timeout_seconds: 30 });
    await publish({ type: 'forecast_hour.available', model: 'wm-9', forecast_hour: 12 });
    const { value: came } = await waiting;
    expect(came).toMatchObject({ arrived: true, delivery: { type: 'forecast_hour.available', model: 'wm-9', forecast_hour: 12, outcome: 'accepted' } });
    const before = app.requests.length;
    const { value: replay } = await s.call('replay_delivery', { id: came.delivery.id });
    expect(replay).toMatchObject({ replayed: came.delivery.id, edited: false, now: { ok: true, status: 200, headers: { 'x-app': 'demo' } }, before: null });
    expect(JSON.parse(replay.now.body)).toEqual({ stored: came.delivery.trigger_id });
    expect(app.requests[before]!.headers['x-wxhooks-replay']).toBe('1');
    expect(verifyDelivery({ secret, headers: app.requests[before]!.headers, body: app.requests[before]!.body }).ok).toBe(true);
  }, 120_000);
});

describe('starting and stopping', () => {
  it('exits 0 when its client closes stdin, and says so on stderr', async () => {
    expect(await agent.close()).toEqual({ code: 0, signal: null });
    expect(agent.stderr()).toContain('the client closed stdin: stopped');
  }, 120_000);

  it("with no listen running, it starts anyway: its tools say what to start, and it finds the listen once one runs (#41.19); a dead listen's record is passed over", async () => {
    const empty = tempDir();
    // the record a listen killed with -9 leaves behind: its pid is dead
    const dead = spawn(process.execPath, ['-e', '0']);
    await new Promise((r) => dead.once('exit', r));
    mkdirSync(join(empty, 'running'), { recursive: true });
    const stale = join(empty, 'running', `listen-${dead.pid}.json`);
    writeFileSync(
      stale,
      JSON.stringify({
        pid: dead.pid,
        host: '127.0.0.1',
        port: Number(new URL(listenUrl).port),
        receiver: listenUrl,
        inspector: inspectorUrl.replace(/\?.*/, ''),
        forward_to: null,
        webhook_id: null,
        base_url: null,
        started: new Date().toISOString(),
      }),
      { mode: 0o600 },
    );
    const s = await mcp([], { WXHOOKS_CONFIG_DIR: empty });
    expect(s.stderr()).toContain('attached to nothing yet');
    expect(existsSync(stale)).toBe(false);
    expect((await s.client.listTools()).tools.map((t) => t.name)).toContain('list_deliveries');
    const { value: before } = await s.call('status');
    expect(before.attached).toMatchObject({ kind: 'listen', replay_to: null });
    expect(before.attached.waiting).toContain('wxhooks listen --webhook ID --inspect');
    const none = await s.call('list_deliveries');
    expect(none.ok).toBe(false);
    expect(none.value).toMatchObject({ error: 'not found', exit_code: 4 });
    expect(none.value.hint).toContain('finds it by itself');

    // a listen started now, in that store folder: found by the next call, no restart
    const l = startCliInProcess(['listen', '--port', '0', '--json', '--secret-env', 'S', '--inspect', '127.0.0.1:0'], { S: OTHER_SECRET, WXHOOKS_CONFIG_DIR: empty });
    await l.waitFor<{ event?: string }>((v) => v.event === 'inspector');
    try {
      expect((await s.call('list_deliveries')).value).toMatchObject({ deliveries: [], newest_id: 0 });
      const { value: after } = await s.call('status');
      expect(after.attached.listen.pid).toBe(l.pid);
      expect(after.attached.waiting).toBeUndefined();
    } finally {
      await l.stop();
    }
  }, 120_000);

  it('--listen: a listen that does not answer yet is said by each tool, not an exit; a token it refuses is exit 3; the link it printed works from any store folder', async () => {
    const port = await freePort();
    const [away, refused, linked] = await Promise.all([
      mcp(['--listen', `http://127.0.0.1:${port}/`]),
      runCli(['mcp', '--listen', `${inspectorUrl.replace(/\?.*/, '')}?token=not-the-token`], { env: { ...env, WXHOOKS_CONFIG_DIR: tempDir() }, timeoutMs: 90_000 }),
      mcp(['--listen', inspectorUrl], { WXHOOKS_CONFIG_DIR: tempDir() }),
    ]);
    const gone = await away.call('list_deliveries');
    expect(gone.value).toMatchObject({ error: 'unreachable', exit_code: 6 });
    expect(gone.value.message).toContain('does not answer: connection refused');
    expect((await away.call('status')).value.attached.waiting).toContain('does not answer');
    expect(refused.code).toBe(3);
    expect(refused.stderr).toContain('refused this server (403)');
    expect((await linked.call('list_deliveries', { limit: 1 })).value.newest_id).toBeGreaterThan(0);
    expect((await linked.call('status')).value.attached.where).toBe(inspectorUrl.replace(/\?.*/, ''));
  }, 120_000);

  it('the running listen records itself while it runs, removes the record when it stops, and a restarted one is followed', async () => {
    const other = tempDir();
    const start = () => startCliInProcess(['listen', '--port', '0', '--json', '--secret-env', 'S', '--inspect', '127.0.0.1:0'], { S: OTHER_SECRET, WXHOOKS_CONFIG_DIR: other });
    const l = start();
    const link = (await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url;
    const record = join(other, 'running', `listen-${l.pid}.json`);
    expect(JSON.parse(readFileSync(record, 'utf8'))).toMatchObject({ pid: l.pid, inspector: link.replace(/\?.*/, ''), forward_to: null, webhook_id: null });
    expect(readFileSync(record, 'utf8')).not.toContain(new URL(link).searchParams.get('token')!);
    const s = await mcp([], { WXHOOKS_CONFIG_DIR: other });
    expect((await s.call('status')).value.attached.listen.pid).toBe(l.pid);
    expect(await l.stop()).toBe(130);
    expect(existsSync(record)).toBe(false);
    // started again, on other ports: the server follows it through the store folder
    const again = start();
    await again.waitFor<{ event?: string }>((v) => v.event === 'inspector');
    try {
      expect((await s.call('list_deliveries')).value).toMatchObject({ deliveries: [], newest_id: 0 });
      expect((await s.call('status')).value.attached.listen.pid).toBe(again.pid);
    } finally {
      await again.stop();
    }
    const { ok, value } = await s.call('list_deliveries');
    expect(ok).toBe(false);
    expect(value).toMatchObject({ error: 'unreachable', exit_code: 6 });
  }, 120_000);
});

describe('secrets', () => {
  it('every tool was called, and no answer, error or log holds the API key, a webhook secret or the inspector token', () => {
    const offered = [
      'status',
      'list_deliveries',
      'get_delivery',
      'wait_for_delivery',
      'wait_for_run',
      'list_runs',
      'replay_delivery',
      'verify_delivery',
      'send_delivery',
      'auth_status',
      'list_webhooks',
      'get_webhook',
      'ping',
      'doctor',
      'create_webhook',
      'update_webhook',
      'delete_webhook',
      'add_subscription',
      'update_subscription',
      'remove_subscription',
    ];
    const called = new Set(sessions.flatMap((s) => [...s.called]));
    for (const name of offered) expect(called, name).toContain(name);
    expect(secrets).toHaveLength(4);
    const said = sessions.flatMap((s) => [...s.answers, s.stderr()]);
    expect(said.length).toBeGreaterThan(50);
    for (const text of said) for (const s of secrets) expect(text.includes(s), `${s.slice(0, 8)}… in ${text.slice(0, 200)}`).toBe(false);
  });
});
