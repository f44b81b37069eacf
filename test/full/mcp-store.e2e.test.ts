import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyDelivery } from '../../src/signing/index.js';
import { spawnCli, tempDir } from '../helpers/cli.js';
import { post } from '../helpers/http.js';
import { startMcp, type McpSession } from '../helpers/mcp.js';
import { startCli, type Running } from '../helpers/process.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { sendJson, startServer, type TestServer } from '../helpers/server.js';

// `wxhooks mcp --store postgres://…`: the history that receivers sharing a real PostgreSQL store keep,
// read (never written) by the MCP server, with replays to --forward-to. The database's password must
// never be in an answer, an error or a log.

const OTHER = `whsec_${Buffer.alloc(32, 5).toString('base64')}`;
const SCHEMA = `mcp_${process.pid}`;
const INIT = '2026-11-23T12:00:00Z';
let pg: SharedPostgres;
let app: TestServer;
let listen: Running;
let listenUrl: string;
const sessions: McpSession[] = [];
let s: McpSession;

const deliver = async (trigger: string, hour: number, secret = TEST_SECRET, type = 'forecast_hour.available') => {
  const d = signed(trigger, { secret, data: { model: 'wm-6', initialization_time: INIT, forecast_hour: hour }, body: { type } });
  return (await post(listenUrl, d.headers, d.body)).status;
};

beforeAll(async () => {
  pg = await sharedPostgres();
  app = await startServer((req, res) => (req.body.includes('"fail"') ? sendJson(res, 422, { error: 'no model' }) : sendJson(res, 200, { ok: true })));
  listen = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--store', pg.url, '--store-schema', SCHEMA, '--history', '100', '--forward-to', `${app.url}/hooks`], { S: TEST_SECRET });
  listenUrl = (await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000)).url;
  expect(await deliver('trg_store_0', 0)).toBe(200);
  expect(await deliver('trg_store_6', 6)).toBe(200);
  expect(await deliver('trg_store_forged', 12, OTHER)).toBe(401);
  s = await startMcp(['--store', pg.url, '--store-schema', SCHEMA, '--forward-to', `${app.url}/hooks`, '--secret-env', 'S', '--allow-write'], { S: TEST_SECRET, WXHOOKS_CONFIG_DIR: tempDir() });
  sessions.push(s);
}, 120_000);

afterAll(async () => {
  for (const x of sessions) await x.close().catch(() => undefined);
  await listen?.stop();
  await app?.close();
  await pg?.remove();
});

describe('wxhooks mcp --store postgres://…', () => {
  it('reads the shared history: what was received and what was refused, and why', async () => {
    const { value: status } = await s.call('status');
    expect(status.attached).toMatchObject({ kind: 'store', replay_to: `${app.url}/hooks` });
    expect(status.attached.where).toContain('postgres:***@');
    // the history is written in batches: the refused one is there once its turn is committed
    await expect.poll(async () => (await s.call('list_deliveries')).value.matching, { timeout: 15_000 }).toBe(3);
    const { value: refused } = await s.call('list_deliveries', { verified: false });
    expect(refused.deliveries).toHaveLength(1);
    const { value: why } = await s.call('get_delivery', { id: refused.deliveries[0].id });
    expect(why).toMatchObject({ claimed_trigger_id: 'trg_store_forged', verification: { verified: false, reason: 'no_match' }, app: null });
    const { value: ok } = await s.call('list_deliveries', { trigger_id: 'trg_store_6' });
    const { value: whole } = await s.call('get_delivery', { id: ok.deliveries[0].id });
    expect(whole).toMatchObject({ trigger_id: 'trg_store_6', verification: { verified: true }, app: { ok: true, status: 200 } });
    expect((await s.call('verify_delivery', { id: ok.deliveries[0].id })).value).toMatchObject({ verified: true, layout: 'standard' });
  }, 120_000);

  it('waits for what another instance receives, and for a run: what is missing', async () => {
    const { value: now } = await s.call('list_deliveries', { limit: 1 });
    const waiting = s.call('wait_for_delivery', { type: 'forecast_hour.available', after_id: now.newest_id, timeout_seconds: 30 });
    expect(await deliver('trg_store_12', 12)).toBe(200);
    expect((await waiting).value).toMatchObject({ arrived: true, delivery: { trigger_id: 'trg_store_12', forecast_hour: 12 } });
    const { value: run } = await s.call('wait_for_run', { model: 'wm-6', expect_hours: '0-18/6', init_event: false, timeout_seconds: 0.5 });
    expect(run).toMatchObject({ complete: false, run: { initialization_time: INIT, have: [0, 6, 12], missing: [18] }, missing_hours: '+18h' });
    expect((await s.call('list_runs', { expect_hours: '0-12/6' })).value.runs[0]).toMatchObject({ model: 'wm-6', hours: '+0h-+12h/6', init_event: false, complete: false });
  }, 120_000);

  it('replays to --forward-to, signed with --secret-env, edited or not, and nothing is written to the store', async () => {
    const { value: ok } = await s.call('list_deliveries', { trigger_id: 'trg_store_0' });
    const id = ok.deliveries[0].id;
    const before = app.requests.length;
    const { value: replay } = await s.call('replay_delivery', { id, body: JSON.stringify({ type: 'forecast_hour.available', fail: true }) });
    expect(replay).toMatchObject({ replayed: id, edited: true, before: { ok: true, status: 200 }, now: { ok: false, status: 422 }, replay_id: null });
    const got = app.requests[before]!;
    expect(got.headers['x-wxhooks-replay']).toBe('edited');
    expect(verifyDelivery({ secret: TEST_SECRET, headers: got.headers, body: got.body }).ok).toBe(true);
    expect((await s.call('list_deliveries')).value.matching).toBe(4);
  }, 120_000);

  it('is found from WXHOOKS_STORE_URL when no listen runs; a store it cannot use is said, without its password', async () => {
    const fromEnv = await startMcp(['--store-schema', SCHEMA], { WXHOOKS_STORE_URL: pg.url, WXHOOKS_CONFIG_DIR: tempDir() });
    sessions.push(fromEnv);
    expect((await fromEnv.call('status')).value.attached).toMatchObject({ kind: 'store', replay_to: null });
    expect((await fromEnv.call('list_deliveries')).value.matching).toBe(4);
    const wrong = pg.url.replace(pg.password, `${pg.password}x`);
    const [refused, noHistory] = await Promise.all([
      spawnCli(['mcp', '--store', wrong], { env: { WXHOOKS_CONFIG_DIR: tempDir() }, timeoutMs: 90_000 }),
      spawnCli(['mcp', '--store', pg.url, '--store-schema', 'nothing_here'], { env: { WXHOOKS_CONFIG_DIR: tempDir() }, timeoutMs: 90_000 }),
    ]);
    expect(refused.code).toBe(6);
    expect(refused.stderr).toContain('password authentication failed');
    expect(noHistory.code).toBe(4);
    expect(noHistory.stderr).toContain('has no wxhooks history in schema "nothing_here"');
    for (const text of [refused.stderr, noHistory.stderr]) {
      expect(text).not.toContain(pg.password);
      expect(text).toContain('127.0.0.1');
    }
  }, 120_000);

  it('no answer, error or log holds the database password or the webhook secret', () => {
    const said = sessions.flatMap((x) => [...x.answers, x.stderr()]);
    expect(said.length).toBeGreaterThan(10);
    for (const text of said) {
      expect(text).not.toContain(pg.password);
      expect(text).not.toContain(TEST_SECRET);
    }
  });
});
