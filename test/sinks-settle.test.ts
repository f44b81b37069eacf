import { describe, expect, it } from 'vitest';
import { MemoryStore } from '../src/delivery/memory-store.js';
import { systemTimers } from '../src/delivery/runner.js';
import type { PairStore } from '../src/delivery/store.js';
import { openStore } from '../src/handler/node.js';
import { handleInbound, MessageRefusedError, runSettings, type ConsumedMessage, type ConsumerEvent, type Inbound, type VerifiedMessage } from '../src/sinks/consumer.js';
import { decodeMessage, encodeMessage, type SinkDelivery } from '../src/sinks/message.js';
import { tempDir } from './helpers/cli.js';
import { manualTimers } from './helpers/clock.js';
import { delivery, signedAgo, verifyWith } from './helpers/sinks.js';

// A consumer's decisions for one message, whichever the broker (src/sinks/consumer.ts), against the real
// stores (memory, file) and the real verifier, with no broker: each message is handed over by a small
// in-memory broker of the test's own that records what was done with it.

/** What the broker was asked to do with a message. */
type Done = { ack: true } | { retry: number } | { dead: string };

/** A message as a broker hands it over: written from a delivery (its fields changed by `change`), stored at `storedAt`. */
function inbound(d: SinkDelivery, o: { storedAt?: number; deliveries?: number; change?: (fields: Map<string, string>) => void; done?: Done[] } = {}): Inbound & { done: Done[] } {
  const m = encodeMessage(d);
  const fields = new Map<string, string>(m.fields);
  o.change?.(fields);
  const done = o.done ?? [];
  return {
    id: '1700000000000-0',
    deliveries: o.deliveries ?? 1,
    storedAt: o.storedAt ?? Date.now(),
    decoded: decodeMessage((name) => fields.get(name), m.body),
    done,
    ack: async () => void done.push({ ack: true }),
    retry: async (delayMs) => void done.push({ retry: delayMs }),
    deadLetter: async (reason) => (done.push({ dead: reason }), 'test:dead'),
    touch: async () => undefined,
  };
}

/** The consumer's settings for these options, its events kept. */
function consumer(o: Partial<Parameters<typeof runSettings>[0]> & { handler?: Parameters<typeof runSettings>[0]['handler'] } = {}) {
  const events: ConsumerEvent[] = [];
  const runs: string[] = [];
  const { run, stop } = runSettings({
    handler: (m: ConsumedMessage) => void runs.push(m.key),
    retryDelayMs: 100,
    ...o,
    onEvent: (e) => events.push(e),
  });
  return { run, stop, events, runs };
}

/** Resolves once the handler's timer is set (the message verified and its pair claimed): then moving the timers means something. */
async function timing(timers: { pending(): number }): Promise<void> {
  while (timers.pending() === 0) await new Promise((r) => setImmediate(r));
}

describe.each<[string, () => Promise<PairStore>]>([
  ['a MemoryStore', async () => new MemoryStore()],
  ['the file store', () => openStore('file', { dir: tempDir() })],
])('a message settled against %s', (_name, open) => {
  it('verified, its pair claimed from what is signed: accepted and acknowledged; the same pair again a duplicate, not run', async () => {
    const store = await open();
    try {
      const c = consumer({ store, verify: verifyWith() });
      const first = inbound(delivery('trg_s1'));
      const again = inbound(delivery('trg_s1'));
      await handleInbound(first, c.run);
      await handleInbound(again, c.run);
      expect(c.runs).toEqual(['7/trg_s1']);
      expect(c.events.map((e) => [e.outcome, e.key])).toEqual([
        ['accepted', '7/trg_s1'],
        ['duplicate', '7/trg_s1'],
      ]);
      expect([first.done, again.done]).toEqual([[{ ack: true }], [{ ack: true }]]);
      expect(await store.claim('trg_s1', '7')).toBe('done');
    } finally {
      await store.close();
    }
  });

  it('a copy whose envelope names another pair (its key to match): dead-lettered with why, never claimed, the handler not run (#41.2)', async () => {
    const store = await open();
    try {
      const c = consumer({ store, verify: verifyWith() });
      await handleInbound(inbound(delivery('trg_real')), c.run);
      for (const [field, value] of [
        ['trigger', 'trg_copy'],
        ['subscription', '8'],
      ] as const) {
        const copy = inbound(delivery('trg_real'), {
          change: (f) => {
            f.set(field, value);
            f.set('key', `${f.get('subscription')}/${f.get('trigger')}`);
          },
        });
        await handleInbound(copy, c.run);
        expect(copy.done).toEqual([{ dead: expect.stringContaining(`${field} "${value}" in the envelope`) }]);
      }
      expect(c.runs).toEqual(['7/trg_real']);
      expect(c.events.map((e) => [e.outcome, e.cause])).toEqual([
        ['accepted', undefined],
        ['dead_lettered', 'envelope_mismatch'],
        ['dead_lettered', 'envelope_mismatch'],
      ]);
      // neither the copy's pair was claimed: a real delivery of it would still run
      expect(await store.claim('trg_copy', '7')).toBe('won');
      expect(await store.claim('trg_real', '8')).toBe('won');
    } finally {
      await store.close();
    }
  });
});

describe("a consumer's checks", () => {
  it('judged at the time the broker stored it, not at received_at: a delivery signed an hour before is refused, whatever received_at says (#41.2)', async () => {
    const c = consumer({ store: new MemoryStore(), verify: verifyWith() });
    const old = inbound(signedAgo('trg_old', 3600));
    await handleInbound(old, c.run);
    expect(c.runs).toEqual([]);
    expect(c.events[0]).toMatchObject({ outcome: 'dead_lettered', cause: 'unverified', reason: expect.stringMatching(/timestamp/i) });
    // the same message, stored by the broker when it was signed (a backlog read hours later): it verifies
    const backlog = inbound(signedAgo('trg_old', 3600), { storedAt: Date.now() - 3600_000 });
    await handleInbound(backlog, c.run);
    expect(c.runs).toEqual(['7/trg_old']);
  });

  it('an envelope whose type or timestamp differs from the signed ones: dead-lettered', async () => {
    const c = consumer({ store: new MemoryStore(), verify: verifyWith() });
    const typed = inbound(delivery('trg_t'), { change: (f) => f.set('type', 'degree_days.available') });
    const timed = inbound(delivery('trg_u'), { change: (f) => f.set('timestamp', '1') });
    await handleInbound(typed, c.run);
    await handleInbound(timed, c.run);
    expect(c.runs).toEqual([]);
    expect(c.events.map((e) => e.reason)).toEqual([expect.stringContaining('type "degree_days.available" in the envelope'), expect.stringContaining('timestamp 1 in the envelope')]);
  });

  it('a store without verify is refused: a pair is never claimed as the envelope says', () => {
    expect(() => runSettings({ handler: () => undefined, store: new MemoryStore() })).toThrow(/store without verify/);
  });

  it('verify throwing MessageRefusedError: dead-lettered at once; another error: given back as a failure', async () => {
    const refuse = consumer({
      verify: () => {
        throw new MessageRefusedError('signed with another secret');
      },
    });
    const m = inbound(delivery('trg_v'));
    await handleInbound(m, refuse.run);
    expect(m.done).toEqual([{ dead: 'signed with another secret' }]);
    const broken = consumer({
      verify: () => {
        throw new Error('the crypto blinked');
      },
    });
    const n = inbound(delivery('trg_w'));
    await handleInbound(n, broken.run);
    expect(n.done).toEqual([{ retry: 100 }]);
    expect(broken.events[0]).toMatchObject({ outcome: 'handler_failed' });
  });
});

describe('a handler that never resolves (#41.16)', () => {
  it('is given up on at its time: handler_timed_out, its claim let go, its signal aborted, its message given back', async () => {
    const timers = manualTimers();
    const store = new MemoryStore();
    let signal: AbortSignal | undefined;
    const c = consumer({
      store,
      verify: verifyWith(),
      timers,
      handlerTimeoutMs: 30_000,
      handler: (_m: ConsumedMessage, _v: VerifiedMessage | undefined, s: AbortSignal) => {
        signal = s;
        return new Promise(() => undefined);
      },
    });
    const m = inbound(delivery('trg_hung'));
    const handling = handleInbound(m, c.run);
    await timing(timers);
    expect(signal?.aborted).toBe(false);
    await timers.advance(30_000);
    await handling;
    expect(c.events).toEqual([expect.objectContaining({ outcome: 'handler_timed_out', retryInMs: 100, reason: expect.stringContaining('ran past its time') })]);
    expect(m.done).toEqual([{ retry: 100 }]);
    expect(signal?.aborted).toBe(true);
    expect(await store.claim('trg_hung', '7')).toBe('won');
  });

  it('at the limit of deliveries, a handler timed out once more goes to the dead letters', async () => {
    const timers = manualTimers();
    const c = consumer({ verify: verifyWith(), timers, handlerTimeoutMs: 1000, maxDeliveries: 2, handler: () => new Promise(() => undefined) });
    const m = inbound(delivery('trg_hung2'), { deliveries: 2 });
    const handling = handleInbound(m, c.run);
    await timing(timers);
    await timers.advance(1000);
    await handling;
    expect(m.done).toEqual([{ dead: 'the handler failed 2 times (the limit); the last time: it ran past its time (1000 ms)' }]);
  });

  it('stop({ timeoutMs }) ends: the handler still running then is given up on, its message given back at once, its claim let go', async () => {
    const timers = manualTimers();
    const store = new MemoryStore();
    const c = consumer({ store, verify: verifyWith(), timers, handler: () => new Promise(() => undefined) });
    const m = inbound(delivery('trg_stop'));
    const inflight = new Set([handleInbound(m, c.run)]);
    await timing(timers);
    const stopped = c.stop.drain(inflight, 5_000);
    let ended = false;
    void stopped.then(() => (ended = true));
    await timers.advance(4_999);
    expect(ended).toBe(false);
    await timers.advance(1);
    await stopped;
    expect(m.done).toEqual([{ retry: 0 }]);
    expect(c.events).toEqual([expect.objectContaining({ outcome: 'handler_timed_out', retryInMs: 0, reason: 'the worker stopped before the handler finished' })]);
    expect(await store.claim('trg_stop', '7')).toBe('won');
  });

  it('stop() without a limit waits for the handlers, each within its own time', async () => {
    const timers = manualTimers();
    const c = consumer({ verify: verifyWith(), timers, handlerTimeoutMs: 10_000, handler: () => new Promise(() => undefined) });
    const m = inbound(delivery('trg_stop2'));
    const inflight = new Set([handleInbound(m, c.run)]);
    await timing(timers);
    const stopped = c.stop.drain(inflight);
    await timers.advance(10_000);
    await stopped;
    expect(m.done).toEqual([{ retry: 100 }]);
  });

  it('a message waiting for a pair another worker holds is given back at once when the worker stops', async () => {
    const store = new MemoryStore();
    expect(await store.claim('trg_held', '7')).toBe('won');
    const c = consumer({ store, verify: verifyWith(), retryDelayMs: 60_000, timers: systemTimers });
    const m = inbound(delivery('trg_held'));
    const inflight = new Set([handleInbound(m, c.run)]);
    await new Promise((r) => setImmediate(r));
    expect(c.events.map((e) => e.outcome)).toEqual(['in_progress']);
    await c.stop.drain(inflight);
    expect(m.done).toEqual([{ retry: 0 }]);
  });
});
