import { createServer, type Server } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import express from 'express';
import Fastify from 'fastify';
import { afterAll, beforeAll, describe, expect, expectTypeOf, it } from 'vitest';
import { MemoryStore, Webhooks, WebhookSetupError, WebhookTimeoutError, createNodeMiddleware, openStore, type WebhookEvent } from '../src/index.js';
import { manualTimers } from './helpers/clock.js';
import { Webhooks as WebWebhooks, createWebHandler } from '../src/handler/web.js';
import { signDelivery } from '../src/signing/index.js';
import { tempDir } from './helpers/cli.js';
import { app, delivery, SECRET } from './helpers/handler.js';
import { post } from './helpers/http.js';

// The handler library in Node, in this process, on real sockets: node:http, Express 5 and Fastify 5,
// the answers, exactly once, a rotation, and the stores listen uses (a file; a real PostgreSQL: test/full/handler.test.ts).

const NEXT = 'whsec_' + Buffer.alloc(32, 6).toString('base64');

async function listen(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}
/** Sends raw bytes; resolves with all the server answered once it closes. */
function rawRequest(port: number, data: string): Promise<string> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1', () => socket.write(data));
    let answer = '';
    socket.setEncoding('latin1').on('data', (d: string) => (answer += d));
    socket.on('close', () => resolve(answer));
  });
}
const close = (server: Server) => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve())));

describe('createNodeMiddleware on node:http', () => {
  const a = app({ secrets: [SECRET, NEXT] });
  const server = createServer(createNodeMiddleware(a.webhooks, { path: '/hooks', maxBody: 4096 }));
  let url = '';
  beforeAll(async () => void (url = await listen(server)));
  afterAll(() => close(server));

  it('a delivery: 200, its typed handler run once; sent again: 200, a duplicate, the handler not run', async () => {
    const d = delivery('trg_once');
    expect(await post(`${url}/hooks`, d.headers, d.body)).toMatchObject({ status: 200, body: '{"ok":true}' });
    expect(await post(`${url}/hooks?x=1`, d.headers, d.body)).toMatchObject({ status: 200, body: '{"ok":true,"duplicate":true}' });
    expect(a.seen.filter((s) => s.startsWith('trg_once'))).toEqual(['trg_once +6h']);
  });

  it("a tampered body: 401 with the reason, in listen's words; the handler not run", async () => {
    const d = delivery('trg_tampered');
    const r = await post(`${url}/hooks`, d.headers, d.body.replace('wm-6', 'wm-7'));
    expect(r.status).toBe(401);
    expect(JSON.parse(r.body)).toMatchObject({ reason: 'no_match', error: expect.stringContaining('No signature matched') });
    expect(a.seen.some((s) => s.startsWith('trg_tampered'))).toBe(false);
  });

  it('signed with the second of two secrets (a rotation): accepted', async () => {
    const d = delivery('trg_rotated', { secret: NEXT });
    expect((await post(`${url}/hooks`, d.headers, d.body)).status).toBe(200);
    expect(a.seen).toContain('trg_rotated +6h');
  });

  it('a handler that throws: 500 (nothing of what it threw told to the sender), onError called; the retry runs it again, and then once only', async () => {
    const d = delivery('trg_throws');
    a.failFor.add('trg_throws');
    const failed = await post(`${url}/hooks`, d.headers, d.body);
    expect(failed.status).toBe(500);
    expect(failed.body).not.toContain('database');
    expect(a.errors.at(-1)?.message).toContain('the database is down');
    expect(a.errors.at(-1)?.event.id).toBe('trg_throws');
    expect((await post(`${url}/hooks`, d.headers, d.body)).status).toBe(200);
    expect((await post(`${url}/hooks`, d.headers, d.body)).body).toContain('duplicate');
    expect(a.seen.filter((s) => s.startsWith('trg_throws'))).toEqual(['trg_throws +6h']);
  });

  it('a body that is not a JSON object, signed: 400; missing headers: 400 or 401 as listen answers', async () => {
    const body = '[1,2,3]';
    const headers = signDelivery({ secret: SECRET, body, triggerId: 'trg_list' }) as Record<string, string>;
    const r = await post(`${url}/hooks`, headers, body);
    expect(r.status).toBe(400);
    expect(JSON.parse(r.body)).toMatchObject({ reason: 'not_json_object' });
    expect((await post(`${url}/hooks`, { 'Trigger-Id': 'trg_x', 'Webhook-Timestamp': String(Math.floor(Date.now() / 1000)) }, '{}')).status).toBe(401);
    expect((await post(`${url}/hooks`, {}, '{}')).status).toBe(400);
  });

  it('another path: 404; a GET: 405; a body over maxBody: 413, unread', async () => {
    const d = delivery('trg_path');
    expect((await post(`${url}/other`, d.headers, d.body)).status).toBe(404);
    expect((await fetch(`${url}/hooks`)).status).toBe(405);
    const big = delivery('trg_big', { data: { model: 'x'.repeat(5000) } });
    expect((await post(`${url}/hooks`, big.headers, big.body)).status).toBe(413);
  });

  it('while a delivery is being processed, its retry gets 409 (the service tries again later), not a second run', async () => {
    const slow = new Webhooks({ secret: SECRET });
    let release!: () => void;
    let runs = 0;
    slow.on('forecast_hour.available', async () => {
      runs++;
      await new Promise<void>((r) => (release = r));
    });
    const d = delivery('trg_slow');
    const first = slow.verifyAndReceive(d);
    await expect.poll(() => runs).toBe(1);
    expect(await slow.verifyAndReceive(d)).toMatchObject({ status: 409, outcome: 'in_progress' });
    release();
    expect(await first).toMatchObject({ status: 200, outcome: 'accepted' });
    expect(runs).toBe(1);
  });
});

describe('in the frameworks', () => {
  it('Express 5: app.use(middleware) answers its path and passes every other to next(); express.raw() bytes are taken as they are; express.json() first is refused with why', async () => {
    const a = app();
    const web = express();
    web.use(createNodeMiddleware(a.webhooks, { path: '/webhooks' }));
    web.post('/raw', express.raw({ type: '*/*' }), createNodeMiddleware(a.webhooks, { path: '/raw' }));
    web.post('/parsed', express.json(), createNodeMiddleware(a.webhooks, { path: '/parsed' }));
    web.get('/health', (_req, res) => void res.send('up'));
    const server = createServer(web);
    const url = await listen(server);
    try {
      const d = delivery('trg_express');
      expect((await post(`${url}/webhooks`, d.headers, d.body)).status).toBe(200);
      expect(await (await fetch(`${url}/health`)).text()).toBe('up'); // next()
      const r = delivery('trg_express_raw');
      expect((await post(`${url}/raw`, r.headers, r.body)).status).toBe(200);
      const p = delivery('trg_express_parsed');
      const parsed = await post(`${url}/parsed`, p.headers, p.body);
      expect(parsed.status).toBe(500);
      expect(parsed.body).toContain('parsed before wxhooks could verify it');
      expect(a.seen).toEqual(['trg_express +6h', 'trg_express_raw +6h']);
    } finally {
      await close(server);
    }
  });

  it('Fastify 5: the body read as a Buffer, then verifyAndReceive, its receipt the answer; or the middleware given the raw request and that Buffer', async () => {
    const a = app();
    const fastify = Fastify();
    fastify.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) => done(null, body));
    fastify.post('/webhooks', async (request, reply) => {
      const receipt = await a.webhooks.verifyAndReceive({ headers: request.headers, body: request.body as Buffer });
      return reply.code(receipt.status).type('application/json').send(receipt.body);
    });
    // or the middleware itself, given Fastify's raw request with the Buffer as its body
    const middleware = createNodeMiddleware(a.webhooks, { path: '/middleware' });
    fastify.post('/middleware', (request, reply) => {
      reply.hijack();
      middleware(Object.assign(request.raw, { body: request.body }), reply.raw);
    });
    const url = await fastify.listen({ port: 0, host: '127.0.0.1' });
    try {
      const m = delivery('trg_fastify_middleware');
      expect(await post(`${url}/middleware`, m.headers, m.body)).toMatchObject({ status: 200, body: '{"ok":true}' });
      expect((await post(`${url}/middleware`, m.headers, m.body.replace('wm-6', 'wm-1'))).status).toBe(401);
      a.seen.length = 0;
      const d = delivery('trg_fastify');
      expect((await post(`${url}/webhooks`, d.headers, d.body)).status).toBe(200);
      expect((await post(`${url}/webhooks`, d.headers, d.body)).body).toContain('duplicate');
      const t = await post(`${url}/webhooks`, d.headers, d.body.replace('wm-6', 'wm-9'));
      expect(t.status).toBe(401);
      expect(a.seen).toEqual(['trg_fastify +6h']);
    } finally {
      await fastify.close();
    }
  });

  it("wxhooks/web's handler in Node (Web Crypto, a Request in, a Response out) answers as the Node entry does", async () => {
    const webhooks = new WebWebhooks({ secret: SECRET });
    const seen: string[] = [];
    webhooks.on('forecast_hour.available', (e) => void seen.push(e.id));
    const handler = createWebHandler(webhooks, { path: '/webhooks' });
    const d = delivery('trg_web_in_node');
    const send = (body: string) => handler(new Request('http://app.example/webhooks', { method: 'POST', headers: d.headers, body }));
    expect((await send(d.body)).status).toBe(200);
    expect(await (await send(d.body)).text()).toContain('duplicate');
    expect((await send(d.body.replace('wm-6', 'wm-8'))).status).toBe(401);
    expect((await handler(new Request('http://app.example/elsewhere', { method: 'POST', body: d.body }))).status).toBe(404);
    expect(seen).toEqual(['trg_web_in_node']);
  });
});

describe('the dedupe key and the stores', () => {
  it("the key is listen's: the Trigger-Id when signed, with the subscription; the same trigger for another subscription is another delivery", async () => {
    const a = app();
    for (const sub of ['1', '2', '1']) {
      const d = delivery('trg_subs', { subscription: sub });
      await a.webhooks.verifyAndReceive(d);
    }
    expect(a.seen.filter((s) => s.startsWith('trg_subs'))).toHaveLength(2);
  });

  it("a layout that does not sign the Trigger-Id (stripe): the body's trigger_id, so a new Trigger-Id header is still a duplicate", async () => {
    const a = app();
    const body = delivery('trg_body_id').body;
    for (const header of ['trg_one', 'trg_two']) {
      const headers = signDelivery({ secret: SECRET, body, triggerId: header, layout: 'stripe' }) as Record<string, string>;
      expect((await a.webhooks.verifyAndReceive({ headers, body })).status).toBe(200);
    }
    expect(a.seen).toEqual(['trg_body_id +6h']);
  });

  it('MemoryStore forgets a pair after its TTL, on the clock it is given', async () => {
    let now = 1_000_000;
    const store = new MemoryStore({ ttlMs: 60_000, now: () => now });
    expect(await store.claim('t', 's')).toBe('won');
    expect(await store.claim('t', 's')).toBe('held');
    await store.complete('t', 's');
    expect(await store.claim('t', 's')).toBe('done');
    now += 60_001;
    expect(await store.claim('t', 's')).toBe('won');
  });

  it("openStore('file'): processed pairs kept across a restart of the app", async () => {
    const dir = tempDir();
    const d = delivery('trg_file');
    for (let restart = 0; restart < 2; restart++) {
      const store = await openStore('file', { dir });
      const a = app({ secret: SECRET, store });
      expect((await a.webhooks.verifyAndReceive(d)).outcome).toBe(restart === 0 ? 'accepted' : 'duplicate');
      await store.close();
    }
  });
});

describe('types', () => {
  it('event.type narrows the payload; a response narrows by its type', () => {
    const webhooks = new Webhooks({ secret: SECRET });
    webhooks.on('forecast_hour.available', (event) => {
      expectTypeOf(event.payload.data.forecast_hour).toEqualTypeOf<number>();
      const response = event.payload.data.response;
      if (response?.type === 'gridded') expectTypeOf(response.values).toEqualTypeOf<(number | null)[][]>();
      if (response?.type === 'degree_days') expectTypeOf(response.days[0]!.heating_degree_days).toEqualTypeOf<number>();
    });
    webhooks.on('events.available', (event) => expectTypeOf(event.payload.data.event_type).toEqualTypeOf<string>());
    webhooks.onAny((event: WebhookEvent) => {
      if (event.type === 'forecast_hour.available') expectTypeOf(event.payload.data.forecast_hour).toEqualTypeOf<number>();
    });
    expect(() => new Webhooks({})).toThrow(/needs the webhook's secret/);
  });
});

describe('mistakes seen where they are made (#34)', () => {
  it('on() with a type wxhooks does not know (a typo, in plain JavaScript) throws at registration, naming the nearest type; a type the service adds later reaches onAny', async () => {
    const webhooks = new Webhooks({ secret: SECRET });
    // @ts-expect-error: not a delivery type of the service
    expect(() => webhooks.on('forecast_hour.availble', () => undefined)).toThrow(/not a delivery type wxhooks knows \(did you mean forecast_hour\.available\?\)/);
    const asJavaScript = webhooks.on.bind(webhooks) as (type: unknown, handler: () => void) => unknown;
    expect(() => asJavaScript(['degree_days.available', 'forecast_hour.availble'], () => undefined)).toThrow(/forecast_hour\.available/);
    // nothing of a refused registration was kept: a delivery of the right type runs no handler
    const seen: string[] = [];
    webhooks.on('degree_days.available', () => void seen.push('degree days'));
    webhooks.onAny((event) => void seen.push(`any ${event.type}`));
    expect((await webhooks.verifyAndReceive(delivery('trg_new_type', { type: 'storm_surge.available' }))).outcome).toBe('accepted');
    expect((await webhooks.verifyAndReceive(delivery('trg_typo_type'))).outcome).toBe('accepted');
    expect(seen).toEqual(['any storm_surge.available', 'any forecast_hour.available']);
  });

  it('express.json() before the middleware: answered 500 as before, and onError is given a WebhookSetupError; with no onError, the log says it once per kind of mistake', async () => {
    const a = app();
    const warned: string[] = [];
    const quiet = new Webhooks({ secret: SECRET, log: { warn: (m: string) => void warned.push(m) } });
    const web = express();
    web.use(express.json());
    web.use(createNodeMiddleware(a.webhooks, { path: '/told' }));
    web.use(createNodeMiddleware(quiet, { path: '/logged' }));
    const server = createServer(web);
    const url = await listen(server);
    try {
      for (const n of [1, 2]) {
        const d = delivery(`trg_parsed_${n}`);
        const told = await post(`${url}/told`, d.headers, d.body);
        expect(told.status).toBe(500);
        expect(told.body).toContain('parsed before wxhooks could verify it');
        const logged = await post(`${url}/logged`, d.headers, d.body);
        expect(logged.status).toBe(500);
      }
      expect(a.setup).toHaveLength(2);
      expect(a.setup[0]).toBeInstanceOf(WebhookSetupError);
      expect(a.setup[0]).toMatchObject({ kind: 'body_parsed', hint: expect.stringContaining('before any JSON body parser') });
      expect(a.errors).toEqual([]);
      expect(warned).toHaveLength(1);
      expect(warned[0]).toContain('already parsed');
      expect(warned[0]).toContain('express.raw()');
      // in words (#41.20: it said "req.body is a object")
      expect(a.setup[0]!.message).toContain('(req.body is an object)');
    } finally {
      await close(server);
    }
  });

  it('a handler still running after handlerTimeoutMs: 500 handler_timed_out, onError told (WebhookTimeoutError), its claim let go so the retry runs it; the claim was extended meanwhile', async () => {
    // the store's clock moves with the timers: a claim not extended would run out at 30 s
    const start = Date.now();
    let now = start;
    const timers = manualTimers((ms) => (now = start + ms));
    const store = new MemoryStore({ leaseMs: 30_000, now: () => now });
    const webhooks = new Webhooks({ secret: SECRET, store, handlerTimeoutMs: 100_000, timers });
    const errors: unknown[] = [];
    webhooks.onError((e) => void errors.push(e));
    let runs = 0;
    let began = false;
    webhooks.on('forecast_hour.available', () => (runs++, (began = true), new Promise(() => undefined)));
    const d = delivery('trg_hung');
    const first = webhooks.verifyAndReceive(d);
    await expect.poll(() => began).toBe(true);
    await timers.advance(99_999);
    // past its 30 s lease, still held: extended every 10 s
    expect((await webhooks.verifyAndReceive(d)).outcome).toBe('in_progress');
    await timers.advance(1);
    const receipt = await first;
    expect(receipt).toMatchObject({ status: 500, outcome: 'handler_timed_out', error: expect.any(WebhookTimeoutError) });
    expect(JSON.parse(receipt.body)).toEqual({ error: 'a handler took longer than 100 s; the delivery will be retried' });
    expect(errors).toEqual([expect.any(WebhookTimeoutError)]);
    expect((errors[0] as WebhookTimeoutError).message).toContain('took longer than 100 s');
    began = false;
    const retry = webhooks.verifyAndReceive(d);
    await expect.poll(() => began).toBe(true);
    expect(runs).toBe(2);
    await timers.advance(100_000);
    expect((await retry).outcome).toBe('handler_timed_out');
  });

  it.each([
    ['new MemoryStore({ leaseMs: 2000 })', async (now: () => number) => new MemoryStore({ leaseMs: 2000, now })],
    ["openStore('file', { leaseMs: 2000 })", async () => openStore('file', { dir: tempDir(), leaseMs: 2000 })],
  ])('a hung handler with %s and no handlerTimeoutMs: let go at two leases (4 s, not 120 s), so the retry runs it (#41.12)', async (_name, open) => {
    const start = Date.now();
    let now = start;
    const timers = manualTimers((ms) => (now = start + ms));
    const store = await open(() => now);
    try {
      const webhooks = new Webhooks({ secret: SECRET, store, timers, log: { warn: () => undefined } });
      let runs = 0;
      webhooks.on('forecast_hour.available', () => (runs++, new Promise(() => undefined)));
      const d = delivery('trg_hung_short_lease');
      const first = webhooks.verifyAndReceive(d);
      await expect.poll(() => runs).toBe(1);
      await timers.advance(3_999);
      expect((await webhooks.verifyAndReceive(d)).outcome).toBe('in_progress');
      await timers.advance(1);
      expect(await first).toMatchObject({ status: 500, outcome: 'handler_timed_out' });
      void webhooks.verifyAndReceive(d);
      await expect.poll(() => runs).toBe(2);
      await timers.advance(4_000);
    } finally {
      await store.close();
    }
  });

  it("a replay (the inspector's, MCP's, `deliveries replay`) reaches the handler, once per replay, told it is one and of what; a mark anyone could add is no mark (#41.9)", async () => {
    const { replayDelivery } = await import('../src/receiver/replay.js');
    const { Agent } = await import('undici');
    const webhooks = new Webhooks({ secret: SECRET });
    const got: { id: string; replay?: { id: string; of: string } }[] = [];
    webhooks.on('forecast_hour.available', (event) => void got.push({ id: event.id, replay: event.replay }));
    const server = createServer(createNodeMiddleware(webhooks, { path: '/hooks' }));
    const url = await listen(server);
    const agent = new Agent();
    try {
      const d = delivery('trg_replayed');
      expect((await post(`${url}/hooks`, d.headers, d.body)).status).toBe(200);
      const replay = (edited?: boolean) => replayDelivery({ headers: d.headers, body: Buffer.from(d.body), secret: SECRET, to: `${url}/hooks`, timeoutMs: 5000, dispatcher: agent, edited });
      const first = await replay();
      expect([first.status, first.body]).toEqual([200, '{"ok":true}']);
      expect(got).toEqual([
        { id: 'trg_replayed', replay: undefined },
        { id: first.replay_id, replay: { id: first.replay_id, of: 'trg_replayed' } },
      ]);
      // each replay runs it once more; the original's retry is still a duplicate
      const second = await replay();
      expect(second.replay_id).not.toBe(first.replay_id);
      expect(got.map((g) => g.replay?.id)).toEqual([undefined, first.replay_id, second.replay_id]);
      expect((await post(`${url}/hooks`, d.headers, d.body)).body).toBe('{"ok":true,"duplicate":true}');
      // the same replay sent again (a retry of it, or a capture of it) is that replay's duplicate
      const signed = signDelivery({ secret: SECRET, body: d.body, triggerId: 'trg_replayed' }) as Record<string, string>;
      const mark = (id: string, signature: string) => ({ ...d.headers, ...signed, 'x-wxhooks-replay': '1', 'x-wxhooks-replay-id': id, 'x-wxhooks-replay-signature': signature });
      const markOf = (id: string) => (signDelivery({ secret: SECRET, body: d.body, triggerId: id, timestamp: Number(signed['Webhook-Timestamp']) }) as Record<string, string>)['Webhook-Signature']!;
      expect((await post(`${url}/hooks`, mark(first.replay_id, markOf(first.replay_id)), d.body)).body).toBe('{"ok":true,"duplicate":true}');
      // a mark not signed with the secret (or signed over another timestamp) is no mark: the original, a duplicate
      for (const forged of [
        mark('rpl_forgedforged', `v1,${Buffer.alloc(32, 9).toString('base64')}`),
        { ...mark('rpl_forgedforged', markOf('rpl_forgedforged')), 'webhook-timestamp': String(Number(signed['Webhook-Timestamp']) - 1) },
      ]) {
        expect((await post(`${url}/hooks`, forged, d.body)).status).toBeLessThan(500);
      }
      expect(got).toHaveLength(3);
    } finally {
      await agent.close();
      await close(server);
    }
  });

  it('with no onError, a handler that throws is said on the log (every time: each is a delivery that failed)', async () => {
    const warned: string[] = [];
    const webhooks = new Webhooks({ secret: SECRET, log: { warn: (m: string) => void warned.push(m) } });
    webhooks.on('forecast_hour.available', () => {
      throw new Error('no table "forecasts"');
    });
    expect((await webhooks.verifyAndReceive(delivery('trg_logged_throw'))).status).toBe(500);
    expect(warned).toEqual([expect.stringContaining('no table "forecasts"')]);
  });

  it('two Webhook-Signature headers, the valid one first: accepted, as listen accepts them (#32.15)', async () => {
    const a = app();
    const server = createServer(createNodeMiddleware(a.webhooks, { path: '/hooks' }));
    const url = await listen(server);
    try {
      const d = delivery('trg_two_signatures');
      const h = d.headers as Record<string, string>;
      const wrong = `v1,${Buffer.alloc(32, 1).toString('base64')}`;
      for (const [first, second] of [
        [h['Webhook-Signature']!, wrong],
        [wrong, h['Webhook-Signature']!],
      ]) {
        const port = Number(new URL(url).port);
        const head =
          `POST /hooks HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(d.body)}\r\n` +
          `trigger-id: ${h['Trigger-Id']}\r\nwebhook-timestamp: ${h['Webhook-Timestamp']}\r\nwebhook-signature: ${first}\r\nwebhook-signature: ${second}\r\nconnection: close\r\n\r\n`;
        expect(await rawRequest(port, head + d.body)).toMatch(/^HTTP\/1\.1 200/);
      }
      expect(a.seen).toEqual(['trg_two_signatures +6h']);
    } finally {
      await close(server);
    }
  });
});
