import { randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AuthError, ExitCode, RefusedError } from '../../src/errors.js';
import * as DEFAULTS from '../../src/delivery/defaults.js';
import { generateSecret } from '../../src/signing/sign.js';
import type { RelayedDelivery } from '../../src/relay/client.js';
import { delivery, listener, send, tcpProxy, type Answered, type Listener, type RelayUnderTest } from './relay.js';

/**
 * The relay's tests, one suite for every host: test/relay-worker.test.ts runs it against the Worker in
 * workerd (its Durable Object's storage on disk), test/relay-node.test.ts against the Node host in the
 * test's process, over a folder and over PostgreSQL. A real client (src/relay/client.ts) connects to
 * each; deliveries are signed as the service signs them. Each file starts its relay once.
 */

export const TOKEN = `relay-token-${randomBytes(12).toString('hex')}`;
/** The byte budget of each relay under test: a few deliveries of 1 MiB fill it. */
export const BUDGET = 3 * 1024 * 1024;
const SECRET = generateSecret();
const OTHER = generateSecret();

const triggerOf = (d: RelayedDelivery) => (JSON.parse(Buffer.from(d.body).toString('utf8')) as { trigger_id: string }).trigger_id;

export function relaySuite(name: string, make: () => Promise<RelayUnderTest>): void {
  describe(`the relay: ${name}`, () => {
    let relay: RelayUnderTest;
    /** Every answer the relay gave in this file: none may hold a secret. */
    const answers: Answered[] = [];
    let channels = 0;
    const channel = (kind = 'c') => `${kind}-${++channels}-${randomBytes(3).toString('hex')}`;
    const post = async (ch: string, d: { headers: Record<string, string>; body: Buffer }) => {
      const a = await send(`${relay.url}/in/${ch}`, 'POST', d.headers, d.body);
      answers.push(a);
      return a;
    };
    const status = async (token = TOKEN) => {
      const a = await send(`${relay.url}/status`, 'GET', token ? { authorization: `Bearer ${token}` } : {});
      answers.push(a);
      return a;
    };
    const queued = async (ch: string): Promise<number | undefined> => {
      const s = JSON.parse((await status()).body) as {
        channels: { channel: string; queued: number }[];
      };
      return s.channels.find((c) => c.channel === ch)?.queued;
    };
    /** Waits until the relay says a channel holds `n` (acknowledgements are sent a moment after the callback). */
    const holds = async (ch: string, n: number | undefined) => {
      for (let i = 0; ; i++) {
        const q = await queued(ch);
        if (q === n) return;
        if (i > 500) throw new Error(`channel ${ch} holds ${q}, not ${n}`);
        await new Promise((r) => setTimeout(r, 10));
      }
    };
    const connect = (ch: string, o: Partial<Parameters<typeof listener>[0]> = {}): Listener =>
      listener({
        url: relay.url,
        token: TOKEN,
        channel: ch,
        secrets: [SECRET],
        ...o,
      });
    /** A lasting channel made, and left with no connection. */
    const made = async (ch: string, o: { temporary?: boolean; secrets?: string[] } = {}) => {
      const l = connect(ch, o);
      expect((await l.client.start()).created).toBe(true);
      await l.client.close();
    };

    beforeAll(async () => {
      relay = await make();
    }, 60_000);
    afterAll(async () => {
      await relay?.close();
    });

    it('stores a verified delivery, answers 200 only then, and hands over its exact bytes and headers; once acknowledged, it is gone', async () => {
      const ch = channel();
      await made(ch);
      const d = delivery(SECRET, 'trg_exact', {
        pad: 40,
        extra: { 'X-Custom': 'kept as sent' },
      });
      const a = await post(ch, d);
      expect(a).toMatchObject({ status: 200, body: '{"ok":true}' });
      expect(await relay.stored()).toBe(1);
      expect(await queued(ch)).toBe(1);

      const l = connect(ch);
      const ready = await l.client.start();
      expect(ready).toMatchObject({
        channel: ch,
        created: false,
        queued: 1,
        inboundUrl: `${relay.url}/in/${ch}`,
      });
      await l.until(() => l.got.length === 1, 'the delivery');
      const got = l.got[0]!;
      expect(Buffer.from(got.body).equals(d.body)).toBe(true);
      const headers = Object.fromEntries(got.headers.map(([k, v]) => [k.toLowerCase(), v]));
      expect(headers).toMatchObject({
        'x-custom': 'kept as sent',
        'trigger-id': 'trg_exact',
        'webhook-signature': d.headers['Webhook-Signature'],
        'webhook-timestamp': d.headers['Webhook-Timestamp'],
      });
      expect(headers).not.toHaveProperty('connection');
      expect(Math.abs(got.receivedAt - Date.now())).toBeLessThan(60_000);
      await holds(ch, 0);
      expect(await relay.stored()).toBe(0);
      await l.client.close();

      // a name that could be a channel's is answered as a channel answers what does not verify (test/hostile/relay-edge.hostile.test.ts)
      expect((await post('no-such-channel', delivery(SECRET, 'trg_x'))).status).toBe(401);
      expect((await post('not a channel', delivery(SECRET, 'trg_x'))).status).toBe(404);
      expect((await send(`${relay.url}/in/${ch}`, 'GET', {})).status).toBe(405);
      expect((await send(`${relay.url}/nowhere`, 'GET', {})).status).toBe(404);
    });

    it('hands over the backlog first, in arrival order, within its window, then what arrives live', async () => {
      const ch = channel();
      await made(ch);
      for (let i = 0; i < 20; i++) expect((await post(ch, delivery(SECRET, `trg_backlog_${i}`))).status).toBe(200);
      const l = connect(ch, { window: 4 });
      expect((await l.client.start()).queued).toBe(20);
      await l.until(() => l.got.length === 20, 'the backlog');
      for (let i = 0; i < 3; i++) expect((await post(ch, delivery(SECRET, `trg_live_${i}`))).status).toBe(200);
      await l.until(() => l.got.length === 23, 'the live deliveries');
      expect(l.triggers()).toEqual([...Array.from({ length: 20 }, (_, i) => `trg_backlog_${i}`), ...Array.from({ length: 3 }, (_, i) => `trg_live_${i}`)]);
      expect(l.got.map((d) => d.seq)).toEqual(Array.from({ length: 23 }, (_, i) => i + 1));
      await holds(ch, 0);
      await l.client.close();
    });

    it('a delivery not acknowledged is handed over again: on the same connection after a growing delay, and on the next connection', async () => {
      const ch = channel();
      await made(ch);
      for (const t of ['trg_ok', 'trg_later', 'trg_never']) expect((await post(ch, delivery(SECRET, t))).status).toBe(200);
      const first = connect(ch, {
        handle: (d) => (triggerOf(d) === 'trg_never' ? false : triggerOf(d) === 'trg_later' ? d.attempt > 1 : true),
      });
      await first.client.start();
      await first.until(() => first.got.length === 3, 'the three');
      // trg_later was refused once: it comes again when its delay has passed (the test moves the clock)
      first.clock.advance(1000);
      await first.until(() => first.triggers().filter((t) => t === 'trg_later').length === 2, 'trg_later again');
      expect(first.got.find((d) => d.attempt === 2)).toMatchObject({ seq: 2 });
      await holds(ch, 1);
      await first.client.close();

      // the one never acknowledged waits for the next connection, and nothing acknowledged comes back
      const second = connect(ch);
      expect((await second.client.start()).queued).toBe(1);
      await second.until(() => second.got.length === 1, 'trg_never again');
      expect(second.triggers()).toEqual(['trg_never']);
      await holds(ch, 0);
      await second.client.close();
    });

    it('a relay restarted mid-stream (killed), its storage kept, loses nothing: the client says it is unreachable, then back, and gets the rest', async () => {
      const ch = channel();
      await made(ch);
      const n = 60;
      const sent = await Promise.all(Array.from({ length: n }, (_, i) => post(ch, delivery(SECRET, `trg_restart_${i}`))));
      expect(sent.every((a) => a.status === 200)).toBe(true);
      let crashed: Promise<void> | undefined;
      const l = connect(ch, {
        window: 8,
        handle: (d) => {
          if (d.seq === 20 && !crashed) crashed = relay.crash();
          return true;
        },
      });
      await l.client.start();
      await l.until(() => l.events.some((e) => e.kind === 'disconnected'), 'the client to lose the relay');
      await crashed;
      l.clock.advance(1000); // its first try again, after a short back-off: the relay is down
      await l.until(() => l.events.some((e) => e.kind === 'unreachable'), 'the client to say the relay is unreachable');
      await relay.start();
      l.clock.advance(60_000); // past the next back-off
      await l.until(() => l.events.some((e) => e.kind === 'connected' && e.again), 'the client back');
      await l.until(() => new Set(l.triggers()).size === n, 'every delivery');
      // each at least once; twice only what was handed over and not yet acknowledged when the relay died
      expect(new Set(l.triggers())).toEqual(new Set(Array.from({ length: n }, (_, i) => `trg_restart_${i}`)));
      expect(l.got.length - n).toBeLessThanOrEqual(8 + 1);
      const back = l.events.find((e) => e.kind === 'connected' && e.again);
      expect(back).toMatchObject({ channel: ch, again: true });
      await holds(ch, 0);
      await l.client.close();
    }, 60_000);

    it('a connection cut mid-delivery: the part that came is dropped and the delivery is sent again whole; cut before its acknowledgement: sent again', async () => {
      const ch = channel();
      await made(ch);
      const proxy = await tcpProxy(Number(new URL(relay.url).port));
      try {
        const big = delivery(SECRET, 'trg_big', { pad: 1_300_000 }); // 2.5 MiB: five frames
        expect((await post(ch, big)).status).toBe(200);
        const cut = proxy.cutAfter(1024 * 1024);
        let hold: ((ok: boolean) => void) | undefined;
        const l = connect(ch, {
          url: `http://127.0.0.1:${proxy.port}`,
          handle: (d) => (d.seq === 2 && !hold ? new Promise<boolean>((r) => (hold = r)) : true),
        });
        await l.client.start();
        await cut;
        await l.until(() => l.events.some((e) => e.kind === 'disconnected'), 'the cut');
        expect(l.got).toHaveLength(0); // nothing half-received is handed over
        l.clock.advance(60_000);
        await l.until(() => l.got.length === 1, 'the delivery, whole');
        expect(Buffer.from(l.got[0]!.body).equals(big.body)).toBe(true);
        await holds(ch, 0);

        // handed over, then the connection is cut before its acknowledgement: it is sent again
        expect((await post(ch, delivery(SECRET, 'trg_unacked'))).status).toBe(200);
        await l.until(() => l.got.length === 2, 'trg_unacked');
        const disconnections = l.events.filter((e) => e.kind === 'disconnected').length;
        proxy.cutNow();
        await l.until(() => l.events.filter((e) => e.kind === 'disconnected').length > disconnections, 'the second cut');
        hold!(true); // handled, but its acknowledgement cannot go: that connection is gone
        l.clock.advance(60_000);
        await l.until(() => l.triggers().filter((t) => t === 'trg_unacked').length === 2, 'trg_unacked again');
        expect(l.got.at(-1)).toMatchObject({ seq: 2, attempt: 1 });
        await holds(ch, 0);
        await l.client.close();
      } finally {
        await proxy.close();
      }
    }, 60_000);

    it('a connection gone silent (no close, nothing through) is found by its keep-alive, cut, and made again; the relay answers the keep-alive itself', async () => {
      const ch = channel();
      await made(ch);
      const proxy = await tcpProxy(Number(new URL(relay.url).port));
      try {
        const l = connect(ch, { url: `http://127.0.0.1:${proxy.port}`, heartbeatMs: 30_000 });
        await l.client.start();
        const turn = () => new Promise((r) => setImmediate(r)); // the client's keep-alive loop takes its next turn
        // keep-alives answered (a Durable Object's by the runtime, without waking it): the connection stays
        for (let i = 0; i < 2; i++) {
          const pong = proxy.forwarded();
          l.clock.advance(30_000);
          await pong;
          await turn();
        }
        expect((await post(ch, delivery(SECRET, 'trg_alive'))).status).toBe(200);
        await l.until(() => l.got.length === 1, 'a delivery on the kept connection');
        expect(l.events.filter((e) => e.kind === 'disconnected')).toHaveLength(0);
        // then silence: keep-alives go unanswered, and once nothing came for more than two of them, it is cut
        proxy.silence(true);
        for (let i = 0; i < 3; i++) {
          l.clock.advance(30_000);
          await turn();
        }
        await l.until(() => l.events.some((e) => e.kind === 'disconnected'), 'the silent connection cut');
        proxy.silence(false);
        expect((await post(ch, delivery(SECRET, 'trg_after_silence'))).status).toBe(200);
        l.clock.advance(60_000);
        await l.until(() => l.triggers().includes('trg_after_silence'), 'a delivery on the new connection');
        await holds(ch, 0);
        await l.client.close();
      } finally {
        await proxy.close();
      }
    });

    for (const temporary of [false, true]) {
      it(`refuses forged, stale and malformed deliveries on a ${temporary ? 'temporary' : 'lasting'} channel, and stores none of them`, async () => {
        const ch = channel(temporary ? 'tmp' : 'keep');
        await made(ch, { temporary });
        const now = Math.floor(Date.now() / 1000);
        const good = delivery(SECRET, 'trg_good');
        const cases: [string, { headers: Record<string, string>; body: Buffer }, number, string][] = [
          ['signed with another secret', delivery(OTHER, 'trg_forged'), 401, 'no_match'],
          ['301 s old', delivery(SECRET, 'trg_stale', { timestamp: now - 301 }), 401, 'timestamp_out_of_window'],
          // (302: the relay's clock may have passed into the next second since `now`)
          ['302 s in the future', delivery(SECRET, 'trg_future', { timestamp: now + 302 }), 401, 'timestamp_out_of_window'],
          [
            'a body changed on the way',
            {
              headers: good.headers,
              body: Buffer.from(good.body.toString().replace('wm-6', 'wm-7')),
            },
            401,
            'no_match',
          ],
          [
            'no signature',
            {
              headers: { ...good.headers, 'Webhook-Signature': '' },
              body: good.body,
            },
            401,
            'missing_header',
          ],
          [
            'no Trigger-Id',
            {
              headers: Object.fromEntries(Object.entries(good.headers).filter(([k]) => k !== 'Trigger-Id')),
              body: good.body,
            },
            400,
            'missing_header',
          ],
          [
            'a signature in no layout',
            {
              headers: { ...good.headers, 'Webhook-Signature': 'v9,abc' },
              body: good.body,
            },
            401,
            'malformed_signature',
          ],
        ];
        for (const [what, d, code, reason] of cases) {
          const a = await post(ch, d);
          expect(a.status, what).toBe(code);
          expect(JSON.parse(a.body).reason, what).toBe(reason);
        }
        expect(await queued(ch)).toBe(0);
        expect(await relay.stored()).toBe(0);
        // and the real one still goes through
        expect((await post(ch, good)).status).toBe(200);
        const l = connect(ch, { temporary });
        await l.client.start();
        await l.until(() => l.got.length === 1, 'the good one');
        expect(l.triggers()).toEqual(['trg_good']);
        await holds(ch, 0);
        if (temporary) {
          // the end of its session: the channel goes, and what is posted to it after is not found
          await l.client.close({ deleteChannel: true });
          expect(await queued(ch)).toBeUndefined();
          expect((await post(ch, delivery(SECRET, 'trg_after'))).status).toBe(401);
        } else {
          await l.client.close();
        }
      });
    }

    it('refuses a wrong or missing relay token (connection and status); a second listen on a channel is refused, says why, and the first keeps it', async () => {
      const ch = channel();
      await made(ch);
      const wrong = listener({
        url: relay.url,
        token: `${TOKEN}x`,
        channel: ch,
      });
      const err = await wrong.client.start().catch((e: unknown) => e);
      expect(err).toBeInstanceOf(AuthError);
      expect((err as AuthError).exitCode).toBe(ExitCode.AUTH);
      const bare = await new Promise<number>((resolve) => {
        const ws = new WebSocket(`${relay.url.replace('http', 'ws')}/connect/${ch}`);
        ws.on('unexpected-response', (_req, res) => resolve(res.statusCode ?? 0));
        ws.on('open', () => resolve(101));
        ws.on('error', () => undefined);
      });
      expect(bare).toBe(401);
      expect((await status('')).status).toBe(401);
      expect((await status(`${TOKEN.slice(0, -1)}y`)).status).toBe(401);

      // an unknown channel opened without a secret is refused, not created
      const unknown = listener({
        url: relay.url,
        token: TOKEN,
        channel: channel(),
      });
      expect(await unknown.client.start().catch((e: unknown) => e)).toBeInstanceOf(RefusedError);

      const a = connect(ch);
      await a.client.start();
      const b = connect(ch);
      const refused = await b.client.start().catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(RefusedError);
      expect((refused as RefusedError).exitCode).toBe(ExitCode.REFUSED);
      expect(String((refused as Error).message)).toContain(`Another listen holds the channel ${ch}`);
      expect(await b.client.done.catch((e: unknown) => e)).toBe(refused);
      expect((await post(ch, delivery(SECRET, 'trg_to_a'))).status).toBe(200);
      await a.until(() => a.got.length === 1, 'the delivery, on the first connection');
      await a.client.close();
      // once the first is gone, another may take the channel
      const c = connect(ch);
      await c.client.start();
      await c.client.close();
    });

    it(`past its byte budget it answers 503 with Retry-After and stores nothing more; what it acknowledged stays until handed over`, async () => {
      const ch = channel();
      await made(ch);
      const accepted: string[] = [];
      let full: Answered | undefined;
      for (let i = 0; i < 10 && !full; i++) {
        const a = await post(ch, delivery(SECRET, `trg_full_${i}`, { pad: 250_000 }));
        if (a.status === 200) accepted.push(`trg_full_${i}`);
        else full = a;
      }
      expect(full).toMatchObject({
        status: 503,
        headers: { 'retry-after': String(DEFAULTS.relayFullRetryAfterSeconds) },
      });
      expect(accepted.length).toBeGreaterThanOrEqual(4);
      expect(await relay.stored()).toBe(accepted.length);
      const s = JSON.parse((await status()).body) as {
        bytes: number;
        max_bytes: number;
      };
      expect(s.bytes).toBeLessThanOrEqual(BUDGET);
      expect(s.max_bytes).toBe(BUDGET);
      const l = connect(ch);
      await l.client.start();
      await l.until(() => l.got.length === accepted.length, 'every delivery acknowledged before the budget was spent');
      expect(l.triggers()).toEqual(accepted);
      await holds(ch, 0);
      expect((await post(ch, delivery(SECRET, 'trg_after_full', { pad: 250_000 }))).status).toBe(200);
      await l.until(() => l.got.length === accepted.length + 1, 'a new one, once there is room');
      await holds(ch, 0);
      await l.client.close();
    });

    // #41.1: what the listen cannot verify is not acknowledged: the relay keeps it apart, with why, until dropped
    it('a delivery its listen refuses is kept apart with the reason: out of the queue, listed, counted, never handed over again, and dropped only when asked', async () => {
      const ch = channel();
      await made(ch);
      for (const t of ['trg_keep_1', 'trg_refuse', 'trg_keep_2']) expect((await post(ch, delivery(SECRET, t))).status).toBe(200);
      const l = connect(ch, {
        handle: (d) => (triggerOf(d) === 'trg_refuse' ? { refused: { reason: 'no_match', message: 'No signature matched with this secret.' } } : true),
      });
      await l.client.start();
      await l.until(() => l.got.length === 3, 'the three');
      await holds(ch, 0);
      await l.client.close();
      expect(await relay.stored()).toBe(1);
      const s = JSON.parse((await status()).body) as { refused: number; channels: { channel: string; queued: number; refused: number }[] };
      expect(s.channels.find((c) => c.channel === ch)).toMatchObject({ queued: 0, refused: 1 });
      expect(s.refused).toBeGreaterThanOrEqual(1);
      const auth = { authorization: `Bearer ${TOKEN}` };
      const listed = JSON.parse((await send(`${relay.url}/channels/${ch}/refused`, 'GET', auth)).body) as { refused: { seq: number; reason: string; message: string; headers: [string, string][] }[] };
      expect(listed.refused).toEqual([expect.objectContaining({ seq: 2, reason: 'no_match', message: 'No signature matched with this secret.' })]);
      expect(Object.fromEntries(listed.refused[0]!.headers.map(([k, v]) => [k.toLowerCase(), v]))['trigger-id']).toBe('trg_refuse');

      // the next listen is told, and is not handed it again; it is not dropped by --keep either (the Node host's test ages it below)
      const again = connect(ch);
      expect((await again.client.start()).refused).toBe(1);
      expect((await post(ch, delivery(SECRET, 'trg_after_refusal'))).status).toBe(200);
      await again.until(() => again.got.length === 1, 'the new one');
      expect(again.triggers()).toEqual(['trg_after_refusal']);
      await holds(ch, 0);
      await again.client.close();

      // dropped only when asked: which, or all of them, said in so many words
      expect((await send(`${relay.url}/channels/${ch}/refused`, 'DELETE', auth)).status).toBe(400);
      expect(await relay.stored()).toBe(1);
      const dropped = await send(`${relay.url}/channels/${ch}/refused?seq=2,9`, 'DELETE', auth);
      expect(JSON.parse(dropped.body)).toEqual({ channel: ch, dropped: [2], not_refused: [9] });
      expect(await relay.stored()).toBe(0);
      expect(JSON.parse((await send(`${relay.url}/channels/${ch}`, 'GET', auth)).body)).toMatchObject({ queued: 0, refused: 0 });
    });

    // #41.1: the relay acknowledges only what its listen will verify: its tolerance, and every secret it accepts
    it("verifies with its listen's tolerance and secrets; a secret replaced is handed to the next listen for what came before it, and verifies nothing new", async () => {
      const ch = channel();
      await made(ch);
      const now = Math.floor(Date.now() / 1000);
      const strict = connect(ch, { tolerance: 60 });
      await strict.client.start();
      await strict.client.close();
      const stale = await post(ch, delivery(SECRET, 'trg_100s', { timestamp: now - 100 }));
      expect(stale.status).toBe(401);
      expect(JSON.parse(stale.body).reason).toBe('timestamp_out_of_window');
      expect((await post(ch, delivery(SECRET, 'trg_30s', { timestamp: now - 30 }))).status).toBe(200);
      const wide = connect(ch, { tolerance: 300 });
      await wide.client.start();
      await wide.until(() => wide.got.length === 1, 'the 30 s old one');
      await holds(ch, 0);
      await wide.client.close();
      expect((await post(ch, delivery(SECRET, 'trg_100s_wide', { timestamp: now - 100 }))).status).toBe(200);
      expect((await post(ch, delivery(SECRET, 'trg_before_change'))).status).toBe(200);

      // the webhook's secret replaced (the relay token: no proof of the old one needed)
      const replaced = connect(ch, { secrets: [OTHER] });
      const ready = await replaced.client.start();
      expect(ready.retired).toEqual([{ secret: SECRET, before: expect.any(Number) }]);
      expect(Math.abs(ready.retired[0]!.before - Date.now())).toBeLessThan(60_000);
      await replaced.until(() => replaced.got.length === 2, 'what came before the change');
      expect(replaced.got.every((d) => d.receivedAt <= ready.retired[0]!.before)).toBe(true);
      // what comes now verifies with the new secret only
      expect((await post(ch, delivery(SECRET, 'trg_old_secret_now'))).status).toBe(401);
      expect((await post(ch, delivery(OTHER, 'trg_new_secret'))).status).toBe(200);
      await replaced.until(() => replaced.got.length === 3, 'the new one');
      await holds(ch, 0);
      await replaced.client.close();
    });

    // #41.7: a channel is reached by its own keys (from the webhook's secret), not by a token that opens every channel
    it("a channel's keys reach that channel only: not another, not the relay's status; replacing its secret needs a key of the one it keeps", async () => {
      const a = channel();
      const b = channel();
      await made(a);
      await made(b, { secrets: [OTHER] });
      const keyed = (ch: string, secrets: string[]) => listener({ url: relay.url, channel: ch, secrets });
      const own = keyed(a, [SECRET]);
      expect(await own.client.start()).toMatchObject({ channel: a, created: false });
      expect((await post(a, delivery(SECRET, 'trg_keyed'))).status).toBe(200);
      await own.until(() => own.got.length === 1, 'the delivery, by key');
      await holds(a, 0);
      await own.client.close();
      for (const [ch, secrets] of [
        [b, [SECRET]],
        [a, [OTHER]],
        [channel(), [SECRET]],
      ] as const) {
        const l = keyed(ch, [...secrets]);
        const err = await l.client.start().catch((e: unknown) => e);
        expect(err, ch).toBeInstanceOf(AuthError);
        expect((err as AuthError).exitCode).toBe(ExitCode.AUTH);
      }
      // the API: its own channel only, and never every channel's status
      const { channelKey } = await import('../../src/relay/channel-key.js');
      const keyOfA = `Bearer ${await channelKey(SECRET, a)}`;
      expect((await send(`${relay.url}/channels/${a}`, 'GET', { authorization: keyOfA })).status).toBe(200);
      expect((await send(`${relay.url}/channels/${b}`, 'GET', { authorization: keyOfA })).status).toBe(401);
      expect((await send(`${relay.url}/status`, 'GET', { authorization: keyOfA })).status).toBe(403);
      // a rotation proved by the secret kept: the new secret with the old one
      const NEW = generateSecret();
      const rotated = keyed(a, [NEW, SECRET]);
      await rotated.client.start();
      await rotated.client.close();
      expect((await post(a, delivery(NEW, 'trg_rotated'))).status).toBe(200);
      const byNew = keyed(a, [NEW]);
      await byNew.client.start();
      await byNew.until(() => byNew.got.length === 1, 'the rotated one, by the new key');
      await holds(a, 0);
      await byNew.client.close();
    });

    it('keeps a delivery 7 days (--keep), then drops it; a channel unused for as long is forgotten with its secret', async () => {
      const ch = channel();
      await made(ch);
      expect((await post(ch, delivery(SECRET, 'trg_old'))).status).toBe(200);
      await relay.age(DEFAULTS.relayKeepMs - 60_000);
      expect(await queued(ch)).toBe(1);
      await relay.age(120_000);
      expect(await queued(ch)).toBeUndefined(); // the channel went with it
      expect(await relay.stored()).toBe(0);
      expect(relay.log()).toContain('"event":"expired"');
      expect(relay.log()).toContain('"event":"channel_forgotten"');
      expect((await post(ch, delivery(SECRET, 'trg_new'))).status).toBe(401);
    });

    it("never shows a channel's secret or the relay token: in no answer, no message to the client, no line of its log", async () => {
      const ch = channel();
      await made(ch, { secrets: [SECRET, OTHER] });
      const l = connect(ch);
      await l.client.start();
      await l.client.close();
      const said = [...answers.map((a) => `${a.status} ${JSON.stringify(a.headers)} ${a.body}`), JSON.stringify(l.events), relay.log()].join('\n');
      expect(said.length).toBeGreaterThan(1000);
      for (const secret of [SECRET, OTHER, SECRET.slice(6), TOKEN]) expect(said).not.toContain(secret);
    });
  });
}
