import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeCurrentKey, resolveCredentials } from '../src/api/credentials.js';
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
    if (req.path === '/webhooks/v1')
      return sendJson(res, 200, { webhooks: [{ id: 1, url: 'https://example.com/h', subscriptions: [{ id: 2, subscription_type: 'forecast_hour.available' }] }], page: 1, page_size: 20, total: 1 });
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
    ['a token for another client', basic(token({ client_id: 'someone_else', iat })), 'the token\'s client_id ("someone_else")'],
    ['a token without iat', basic(token({ client_id: CLIENT })), 'has no iat'],
    ['Basic for another client', basic(LEGACY_KEY, 'someone_else'), "not this emulator's client id"],
    ["a Bearer of the key's length in other characters", `Bearer ${'é'.repeat(16)}`, "not this emulator's key"],
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

// #32.13: a legacy key `wb_` + 32 hexadecimal characters was read as a current key about 1 time in 9, its
// remainder decoded leniently (bad UTF-8 replaced, any client id taken): a garbled client id "from the wb_
// key", WB_CLIENT_ID ignored, and an emulator that refused to start with it and a client id.
describe('a legacy key that begins with wb_ is never read as a current key (#32.13)', () => {
  const FOUND = 'wb_2fbf3eb3d524d25fc14c8d8302068527'; // the probe's: leniently, "client id" and secret of bytes that are not UTF-8

  /** A small seeded generator (mulberry32): the same keys on every run. */
  function seeded(seed: number) {
    let a = seed >>> 0;
    return () => {
      a = (a + 0x6d2b79f5) >>> 0;
      let t = a;
      t = Math.imul(t ^ (t >>> 15), t | 1);
      t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
      return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
    };
  }
  const random = seeded(32_13);
  const hexKeys = Array.from({ length: 5000 }, () => `wb_${Array.from({ length: 32 }, () => '0123456789abcdef'[Math.floor(random() * 16)]).join('')}`);
  // how many Buffer.from's lenient decoding takes for `client_id:secret`: what the old decoder did
  const lenient = hexKeys.filter((k) => {
    const text = Buffer.from(k.slice(3), 'base64').toString('utf8');
    const colon = text.indexOf(':');
    return colon > 0 && colon < text.length - 1;
  });

  it(`none of 5,000 random wb_ + 32 hex keys decodes (about 1 in 9 did, leniently), the probe's included`, () => {
    expect(lenient.length).toBeGreaterThan(300); // the property is tested where the old decoder failed
    expect(lenient.length).toBeLessThan(900);
    for (const key of [FOUND, ...hexKeys]) expect(decodeCurrentKey(key), key).toBeUndefined();
  });

  it('each is a legacy key: with a client id, Basic with that id (the CLI and the emulator alike); without one, refused (exit 2)', () => {
    for (const key of [FOUND, ...lenient]) {
      const c = resolveCredentials({ WB_API_KEY: key, WB_CLIENT_ID: CLIENT });
      expect(c).toMatchObject({ scheme: 'basic', clientId: CLIENT, clientIdFrom: 'WB_CLIENT_ID' });
      expect(emulatorCredentials(key, CLIENT)).toMatchObject({ apiKey: key, clientId: CLIENT, secret: key });
      expect(() => resolveCredentials({ WB_API_KEY: key })).toThrow(/starts with wb_ but is not a current key/);
    }
  });

  it("auth status with the probe's key and WB_CLIENT_ID: the legacy scheme, the client id from WB_CLIENT_ID", async () => {
    const r = await runInProcess(['auth', 'status', '--json'], { env: { WB_API_KEY: FOUND, WB_CLIENT_ID: CLIENT, WX_BASE_URL: strict.url } });
    // the strict server knows other credentials: 401 (exit 3), but what was sent, and said, is the point
    const sent = strict.requests.at(-1)!.headers.authorization!;
    expect(sent).toMatch(/^Basic /);
    expect(Buffer.from(sent.slice(6), 'base64').toString('utf8').split(':')[0]).toBe(CLIENT);
    expect(r.stderr + r.stdout).not.toContain('wb_ key');
  });

  it('strict, and still every current key decodes: padded or not, a UUID client id, any secret', () => {
    const uuid = '3f2b8c1e-9d4a-4c6b-8e2f-1a2b3c4d5e6f';
    for (const [id, secret] of [
      [CLIENT, WB_SECRET],
      [uuid, 'a'],
      ['x', 's:with:colons'],
      ['emulator', 'é ünïcode'],
    ] as const) {
      const b64 = Buffer.from(`${id}:${secret}`).toString('base64');
      for (const key of [`wb_${b64}`, `wb_${b64.replace(/=+$/, '')}`]) expect(decodeCurrentKey(key)).toEqual({ clientId: id, secret });
    }
    // what is not strictly base64 of `client_id:secret`
    const bad = (text: string) => `wb_${Buffer.from(text).toString('base64')}`;
    for (const key of [
      bad('Acme:secret'), // a client id of another form
      bad('acme:'), // no secret
      bad(':secret'),
      `wb_${Buffer.from([0x61, 0x3a, 0xff, 0xfe]).toString('base64')}`, // not UTF-8
      `${bad('acme:secret')}=`, // wrong padding
      `wb_${Buffer.from('acme:secre').toString('base64').replace(/=+$/, '').slice(0, -1)}B`, // stray bits in the last character
    ]) {
      expect(decodeCurrentKey(key), key).toBeUndefined();
    }
  });
});
