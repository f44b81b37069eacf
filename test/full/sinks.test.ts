import { describe, expect, it } from 'vitest';
import { startNats } from '../../scripts/harness.js';
import { ExitCode, UnreachableError } from '../../src/errors.js';
import { MemoryStore } from '../../src/delivery/memory-store.js';
import { verifyDelivery } from '../../src/signing/index.js';
import { consume, MessageRefusedError, openSink, readSink, SinkRefusedError, SinkUnavailableError, type ConsumedMessage, type ConsumerEvent, type Sink } from '../../src/sinks/index.js';
import type { SinkKind } from '../../src/sinks/sink-url.js';
import { runCli } from '../helpers/cli.js';
import { BROKERS, delivery, readDeadLetters, SECRET, until, verifyWith, writeForeign, type TestBroker } from '../helpers/sinks.js';

// The sinks (src/sinks/): publish and consume against a real nats-server (with
// JetStream) and a real redis-server: the run's (test/full/global-setup.ts), or, for a test that stops or
// restarts one, a server of the test's own. (Their URLs and message: test/sinks-url.test.ts.)

/** The run's brokers, with stream names of this file's own; a test that stops or restarts one starts its own. */
const brokers: Record<SinkKind, TestBroker> = { nats: BROKERS.nats.shared(), redis: BROKERS.redis.shared() };
let streams = 0;
/** A sink URL on a stream of its own (on `broker`: one the test started). */
const urlOf = (kind: SinkKind, broker: TestBroker = brokers[kind]) => BROKERS[kind].url(broker, `t${++streams}`);

/** Publishes as the service retries a delivery answered 503: again, at its pace, until it is stored. */
async function retried(sink: Sink, d: ReturnType<typeof delivery>) {
  const deadline = Date.now() + 20_000;
  for (;;) {
    try {
      return await sink.publish(d);
    } catch (err) {
      expect(err).toBeInstanceOf(SinkUnavailableError);
      if (Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 100)); // the pace of the retries, not a wait for an outcome
    }
  }
}

/** A consumer in this process, its events kept. */
async function consumer(url: string, handler: (m: ConsumedMessage) => unknown, extra: Partial<Parameters<typeof consume>[1]> = {}) {
  const events: ConsumerEvent[] = [];
  const c = await consume(url, { group: 'g', handler, onEvent: (e) => events.push(e), retryDelayMs: 200, claimTimeoutMs: 2000, ...extra });
  return { c, events };
}

describe.each(['nats', 'redis'] as const)('%s', (kind) => {
  it('two publishers given the same deliveries at once: the stream holds each once', async () => {
    const url = urlOf(kind);
    const [a, b] = await Promise.all([openSink(url), openSink(url)]);
    try {
      const list = Array.from({ length: 300 }, (_, i) => delivery(`trg_twice_${i}`));
      const [ra, rb] = await Promise.all([Promise.all(list.map((d) => a.publish(d))), Promise.all(list.map((d) => b.publish(d)))]);
      for (let i = 0; i < list.length; i++) {
        // one of the two added it, the other found it there; both name the same message
        expect([ra[i]!.duplicate, rb[i]!.duplicate].sort()).toEqual([false, true]);
        expect(ra[i]!.id).toBe(rb[i]!.id);
      }
      // and one publisher given the same delivery twice in one turn
      const twice = delivery('trg_twice_same_turn');
      expect((await Promise.all([a.publish(twice), a.publish(twice)])).map((r) => r.duplicate)).toEqual([false, true]);
      const view = await readSink(url, 1000);
      expect(view.stream.messages).toBe(301);
      expect(new Set(view.deliveries.map((e) => e.trigger_id)).size).toBe(301);
    } finally {
      await Promise.all([a.close(), b.close()]);
    }
  });

  it('a worker gets the exact bytes and headers, and what the verification found; it may verify again', async () => {
    const url = urlOf(kind);
    const sink = await openSink(url);
    const sent = delivery('trg_exact', { model: 'wm-6', forecast_hour: 12, note: 'ünïcode  spaced' });
    await sink.publish(sent);
    await sink.close();
    let got: ConsumedMessage | undefined;
    const { c } = await consumer(url, (m) => {
      got = m;
    });
    try {
      await until(() => got !== undefined, 'the message');
      expect(Buffer.from(got!.body).equals(Buffer.from(sent.body))).toBe(true);
      expect(got).toMatchObject({
        trigger: 'trg_exact',
        subscription: '7',
        source: 'body',
        type: 'forecast_hour.available',
        layout: 'standard',
        timestamp: sent.timestamp,
        secretIndex: 0,
        headers: sent.headers,
        deliveries: 1,
        key: '7/trg_exact',
      });
      const again = verifyDelivery({ secret: SECRET, headers: got!.headers, body: got!.body, now: sent.timestamp * 1000 });
      expect(again.ok && again.triggerId).toBe('trg_exact');
    } finally {
      await c.stop();
    }
  });

  it('a failed handler is delivered again after its delay, then moved to the dead letters at the limit, with why', async () => {
    const url = urlOf(kind);
    const sink = await openSink(url);
    await sink.publish(delivery('trg_fails'));
    await sink.publish(delivery('trg_fine'));
    await sink.close();
    const attempts: number[] = [];
    const { c, events } = await consumer(
      url,
      (m) => {
        if (m.trigger !== 'trg_fails') return;
        attempts.push(performance.now());
        throw new Error(`refused by the app (attempt ${m.deliveries})`);
      },
      { retryDelayMs: 300, maxDeliveries: 3 },
    );
    try {
      await until(() => events.some((e) => e.outcome === 'dead_lettered'), 'the dead letter');
      expect(attempts).toHaveLength(3);
      // each retry waited its delay (the broker holds it back; a busy machine can only make it later)
      for (let i = 1; i < attempts.length; i++) expect(attempts[i]! - attempts[i - 1]!).toBeGreaterThanOrEqual(290);
      expect(events.filter((e) => e.key === '7/trg_fails').map((e) => [e.outcome, e.deliveries])).toEqual([
        ['handler_failed', 1],
        ['handler_failed', 2],
        ['dead_lettered', 3],
      ]);
      expect(events.find((e) => e.key === '7/trg_fine')?.outcome).toBe('accepted');
      const dead = await readDeadLetters(url);
      expect(dead).toHaveLength(1);
      expect(dead[0]!.fields).toMatchObject({
        key: '7/trg_fails',
        dead_group: 'g',
        dead_deliveries: '3',
        dead_reason: 'the handler failed 3 times (the limit); the last time: refused by the app (attempt 3)',
      });
      expect(JSON.parse(dead[0]!.body).trigger_id).toBe('trg_fails');
      const view = await readSink(url);
      expect(view.dead_letters.messages).toBe(1);
      expect(view.groups[0]).toMatchObject({ name: 'g', pending: 0 });
    } finally {
      await c.stop();
    }
  });

  it('a message that is not ours is refused with a reason, moved to the dead letters, and the consumer goes on', async () => {
    const url = urlOf(kind);
    const sink = await openSink(url);
    await writeForeign(url, { event: 'order.created' }, '{"order":1}');
    await writeForeign(
      url,
      {
        wxhooks: '1',
        key: '7/trg_forged',
        trigger: 'trg_other',
        subscription: '7',
        source: 'body',
        layout: 'standard',
        timestamp: '1',
        secret_index: '0',
        received_at: '2026-11-24T00:00:00Z',
        headers: '{}',
      },
      '{}',
    );
    await sink.publish(delivery('trg_after'));
    await sink.close();
    const handled: string[] = [];
    const { c, events } = await consumer(url, (m) => {
      handled.push(m.trigger);
    });
    try {
      await until(() => handled.length === 1 && events.filter((e) => e.outcome === 'dead_lettered').length === 2, 'two refusals and the delivery after them');
      expect(handled).toEqual(['trg_after']);
      expect(events.filter((e) => e.outcome === 'dead_lettered').map((e) => e.reason)).toEqual([
        'not a wxhooks message: it has no "wxhooks" field',
        'its key does not match its trigger and subscription',
      ]);
      const dead = await readDeadLetters(url);
      expect(dead.map((d) => [d.fields.dead_reason, d.body])).toEqual([
        ['not a wxhooks message: it has no "wxhooks" field', '{"order":1}'],
        ['its key does not match its trigger and subscription', '{}'],
      ]);
      expect(dead[0]!.fields.event).toBe('order.created');
    } finally {
      await c.stop();
    }
  });

  it('a handler that throws MessageRefusedError: the message goes to the dead letters at once, with its reason', async () => {
    const url = urlOf(kind);
    const sink = await openSink(url);
    await sink.publish(delivery('trg_refused_by_handler'));
    await sink.close();
    let runs = 0;
    const { c, events } = await consumer(url, () => {
      runs++;
      throw new MessageRefusedError("its body does not verify with the webhook's secret");
    });
    try {
      await until(() => events.some((e) => e.outcome === 'dead_lettered'), 'the refusal');
      expect(runs).toBe(1);
      expect(events.map((e) => [e.outcome, e.reason])).toEqual([['dead_lettered', "its body does not verify with the webhook's secret"]]);
      expect((await readDeadLetters(url)).map((d) => d.fields.dead_reason)).toEqual(["its body does not verify with the webhook's secret"]);
    } finally {
      await c.stop();
    }
  });

  it('deliveries list --sink: what is in the stream and what each group has pending, as a table or --json; the password never shown', async () => {
    const url = urlOf(kind);
    const sink = await openSink(url);
    for (const t of ['trg_v1', 'trg_v2', 'trg_v3']) await sink.publish(delivery(t));
    await sink.close();
    await writeForeign(url, { other: 'x' }, 'not ours');
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let started = 0;
    const { c } = await consumer(
      url,
      async (m) => {
        started++;
        if (m.trigger === 'trg_v2') await held;
      },
      { concurrency: 1 },
    );
    try {
      await until(() => started === 2, 'the second delivery to be under way');
      const json = await runCli(['deliveries', 'list', '--sink', url, '--json']);
      expect(json.code, json.stderr).toBe(0);
      const view = JSON.parse(json.stdout);
      expect(view.broker).toBe(kind);
      expect(view.stream.messages).toBe(4);
      expect(view.deliveries.map((e: { trigger_id?: string; not_ours?: string }) => e.trigger_id ?? e.not_ours)).toEqual([
        'trg_v1',
        'trg_v2',
        'trg_v3',
        'not a wxhooks message: it has no "wxhooks" field',
      ]);
      expect(view.groups).toHaveLength(1);
      // Redis hands out what a worker asks for; JetStream hands a worker one more than it works on (its pull)
      if (kind === 'redis') {
        expect(view.groups[0]).toMatchObject({ name: 'g', pending: 1, waiting: 2 });
        expect(view.groups[0].pending_entries).toEqual([expect.objectContaining({ id: view.deliveries[1].id, consumer: c.name, deliveries: 1 })]);
      } else {
        expect(view.groups[0]).toMatchObject({ name: 'g', pending: 2, waiting: 1 });
      }
      // the built binary: its bundle loads the broker's client as Node does
      const text = await runCli(['deliveries', 'list', '--sink', url], { spawn: true });
      expect(text.code, text.stderr).toBe(0);
      expect(text.stdout).toContain('trg_v3');
      expect(text.stdout).toContain('not ours');
      expect(text.stdout).toMatch(kind === 'redis' ? /g\s+1\s+2/ : /g\s+2\s+1/);
      for (const out of [json.stdout, json.stderr, text.stdout, text.stderr]) expect(out).not.toContain(brokers[kind].password);
      expect(text.stdout + text.stderr).toContain('***');
    } finally {
      release();
      await c.stop();
    }
  });

  it('deliveries list --sink: a stream that is not there is exit 4; a broker that cannot be reached exit 6, without the password', async () => {
    const missing = await runCli(['deliveries', 'list', '--sink', urlOf(kind)]);
    expect(missing.code, missing.stderr).toBe(ExitCode.NOT_FOUND);
    const port = brokers[kind].port;
    const dead = BROKERS[kind].url({ ...brokers[kind], url: brokers[kind].url.replace(`:${port}`, ':1') }, 'none');
    const away = await runCli(['deliveries', 'list', '--sink', dead]);
    expect(away.code, away.stderr).toBe(ExitCode.UNREACHABLE);
    expect(away.stderr).toContain('127.0.0.1:1');
    expect(away.stderr).not.toContain(brokers[kind].password);
    const bad = await runCli(['deliveries', 'list', '--sink', 'ftp://h/t']);
    expect(bad.code).toBe(ExitCode.USAGE);
  });

  it('the broker restarted mid-load: nothing the publisher was told is stored is lost, and a consumer running through it processes each once', async () => {
    const broker = await BROKERS[kind].start(); // of its own: it is restarted
    const url = urlOf(kind, broker);
    const states: string[] = [];
    const sink = await openSink(url, { timeoutMs: 2000, onConnection: (s) => states.push(s) });
    const seen = new Map<string, number>();
    const { c } = await consumer(
      url,
      (m) => {
        seen.set(m.trigger, (seen.get(m.trigger) ?? 0) + 1);
      },
      { store: new MemoryStore(), verify: verifyWith() },
    );
    const N = 1200;
    const acked = new Set<string>();
    const failed = new Set<string>();
    let next = 0;
    let restarted: Promise<void> | undefined;
    try {
      // 16 publishers, as the service's deliveries come; the broker restarted a third of the way in
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          while (next < N) {
            const trigger = `trg_r_${next++}`;
            if (next === Math.floor(N / 3)) restarted = broker.restart();
            try {
              await sink.publish(delivery(trigger));
              acked.add(trigger);
            } catch (err) {
              expect(err).toBeInstanceOf(SinkUnavailableError);
              failed.add(trigger);
            }
          }
        }),
      );
      await restarted;
      // everything acknowledged is in the stream, once
      const view = await readSink(url, N * 2);
      const inStream = view.deliveries.map((e) => e.trigger_id!);
      expect(new Set(inStream).size).toBe(inStream.length);
      for (const t of acked) expect(inStream).toContain(t);
      // the service retries what was refused: each lands once, whether or not it had got in before
      const retries = [...failed];
      await Promise.all(
        Array.from({ length: 16 }, async () => {
          for (let t = retries.pop(); t !== undefined; t = retries.pop()) await retried(sink, delivery(t));
        }),
      );
      expect((await readSink(url, N * 2)).stream.messages).toBe(N);
      await until(() => seen.size === N, `the consumer to process all ${N}`, 30_000);
      expect([...seen.values()].every((n) => n === 1)).toBe(true);
    } finally {
      await c.stop();
      await sink.close();
      await broker.remove();
    }
    expect(failed.size === 0 || states.includes('lost')).toBe(true);
  }, 60_000);
});

describe('the broker away for 10 s', () => {
  /** Stops the broker; publishes keep failing, fast, for 10 s; then it is back and publishing succeeds. */
  async function outage(kind: SinkKind): Promise<void> {
    const broker = await BROKERS[kind].start(); // of its own: it is stopped
    const url = urlOf(kind, broker);
    const states: string[] = [];
    const sink: Sink = await openSink(url, { timeoutMs: 2000, onConnection: (s) => states.push(s) });
    const got: string[] = [];
    const { c } = await consumer(url, (m) => {
      got.push(m.trigger);
    });
    try {
      await sink.publish(delivery('trg_before'));
      // read, and its acknowledgement recorded by the broker, before the broker goes: one it had not recorded
      // would be given again after the outage (at least once), which is not what this test looks at
      await until(() => got.includes('trg_before'), 'the consumer to read trg_before');
      await until(async () => (await readSink(url)).groups.find((g) => g.name === 'g')?.pending === 0, "the broker to record trg_before's acknowledgement");
      await broker.stop();
      const downUntil = Date.now() + 10_000;
      let failures = 0;
      while (Date.now() < downUntil) {
        const started = performance.now();
        await expect(sink.publish(delivery(`trg_down_${failures}`))).rejects.toBeInstanceOf(SinkUnavailableError);
        // an error within the publish timeout, never a hang
        expect(performance.now() - started).toBeLessThan(2500);
        failures++;
        await new Promise((r) => setTimeout(r, 250)); // the pace of the service's deliveries, not a wait for an outcome
      }
      expect(states).toEqual(['lost']);
      expect(sink.connected).toBe(false);
      await broker.start();
      // the service's retries: one lands once the broker is back
      expect((await retried(sink, delivery('trg_down_0'))).duplicate).toBe(false);
      await until(() => states.length === 2, 'the broker to be said back');
      expect(states).toEqual(['lost', 'restored']);
      expect(sink.connected).toBe(true);
      await until(() => got.includes('trg_down_0'), 'the consumer to read again after the outage', 20_000);
      expect(got.filter((t) => t === 'trg_before')).toHaveLength(1);
    } finally {
      await c.stop();
      await sink.close();
      await broker.remove();
    }
  }

  it('publishing fails at once with SinkUnavailableError, one line each way, and then it succeeds (both brokers at once)', async () => {
    await Promise.all([outage('nats'), outage('redis')]);
  }, 60_000);
});

describe('opening a sink', () => {
  it('a broker that cannot be reached at start: exit 6, naming the host, never the password', async () => {
    for (const kind of ['nats', 'redis'] as const) {
      const url = BROKERS[kind].url({ ...brokers[kind], url: brokers[kind].url.replace(`:${brokers[kind].port}`, ':1') }, 'x');
      const err = await openSink(url).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect((err as Error).message).toContain('127.0.0.1:1');
      expect((err as Error).message).not.toContain(brokers[kind].password);
    }
  });

  it('nats: the stream deleted behind its back: the publish fails (no one answers), and is not taken for stored', async () => {
    const url = urlOf('nats');
    const sink = await openSink(url);
    try {
      await sink.publish(delivery('trg_before_delete'));
      const { connect } = await import('@nats-io/transport-node');
      const { jetstreamManager } = await import('@nats-io/jetstream');
      const nc = await connect({ servers: `127.0.0.1:${brokers.nats.port}`, user: 'wx', pass: brokers.nats.password });
      await (await jetstreamManager(nc)).streams.delete(sink.stream.name);
      await nc.close();
      const err = await sink.publish(delivery('trg_after_delete')).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SinkUnavailableError);
      expect((err as Error).message).toContain('JetStream did not answer');
    } finally {
      await sink.close();
    }
  });

  it('nats: a delivery larger than the server takes is refused for good (SinkRefusedError); Redis takes it', async () => {
    const big = delivery('trg_big', { model: 'wm-6', grid: 'x'.repeat(1_100_000) });
    const nats = await openSink(urlOf('nats'));
    const redis = await openSink(urlOf('redis'));
    try {
      const err = await nats.publish(big).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(SinkRefusedError);
      expect((err as Error).message).toContain("over the NATS server's max_payload (1048576 bytes)");
      expect((await redis.publish(big)).duplicate).toBe(false);
    } finally {
      await nats.close();
      await redis.close();
    }
  });

  it('nats: a server without JetStream: exit 6, saying how to turn it on', async () => {
    const plain = await startNats({ jetstream: false });
    try {
      const err = await openSink(`${plain.url}/a.b`).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect((err as Error).message).toContain(`JetStream does not answer on the NATS server at 127.0.0.1:${plain.port}`);
      expect((err as UnreachableError).hint).toContain('-js');
    } finally {
      await plain.remove();
    }
  });

  it('a wrong password: exit 6, and the message does not show it', async () => {
    for (const kind of ['nats', 'redis'] as const) {
      const url = BROKERS[kind].url({ ...brokers[kind], url: brokers[kind].url.replace(brokers[kind].password, 'pw-wrong-5') }, 'x');
      const err = await openSink(url).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(UnreachableError);
      expect((err as Error).message).not.toContain('pw-wrong-5');
    }
  });
});
