import { createServer, request, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Webhooks, createNodeMiddleware } from '../src/index.js';
import { Webhooks as WebWebhooks, createWebHandler } from '../src/handler/web.js';
import { signed, startTestReceiver, TEST_SECRET, type TestReceiver } from './helpers/receiver.js';
import * as ANSWERS from '../src/delivery/answers.js';
import type { Answer } from '../src/delivery/answers.js';
import { declaredLength, door, type DoorIO, type DoorRules } from '../src/delivery/door.js';
import { InflightBudget } from '../src/util/bodies.js';
import { FileRelayStorage } from '../src/relay/file-storage.js';
import { startRelayServer } from '../src/relay/node-host.js';
import { tempDir } from './helpers/cli.js';
import { listener } from './helpers/relay.js';
import { startWorkerdRelay } from './helpers/workerd.js';

// The doors a delivery comes in by (listen's server, the Node middleware, the web handler, and the relay's
// two hosts, `relay serve` and the Worker in workerd, each on real sockets here) are one function, the
// core's door (src/delivery/door.ts), with their runtime's reading and writing: they answer alike, from one
// table of answers, with one body shape, one 405, a 503 that always says when to come back (#33). The
// relay stores what verifies and leaves the processed pairs to its listen, so it is not in the rows about
// duplicates. The core's door is also run here without a socket, through an adapter of the test's own, to
// pin its order.

interface Answered {
  status: number;
  headers: IncomingMessage['headers'];
  body: string;
}

/**
 * One request. `continues`: the body is sent only once the door asks for it (`Expect: 100-continue`), as
 * a client of a door that answers on the headers and closes at once must (workerd: a body written
 * meanwhile breaks the pipe before its answer is read).
 */
function send(url: string, method: string, headers: Record<string, string>, body?: string | Buffer, continues = false): Promise<Answered> {
  const u = new URL(url);
  const waits = continues && body !== undefined;
  return new Promise((resolve, reject) => {
    const req = request(
      { host: u.hostname, port: u.port, path: u.pathname, method, headers: waits ? { ...headers, expect: '100-continue', 'content-length': String(Buffer.byteLength(body)) } : headers, agent: false },
      (res) => {
        let text = '';
        res.setEncoding('utf8').on('data', (d: string) => (text += d));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    // a door may answer before it reads the body, and close: what it answered is what counts
    req.on('error', reject);
    if (waits) {
      req.flushHeaders();
      req.on('continue', () => req.end(body));
    } else req.end(body);
  });
}

async function serve(server: Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** A fetch handler served by node:http, as Deno.serve or a Worker would serve it. */
function fetchServer(handler: (request: Request) => Promise<Response>): Server {
  return createServer(async (req, res) => {
    const headers = new Headers();
    for (const [k, v] of Object.entries(req.headers)) for (const value of [v ?? []].flat()) headers.append(k, value);
    const hasBody = req.method !== 'GET' && req.method !== 'HEAD';
    const response = await handler(
      new Request(`http://127.0.0.1${req.url}`, { method: req.method, headers, body: hasBody ? (Readable.toWeb(req) as ReadableStream) : undefined, duplex: 'half' } as RequestInit),
    );
    res.writeHead(response.status, Object.fromEntries(response.headers));
    res.end(Buffer.from(await response.arrayBuffer()));
  });
}

const MiB = 1024 * 1024;
const MAX_BODY = 4 * MiB;
/** A door, whether it keeps the processed pairs (the relay stores what verifies: its listen dedupes), and whether a body waits for it to ask. */
const doors: { name: string; url: string; pairs: boolean; continues?: boolean }[] = [];
const RELAYS = ['relay serve', 'relay Worker (workerd)'];
const servers: Server[] = [];
const closing: (() => Promise<void>)[] = [];
let listen: TestReceiver;

/** A relay channel that verifies with the test's secret, made with the relay token, with no listen on it. */
async function channelOn(url: string, token: string): Promise<string> {
  const l = listener({ url, token, channel: 'doors', secrets: [TEST_SECRET] });
  await l.client.start();
  await l.client.close();
  return `${url}/in/doors`;
}

beforeAll(async () => {
  listen = await startTestReceiver({ maxInflight: MiB, maxBody: MAX_BODY });
  doors.push({ name: 'listen', url: listen.url, pairs: true });
  const node = createServer(createNodeMiddleware(new Webhooks({ secret: TEST_SECRET }), { path: '/', maxInflight: MiB, maxBody: MAX_BODY }));
  const web = fetchServer(createWebHandler(new WebWebhooks({ secret: TEST_SECRET }), { path: '/', maxInflight: MiB, maxBody: MAX_BODY }));
  servers.push(node, web);
  doors.push({ name: 'createNodeMiddleware', url: await serve(node), pairs: true }, { name: 'createWebHandler', url: await serve(web), pairs: true });
  const token = 'doors-relay-token';
  const storage = await FileRelayStorage.open({ dir: tempDir('wxhooks-doors-relay-') });
  const relay = await startRelayServer({ host: '127.0.0.1', port: 0, storage, token, maxInflight: MiB, maxBody: MAX_BODY });
  closing.push(async () => {
    await relay.close();
    await storage.close();
  });
  const worker = await startWorkerdRelay({ token, vars: { RELAY_MAX_INFLIGHT: String(MiB), RELAY_MAX_BODY: String(MAX_BODY) } });
  closing.push(() => worker.stop());
  doors.push({ name: RELAYS[0]!, url: await channelOn(relay.url, token), pairs: false }, { name: RELAYS[1]!, url: await channelOn(worker.url, token), pairs: false, continues: true });
}, 60_000);
afterAll(async () => {
  await listen.close();
  for (const s of servers) await new Promise<void>((resolve) => (s.closeAllConnections(), s.close(() => resolve())));
  for (const close of closing) await close();
});

/** What each door answered to the same request, made afresh for each (sent to the door's own URL, or to `path` beside it). */
async function each(
  make: () => { method?: string; headers: Record<string, string>; body?: string | Buffer; path?: string },
  which: (door: (typeof doors)[number]) => boolean = () => true,
): Promise<Record<string, Answered>> {
  const out: Record<string, Answered> = {};
  for (const door of doors.filter(which)) {
    const r = make();
    out[door.name] = await send(r.path === undefined ? door.url : new URL(r.path, door.url).href, r.method ?? 'POST', r.headers, r.body, door.continues).catch((e: Error) => {
      throw new Error(`${door.name}: ${e.message}`);
    });
  }
  return out;
}

describe('the doors answer alike', () => {
  it('a delivery: 200 {"ok":true}; again: 200 {"ok":true,"duplicate":true} (the relay stores it again, for its listen to find the duplicate)', async () => {
    const first = await each(() => signed('trg_doors_ok'));
    const again = await each(() => signed('trg_doors_ok'));
    expect(Object.keys(first)).toHaveLength(5);
    for (const name of Object.keys(first)) {
      expect([name, first[name]!.status, first[name]!.body]).toEqual([name, 200, '{"ok":true}']);
      expect([name, again[name]!.status, again[name]!.body]).toEqual([name, 200, RELAYS.includes(name) ? '{"ok":true}' : '{"ok":true,"duplicate":true}']);
    }
  });

  it('not POST: 405, one wording, and Allow: POST', async () => {
    const answers = await each(() => ({ method: 'GET', headers: {} }));
    for (const [name, a] of Object.entries(answers)) {
      expect([name, a.status, a.body, a.headers.allow]).toEqual([name, 405, '{"error":"only POST is accepted here"}', 'POST']);
    }
  });

  it('not authentic: 401 with the same {error, reason, hint} from each', async () => {
    const answers = await each(() => {
      const d = signed('trg_doors_tampered');
      return { headers: d.headers, body: d.body.toString().replace('wm-6', 'wm-7') };
    });
    const bodies = Object.values(answers).map((a) => JSON.parse(a.body) as Record<string, string>);
    for (const [name, a] of Object.entries(answers)) expect([name, a.status]).toEqual([name, 401]);
    expect(bodies[1]).toEqual({ error: expect.stringContaining('No signature matched'), reason: 'no_match', hint: expect.any(String) });
    expect(bodies[2]).toEqual(bodies[1]);
    // the relay says what it says of a channel there is not (it tells no sender which channels there are)
    expect(bodies[3]).toEqual({ error: expect.stringContaining('No signature matched'), reason: 'no_match', hint: expect.any(String) });
    expect(bodies[4]).toEqual(bodies[3]);
    // listen's session has pinned the layout of its first delivery, and its hint says so too
    expect(bodies[0]).toEqual({ ...bodies[1], hint: expect.stringContaining(bodies[1]!.hint!) });
    expect(bodies[0]!.hint).toContain('pinned to the standard layout');
  });

  it('a body that cannot fit in the bytes in flight: 503 with Retry-After from each', async () => {
    const answers = await each(() => signed('trg_doors_big', { data: { model: 'wm-6', forecast_hour: 0, pad: 'x'.repeat(2 * MiB) } }));
    for (const [name, a] of Object.entries(answers)) {
      expect([name, a.status, a.headers['retry-after']]).toEqual([name, 503, '5']);
      expect(JSON.parse(a.body)).toEqual({ error: 'too many bodies in flight; try again later', reason: 'overloaded' });
    }
  });

  it('a body over the body limit: 413, one wording, from each', async () => {
    const answers = await each(() => signed('trg_doors_large', { data: { model: 'wm-6', forecast_hour: 0, pad: 'x'.repeat(MAX_BODY) } }));
    for (const [name, a] of Object.entries(answers)) {
      expect([name, a.status]).toEqual([name, 413]);
      expect(JSON.parse(a.body)).toEqual({ error: `the body is over ${MAX_BODY} bytes` });
    }
  });

  it("not a delivery: a Trigger-Id missing is 400, a Webhook-Signature missing 401, a stale timestamp 401, with the verifier's reason, from each", async () => {
    const without = (name: string) => () => {
      const d = signed(`trg_doors_without_${name}`);
      return { headers: Object.fromEntries(Object.entries(d.headers).filter(([k]) => k !== name)), body: d.body };
    };
    for (const [make, status, reason] of [
      [without('Trigger-Id'), 400, 'missing_header'],
      [without('Webhook-Signature'), 401, 'missing_header'],
      [() => signed('trg_doors_stale', { timestamp: Math.floor(Date.now() / 1000) - 3600 }), 401, 'timestamp_out_of_window'],
    ] as const) {
      const answers = await each(make);
      for (const [name, a] of Object.entries(answers)) {
        expect([name, a.status]).toEqual([name, status]);
        expect(JSON.parse(a.body)).toMatchObject({ reason, error: expect.any(String), hint: expect.any(String) });
      }
      // the library's doors and the relay refuse these on their headers, before the body; listen reads it (it keeps refused requests): the same answer
      expect(answers.createNodeMiddleware!.body).toBe(answers.createWebHandler!.body);
      for (const relay of RELAYS) expect([relay, answers[relay]!.body]).toEqual([relay, answers.createNodeMiddleware!.body]);
    }
  });

  it('another path: 404, {"error":"not found"} (listen adds where deliveries go)', async () => {
    const answers = await each(() => ({ ...signed('trg_doors_path'), path: '/elsewhere' }));
    // the web handler, listen and the relay answer a path of their own; the middleware answers 404 when no app is behind it
    for (const [name, a] of Object.entries(answers)) {
      expect([name, a.status]).toEqual([name, 404]);
      expect(JSON.parse(a.body)).toMatchObject({ error: 'not found' });
    }
    expect(JSON.parse(answers.listen!.body)).toEqual({ error: 'not found', hint: 'deliveries go to /' });
  });
});

describe('an id no store can key by (#32.11): every door keys it by its hash, and its retry is a duplicate', () => {
  it.each([
    ['a 10 KB trigger_id', `trg_${'k'.repeat(10_000)}`, '1'],
    ['a trigger_id with a NUL', 'trg_with\u0000nul', '1'],
    ['a subscription_id with a lone surrogate', 'trg_doors_odd_sub', 'sub_\ud800'],
  ])('%s', async (_name, trigger, subscription) => {
    // the body's ids (a header cannot carry a NUL), under an ordinary Trigger-Id
    const make = () => signed('trg_doors_header', { body: { trigger_id: trigger, subscription_id: subscription } });
    const first = await each(make, (door) => door.pairs);
    const again = await each(make, (door) => door.pairs);
    for (const name of Object.keys(first)) {
      expect([name, first[name]!.status, first[name]!.body]).toEqual([name, 200, '{"ok":true}']);
      expect([name, again[name]!.status, again[name]!.body]).toEqual([name, 200, '{"ok":true,"duplicate":true}']);
    }
  });

  it('the rule: over 200 characters, a control character or a lone surrogate; the key is the SHA-256 of the id', async () => {
    const { unkeyable, withHashedIds, MAX_ID_LENGTH } = await import('../src/delivery/pair.js');
    expect(['trg_1', 'x'.repeat(MAX_ID_LENGTH), 'Zürich 🌧'].map(unkeyable)).toEqual([false, false, false]);
    expect(['x'.repeat(MAX_ID_LENGTH + 1), 'a\u0000', 'a\n', '\udc00', 'a\ud800b'].map(unkeyable)).toEqual([true, true, true, true, true]);
    const { createHash } = await import('node:crypto');
    const digest = createHash('sha256').update('a\u0000').digest();
    expect(withHashedIds({ trigger: 'a\u0000', subscription: '1', source: 'body' }, { trigger: digest })).toEqual({
      trigger: `sha256:${digest.toString('base64url')}`,
      subscription: '1',
      source: 'body',
    });
  });
});

describe("the core door, through an adapter of the test's own (no socket)", () => {
  type Req = { method: string; path: string; headers: Record<string, string>; chunks: Uint8Array[] };
  /** A request, and the order in which the door asked of it and answered it. */
  function run(rules: Partial<DoorRules<Req, string[], Uint8Array, { answer: Answer }>>, req: Partial<Req> = {}) {
    const steps: string[] = [];
    const io: DoorIO<Req, string[], Uint8Array> = {
      method: (r) => (steps.push('method'), r.method),
      path: (r) => r.path,
      headers: (r) => (steps.push('headers'), r.headers),
      length: (r) => r.headers['content-length'],
      stream(r, _res, sink) {
        steps.push('stream');
        for (const c of r.chunks) if (!sink.chunk(c)) return undefined;
        sink.end();
        return undefined;
      },
      alloc: (n) => new Uint8Array(n),
      write: (_r, res, answer, how) => (res.push(`${answer.status} ${how}`), true),
    };
    const written: string[] = [];
    const handle = door(io, {
      path: '/hooks',
      maxBody: 8,
      budget: new InflightBudget(16),
      refuseEarly: (h) => (steps.push('refuseEarly'), 'x-refuse' in h ? ANSWERS.methodNotAllowed : undefined),
      deliver: (_r, body) => (steps.push(`deliver ${body.length}`), { answer: ANSWERS.accepted() }),
      answerOf: (d) => d.answer,
      ended: (_r, end) => steps.push(`ended ${end.step}`),
      ...rules,
    });
    handle({ method: 'POST', path: '/hooks', headers: {}, chunks: [new Uint8Array(3), new Uint8Array(2)], ...req }, written);
    return { steps, written };
  }

  it('a delivery: routed, refused on its headers or not, read whole, delivered, answered', () => {
    expect(run({})).toEqual({ steps: ['method', 'headers', 'refuseEarly', 'stream', 'deliver 5', 'ended delivered'], written: ['200 read'] });
  });

  it('another path or method: answered before anything else is asked of it, its body skipped', () => {
    expect(run({}, { path: '/elsewhere' })).toEqual({ steps: ['method', 'ended routed'], written: ['404 skipped'] });
    expect(run({}, { method: 'GET' }).written).toEqual(['405 skipped']);
  });

  it('refused on its headers: its body never read, the connection told so', () => {
    expect(run({}, { headers: { 'x-refuse': '1' } })).toEqual({ steps: ['method', 'headers', 'refuseEarly', 'ended headers'], written: ['405 refused'] });
  });

  it('a declared length over the limit, or past the bytes in flight: refused before a byte is read; one that grows past it, stopped', () => {
    expect(run({}, { headers: { 'content-length': '9' } })).toMatchObject({ steps: expect.not.arrayContaining(['stream']), written: ['413 stopped'] });
    expect(run({ budget: new InflightBudget(4) }, { headers: { 'content-length': '5' } }).written).toEqual(['503 stopped']);
    expect(run({}, { chunks: [new Uint8Array(6), new Uint8Array(6)] })).toMatchObject({ steps: expect.not.arrayContaining(['deliver 12']), written: ['413 stopped'] });
  });

  it('a delivery that throws inside (a bug): 500 from the table, and the door told', () => {
    const r = run({
      deliver: () => {
        throw new Error('bug');
      },
    });
    expect(r.written).toEqual(['500 read']);
    expect(r.steps.at(-1)).toBe('ended failed');
  });

  it('the length a request declares, read one way for every door', () => {
    expect(['12', '0', '', ' 12', '1e3', '-1', '0x10', null, undefined].map((t) => declaredLength(t))).toEqual([12, 0, undefined, undefined, undefined, undefined, undefined, undefined, undefined]);
  });
});
