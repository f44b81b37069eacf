import { describe, expect, expectTypeOf, it } from 'vitest';
import { MemoryStore, MessageRefusedError, Webhooks, WebhookHandlerError, type ConsumerEvent, type WebhookEvent, type WebhookEventOf } from '../../src/index.js';
import { signDelivery } from '../../src/signing/index.js';
import { readSink } from '../../src/sinks/index.js';
import type { SinkDelivery } from '../../src/sinks/message.js';
import type { SinkKind } from '../../src/sinks/sink-url.js';
import { encodeMessage } from '../../src/sinks/message.js';
import { BROKERS, delivery, publish, readDeadLetters, SECRET, until, writeForeign, type TestBroker } from '../helpers/sinks.js';

// `webhooks.consume(url, …)`: the handler library's typed handlers run on a sink's stream, in this
// process, against the run's nats-server (JetStream) and redis-server.

/** The run's brokers, with stream names of this file's own. */
const brokers: Record<SinkKind, TestBroker> = { nats: BROKERS.nats.shared(), redis: BROKERS.redis.shared() };
let streams = 0;
const urlOf = (kind: SinkKind) => BROKERS[kind].url(brokers[kind], `c${++streams}`);

/** A delivery signed as the service signs, whose body is `body` (not a JSON object). */
function signedText(trigger: string, body: string): SinkDelivery {
  const bytes = Buffer.from(body);
  const headers = Object.fromEntries(Object.entries(signDelivery({ secret: SECRET, body: bytes, triggerId: trigger })).map(([k, v]) => [k.toLowerCase(), v as string]));
  return { ...delivery(trigger), headers, body: bytes };
}

describe.each(['nats', 'redis'] as const)('webhooks.consume on %s', (kind) => {
  it("runs the typed handlers with a WebhookEvent as a delivery's, once per pair, acknowledging after they resolved", async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_c1', { model: 'wm-6', initialization_time: '2026-11-21T00:00:00Z', forecast_hour: 6 }), delivery('trg_c2'));
    const seen: WebhookEventOf<'forecast_hour.available'>[] = [];
    const store = new MemoryStore();
    const webhooks = new Webhooks({ secret: SECRET, store });
    webhooks.on('forecast_hour.available', (event) => {
      expectTypeOf(event.payload.data.forecast_hour).toEqualTypeOf<number>();
      seen.push(event);
    });
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', onEvent: (e) => events.push(e) });
    try {
      await until(() => events.filter((e) => e.outcome === 'accepted').length === 2, 'both messages processed');
      const first = seen.find((e) => e.id === 'trg_c1')!;
      expect(first).toMatchObject({ type: 'forecast_hour.available', id: 'trg_c1', subscriptionId: '7', signature: { layout: 'standard', triggerId: 'trg_c1', secretIndex: 0 } });
      expect(first.payload.data.forecast_hour).toBe(6);
      // the pairs are in the app's store: the same delivery through verifyAndReceive is a duplicate
      expect(await store.claim('trg_c1', '7')).toBe('done');
      // acknowledged: nothing left pending (JetStream's count follows the ack it was sent)
      let pending = -1;
      for (const deadline = Date.now() + 10_000; pending !== 0 && Date.now() < deadline; ) pending = (await readSink(url)).groups.find((g) => g.name === 'app')?.pending ?? -1;
      expect(pending).toBe(0);
    } finally {
      await c.stop();
    }
  });

  it('the stream holding a pair twice (written behind the dedupe): the handlers run once, the second copy is a duplicate, both acknowledged', async () => {
    const url = urlOf(kind);
    const d = delivery('trg_twice');
    await publish(url, d);
    const m = encodeMessage(d);
    await writeForeign(url, Object.fromEntries(m.fields), Buffer.from(m.body).toString()); // the same message, with no dedupe key
    expect((await readSink(url)).stream.messages).toBe(2);
    let runs = 0;
    const webhooks = new Webhooks({ secret: SECRET }).on('forecast_hour.available', () => void runs++);
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', concurrency: 1, onEvent: (e) => events.push(e) });
    try {
      await until(() => events.length === 2, 'both copies handled');
      expect(events.map((e) => e.outcome)).toEqual(['accepted', 'duplicate']);
      expect(runs).toBe(1);
    } finally {
      await c.stop();
    }
  });

  it('a message that does not verify, or whose body is not JSON, is dead-lettered with why; the others go on', async () => {
    const url = urlOf(kind);
    const tampered = delivery('trg_forged');
    tampered.body = Buffer.from(Buffer.from(tampered.body).toString().replace('"wm-6"', '"wm-7"'));
    await publish(url, tampered, signedText('trg_text', 'not json'), delivery('trg_ok'));
    const handled: string[] = [];
    const webhooks = new Webhooks({ secret: SECRET }).onAny((e: WebhookEvent) => void handled.push(e.id));
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', onEvent: (e) => events.push(e) });
    try {
      await until(() => events.filter((e) => e.outcome === 'dead_lettered').length === 2 && events.some((e) => e.outcome === 'accepted'), 'two refused, one processed');
      expect(handled).toEqual(['trg_ok']);
      const dead = await readDeadLetters(url);
      const reasons = Object.fromEntries(dead.map((d) => [d.fields.key, d.fields.dead_reason]));
      expect(reasons['7/trg_forged']).toMatch(/does not verify with this webhook's secret/);
      expect(reasons['7/trg_text']).toMatch(/does not verify .*JSON/);
    } finally {
      await c.stop();
    }
  });

  it('a throwing handler goes to onError, and its message is delivered again and processed once', async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_flaky'));
    let calls = 0;
    const errors: unknown[] = [];
    const webhooks = new Webhooks({ secret: SECRET })
      .on('forecast_hour.available', () => {
        if (++calls === 1) throw new Error('the database blinked');
      })
      .onError((e) => void errors.push(e));
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', retryDelayMs: 100, onEvent: (e) => events.push(e) });
    try {
      await until(() => events.some((e) => e.outcome === 'accepted'), 'the retry processed');
      expect(events.map((e) => [e.outcome, e.deliveries])).toEqual([
        ['handler_failed', 1],
        ['accepted', 2],
      ]);
      expect(calls).toBe(2);
      expect(errors).toHaveLength(1);
      expect(errors[0]).toBeInstanceOf(WebhookHandlerError);
      expect((errors[0] as WebhookHandlerError).errors.map((e) => (e as Error).message)).toEqual(['the database blinked']);
    } finally {
      await c.stop();
    }
  });

  it('a handler that throws MessageRefusedError: dead-lettered at once, with its reason', async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_never'));
    const webhooks = new Webhooks({ secret: SECRET }).on('forecast_hour.available', () => {
      throw new MessageRefusedError('this app does not take wm-6');
    });
    webhooks.onError(() => undefined);
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', onEvent: (e) => events.push(e) });
    try {
      await until(() => events.some((e) => e.outcome === 'dead_lettered'), 'the refusal');
      expect(events.map((e) => [e.outcome, e.reason])).toEqual([['dead_lettered', 'this app does not take wm-6']]);
    } finally {
      await c.stop();
    }
  });
});
