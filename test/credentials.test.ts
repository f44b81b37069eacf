import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authProblem, emulatorCredentials } from '../src/emulator/auth.js';
import { startEmulator, type RunningEmulator } from '../src/emulator/server.js';
import { runInProcess } from './helpers/context.js';
import { sendJson, startServer, type Recorded, type TestServer } from './helpers/server.js';

// Credentials exactly as the live service expects them (SERVICE.md, appendix), on the wire.

const CLIENT = 'acme_weather';
const LEGACY_KEY = 'K'.repeat(32);
const WB_SECRET = LEGACY_KEY; // the current key of the same credentials: both forms work everywhere
const WB_KEY = `wb_${Buffer.from(`${CLIENT}:${WB_SECRET}`).toString('base64').replace(/=+$/, '')}`; // padding optional

const b64url = (b: Buffer) => b.toString('base64url');

/**
 * The live service's rules, written here without any of wxhooks' code: Bearer with the current key
 * or a key alone; Basic with the client id and a token that this server checks itself (its own HMAC over
 * the token's first two parts, HS256, client_id, iat within 5 minutes).
 */
function liveRules(authorization: string | undefined, nowMs = Date.now()): string | undefined {
  if (!authorization) return 'no credentials';
  if (authorization === `Bearer ${WB_KEY}` || authorization === `Bearer ${LEGACY_KEY}`) return undefined;
  if (!authorization.startsWith('Basic ')) return 'unknown scheme';
  const [user, token] = Buffer.from(authorization.slice(6), 'base64').toString('utf8').split(/:(.*)/s);
  if (user !== CLIENT) return 'unknown client';
  const [head, body, signature] = (token ?? '').split('.');
  const expected = b64url(createHmac('sha256', Buffer.from(LEGACY_KEY)).update(`${head}.${body}`).digest());
  if (signature !== expected) return 'bad token signature';
  if ((JSON.parse(Buffer.from(head!, 'base64url').toString()) as { alg?: string }).alg !== 'HS256') return 'not HS256';
  const claims = JSON.parse(Buffer.from(body!, 'base64url').toString()) as { client_id?: string; iat?: number };
  if (claims.client_id !== CLIENT) return 'wrong client_id claim';
  if (typeof claims.iat !== 'number' || !Number.isInteger(claims.iat) || Math.abs(nowMs / 1000 - claims.iat) > 300) return 'stale or missing iat';
  return undefined;
}

let strict: TestServer;
let receiver: TestServer;
let documented: RunningEmulator;
let live: RunningEmulator;

beforeAll(async () => {
  receiver = await startServer((_req, res) => sendJson(res, 200, { ok: true }));
  strict = await startServer((req: Recorded, res) => {
    const problem = liveRules(req.headers.authorization);
    if (problem) return sendJson(res, 401, { detail: `not authenticated: ${problem}` });
    if (req.path === '/debug/v1/auth_status') return sendJson(res, 200, { authed: true, client_id: CLIENT });
    if (req.path === '/webhooks/v1') return sendJson(res, 200, { webhooks: [{ id: 1, url: 'https://example.com/h', subscriptions: [{ id: 2, subscription_type: 'forecast_hour.available' }] }], page: 1, page_size: 20, total: 1 });
    if (req.path === '/webhooks/v1/1/subscriptions/2/ping') {
      res.writeHead(204).end();
      return;
    }
    return sendJson(res, 404, { detail: 'not found' });
  });
  // emulators with the same credentials: the legacy key, so that all three forms of credentials apply
  documented = await startEmulator({ port: 0, apiKey: LEGACY_KEY, clientId: CLIENT, retryDelays: [] });
  live = await startEmulator({ port: 0, apiKey: LEGACY_KEY, clientId: CLIENT, retryDelays: [], shape: 'live' });
  for (const emu of [documented, live]) {
    const created = await fetch(`${emu.url}/webhooks/v1`, {
      method: 'POST',
      headers: { authorization: `Bearer ${LEGACY_KEY}`, 'content-type': 'application/json' },
      body: JSON.stringify({ url: `${receiver.url}/hook`, subscriptions: { 'forecast_hour.available': {} } }),
    });
    expect(created.status).toBe(201);
  }
});

afterAll(async () => {
  await Promise.all([strict.close(), receiver.close(), documented.close(), live.close()]);
});

const KINDS: [string, Record<string, string>, RegExp][] = [
  ['a wb_ key in WB_API_KEY', { WB_API_KEY: WB_KEY }, /^Bearer wb_/],
  ['a bare key in WX_API_KEY', { WX_API_KEY: LEGACY_KEY }, /^Bearer K{32}$/],
  ['a client id and a key in the WB_ variables', { WB_CLIENT_ID: CLIENT, WB_API_KEY: LEGACY_KEY }, /^Basic /],
];

describe('auth status, webhook list and ping work with every form of credentials', () => {
  const servers = () =>
    [
      ['the strict server', strict.url, { webhook: '1', subscription: '2' }],
      ['the emulator (documented shape)', documented.url, { webhook: '1', subscription: '1' }],
      ['the emulator (live shape)', live.url, { webhook: '1', subscription: '1' }],
    ] as const;

  it.each(KINDS)('%s', async (_name, env, header) => {
    for (const [where, url, ids] of servers()) {
      const requestsBefore = strict.requests.length;
      const all = { ...env, WX_BASE_URL: url };
      const status = await runInProcess(['auth', 'status', '--json'], { env: all });
      expect(status.code, `${where}: ${status.stderr}`).toBe(0);
      expect(JSON.parse(status.stdout)).toMatchObject({ authed: true, client_id: CLIENT });
      const list = await runInProcess(['webhook', 'list', '--json'], { env: all });
      expect(list.code, `${where}: ${list.stderr}`).toBe(0);
      const ping = await runInProcess(['ping', ids.webhook, ids.subscription], { env: all });
      expect(ping.code, `${where}: ${ping.stderr}`).toBe(0);
      // nothing of the credentials in any output
      for (const out of [status, list, ping]) {
        for (const secret of [LEGACY_KEY, WB_SECRET, WB_KEY, Buffer.from(`${CLIENT}:${LEGACY_KEY}`).toString('base64')]) {
          expect(out.stdout + out.stderr).not.toContain(secret);
        }
        expect(out.stdout + out.stderr).not.toMatch(/eyJ[A-Za-z0-9_-]+\./);
      }
      if (url === strict.url) {
        const sent = strict.requests.slice(requestsBefore).map((r) => r.headers.authorization ?? '');
        expect(sent).toHaveLength(3);
        for (const h of sent) expect(h).toMatch(header);
      }
    }
  });

  it('a wb_ key goes whole, never split; a legacy token is minted for each request', async () => {
    const before = strict.requests.length;
    await runInProcess(['webhook', 'list', '--json'], { env: { WB_API_KEY: WB_KEY, WX_BASE_URL: strict.url } });
    expect(strict.requests[before]!.headers.authorization).toBe(`Bearer ${WB_KEY}`);
    const t0 = Math.floor(Date.now() / 1000);
    await runInProcess(['webhook', 'list', '--json'], { env: { WB_CLIENT_ID: CLIENT, WB_API_KEY: LEGACY_KEY, WX_BASE_URL: strict.url } });
    const [, token] = Buffer.from(strict.requests.at(-1)!.headers.authorization!.slice(6), 'base64').toString().split(/:(.*)/s);
    const claims = JSON.parse(Buffer.from(token!.split('.')[1]!, 'base64url').toString()) as { client_id: string; iat: number };
    expect(claims.client_id).toBe(CLIENT);
    expect(claims.iat).toBeGreaterThanOrEqual(t0);
  });

  it('the WX_ variables win when both are set; auth status says where each came from', async () => {
    const r = await runInProcess(['auth', 'status'], { env: { WX_API_KEY: WB_KEY, WB_API_KEY: 'wrong', WB_CLIENT_ID: 'other_client', WX_BASE_URL: strict.url } });
    // a wb_ key is sent as Bearer: the client id variable does not apply
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Bearer (the current key from WX_API_KEY, sent whole)');
    expect(r.stdout).toContain(`Client ID:  ${CLIENT} (in the key: ${CLIENT})`);
    const legacy = await runInProcess(['auth', 'status'], { env: { WX_CLIENT_ID: CLIENT, WB_CLIENT_ID: 'other_client', WX_API_KEY: LEGACY_KEY, WB_API_KEY: 'wrong', WX_BASE_URL: strict.url } });
    expect(legacy.code, legacy.stderr).toBe(0);
    expect(legacy.stdout).toContain('Basic (legacy: the client id from WX_CLIENT_ID, and a token signed with the key from WX_API_KEY, new for each request)');
  });
});

describe('refused before any request (exit 2), naming the variable', () => {
  it.each([
    [{ WB_API_KEY: LEGACY_KEY, WB_CLIENT_ID: 'Acme-Weather' }, [], 'WB_CLIENT_ID is not a client id'],
    [{ WX_API_KEY: LEGACY_KEY, WX_CLIENT_ID: 'has space' }, [], 'WX_CLIENT_ID is not a client id'],
    [{ WB_API_KEY: 'wb_!!!notbase64' }, [], 'WB_API_KEY starts with wb_ but is not a current key'],
    [{ WX_API_KEY: `wb_${Buffer.from('no-colon-here').toString('base64')}` }, [], 'WX_API_KEY starts with wb_ but is not a current key'],
    [{ WX_API_KEY: WB_KEY }, ['--auth', 'basic'], 'a current key (wb_...): it needs no client id'],
    [{ WX_API_KEY: LEGACY_KEY }, ['--auth', 'basic'], 'neither WX_CLIENT_ID nor WB_CLIENT_ID is set'],
  ])('%j %j', async (env, flags, says) => {
    const before = strict.requests.length;
    const r = await runInProcess(['auth', 'status', ...flags], { env: { ...env, WX_BASE_URL: strict.url } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(says);
    expect(strict.requests.length).toBe(before);
  });

  it('no key at all is exit 3, naming both variables', async () => {
    const r = await runInProcess(['auth', 'status'], { env: { WX_BASE_URL: strict.url } });
    expect(r.code).toBe(3);
    expect(r.stderr).toContain('neither WX_API_KEY nor WB_API_KEY is set');
  });
});

describe('the emulator checks credentials as the live service does', () => {
  const creds = emulatorCredentials(LEGACY_KEY, CLIENT);
  const basic = (password: string, user = CLIENT) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;
  const token = (claims: object, key = LEGACY_KEY, alg = 'HS256') => {
    const head = b64url(Buffer.from(JSON.stringify({ alg, typ: 'JWT' })));
    const body = b64url(Buffer.from(JSON.stringify(claims)));
    return `${head}.${body}.${b64url(createHmac('sha256', Buffer.from(key)).update(`${head}.${body}`).digest())}`;
  };
  const now = Date.now();
  const iat = Math.floor(now / 1000);

  it.each([
    ['Bearer with the key', `Bearer ${LEGACY_KEY}`, undefined],
    ['Bearer with its wb_ key', `Bearer ${creds.currentKey}`, undefined],
    ['Basic with the raw key (as the service text describes)', basic(LEGACY_KEY), undefined],
    ['Basic with a fresh token', basic(token({ client_id: CLIENT, iat })), undefined],
    ['a token from 10 minutes ago', basic(token({ client_id: CLIENT, iat: iat - 600 })), "the token's iat is 600 s old"],
    ['a token 10 minutes ahead', basic(token({ client_id: CLIENT, iat: iat + 600 })), "the token's iat is 600 s in the future"],
    ['a token signed with another key', basic(token({ client_id: CLIENT, iat }, 'X'.repeat(32))), 'signature does not verify'],
    ['a token for another client', basic(token({ client_id: 'someone_else', iat })), "the token's client_id (\"someone_else\")"],
    ['a token without iat', basic(token({ client_id: CLIENT })), 'has no iat'],
    ['Basic for another client', basic(LEGACY_KEY, 'someone_else'), 'not this emulator\'s client id'],
    ['a Bearer of the key\'s length in other characters', `Bearer ${'é'.repeat(16)}`, "not this emulator's key"],
    ['nothing', undefined, 'no Authorization header'],
  ])('%s', async (_name, header, problem) => {
    const found = await authProblem(header, creds, now);
    if (problem === undefined) expect(found).toBeUndefined();
    else expect(found).toContain(problem);
  });

  it('over HTTP: a refused token is a 401 that says which check failed', async () => {
    const res = await fetch(`${documented.url}/debug/v1/auth_status`, { headers: { authorization: basic(token({ client_id: CLIENT, iat: iat - 600 })) } });
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: { message: string } }).error.message).toMatch(/the token's iat is 6\d\d s old/);
  });

  it('issues a current key by default, and prints it for WX_API_KEY and WB_API_KEY', async () => {
    const emu = await startEmulator({ port: 0, retryDelays: [] });
    try {
      expect(emu.apiKey).toMatch(/^wb_/);
      expect(Buffer.from(emu.apiKey.slice(3), 'base64').toString()).toBe(`emulator:${emu.secret}`);
      expect(emu.secret).toMatch(/^[0-9a-f]{32}$/);
    } finally {
      await emu.close();
    }
  });
});
