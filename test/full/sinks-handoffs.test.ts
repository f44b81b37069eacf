import { createClient } from 'redis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Broker } from '../../scripts/harness.js';
import { ExitCode } from '../../src/errors.js';
import { manualTimers } from '../helpers/clock.js';
import { MemoryStore, Webhooks, type ConsumerEvent, type WebhookEvent } from '../../src/index.js';
import { encodeMessage, openSink, SinkUnavailableError, type Sink, type SinkDelivery } from '../../src/sinks/index.js';
import type { SinkKind } from '../../src/sinks/kinds.js';
import { spawnCli, tempDir } from '../helpers/cli.js';
import { post } from '../helpers/http.js';
import { startCli } from '../helpers/process.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { BROKERS, delivery, publish, readDeadLetters, SECRET, signedAgo, until, writeForeign } from '../helpers/sinks.js';

// The hand-offs of #41 at a sink, against real brokers: the pair a worker claims is the signed one, not
// the envelope's, and a message is judged at the time its broker stored it (41.2); a broker set to drop
// what no worker has read is refused at start, said when accepted, and its drops said while running
// (41.3, 41.17, with real maxmemory and maxmemory-policy settings, and real JetStream limits); a handler
// that never resolves is timed out, and a worker's stop ends (41.16).

const brokers = {} as Record<SinkKind, Broker>;
let streams = 0;
const urlOf = (kind: SinkKind) => BROKERS[kind].url(brokers[kind], `h${++streams}`);

beforeAll(async () => {
  [brokers.nats, brokers.redis] = await Promise.all([BROKERS.nats.start(), BROKERS.redis.start()]);
}, 60_000);
afterAll(async () => {
  await Promise.all(Object.values(brokers).map((b) => b?.remove()));
});

/** Writes a message behind the sink's back, as someone with access to the broker could: a delivery's fields, changed by `change`. */
async function writeChanged(url: string, d: SinkDelivery, change: (fields: Record<string, string>) => void = () => undefined): Promise<void> {
  const m = encodeMessage(d);
  const fields = Object.fromEntries(m.fields);
  change(fields);
  await writeForeign(url, fields, Buffer.from(m.body).toString());
}

describe.each(['nats', 'redis'] as const)('webhooks.consume on %s: the pair from signed content (#41.2)', (kind) => {
  it('a copy of a real message whose envelope names another pair (its key to match) is dead-lettered with why; the handler runs once', async () => {
    const url = urlOf(kind);
    const real = delivery('trg_real');
    await publish(url, real);
    await writeChanged(url, real, (f) => {
      f.trigger = 'trg_copy';
      f.key = `7/trg_copy`;
    });
    await writeChanged(url, real, (f) => {
      f.subscription = '8';
      f.key = `8/trg_real`;
    });
    const ran: WebhookEvent[] = [];
    const webhooks = new Webhooks({ secret: SECRET, store: new MemoryStore() }).onAny((e) => void ran.push(e));
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', concurrency: 1, onEvent: (e) => events.push(e) });
    try {
      await until(() => events.length === 3, 'the three messages handled');
      expect(ran.map((e) => [e.id, e.subscriptionId])).toEqual([['trg_real', '7']]);
      expect(events.map((e) => [e.outcome, e.cause])).toEqual([
        ['accepted', undefined],
        ['dead_lettered', 'envelope_mismatch'],
        ['dead_lettered', 'envelope_mismatch'],
      ]);
      const dead = await readDeadLetters(url);
      expect(dead.map((d) => d.fields.dead_reason)).toEqual([
        expect.stringContaining('trigger "trg_copy" in the envelope, "trg_real" signed'),
        expect.stringContaining('subscription "8" in the envelope, "7" signed'),
      ]);
    } finally {
      await c.stop();
    }
  });

  it('judged at the time the broker stored it: a delivery signed an hour before, its received_at set to match, is dead-lettered, not run', async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_fresh'));
    await writeChanged(url, signedAgo('trg_stale', 3600));
    const ran: string[] = [];
    const webhooks = new Webhooks({ secret: SECRET }).onAny((e) => void ran.push(e.id));
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', onEvent: (e) => events.push(e) });
    try {
      await until(() => events.length === 2, 'both messages handled');
      expect(ran).toEqual(['trg_fresh']);
      const refused = events.find((e) => e.outcome === 'dead_lettered');
      expect(refused).toMatchObject({ cause: 'unverified', reason: expect.stringMatching(/as of when the broker stored it .*timestamp/is) });
    } finally {
      await c.stop();
    }
  });
});

describe.each(['nats', 'redis'] as const)('webhooks.consume on %s: a handler that never resolves (#41.16)', (kind) => {
  it('is timed out (onError told, its claim let go), its message delivered again, and stop() ends', async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_hangs'));
    const timers = manualTimers();
    let calls = 0;
    const errors: Error[] = [];
    const webhooks = new Webhooks({ secret: SECRET, handlerTimeoutMs: 30_000, timers })
      .on('forecast_hour.available', () => {
        // the first run never resolves; the second does
        if (++calls === 1) return new Promise(() => undefined);
      })
      .onError((e) => void errors.push(e));
    const events: ConsumerEvent[] = [];
    const c = await webhooks.consume(url, { group: 'app', retryDelayMs: 0, claimTimeoutMs: 2000, onEvent: (e) => events.push(e) });
    try {
      await until(() => calls === 1 && timers.pending() > 0, 'the handler to run');
      await timers.advance(30_000);
      await until(() => events.some((e) => e.outcome === 'accepted'), 'the message delivered again and processed');
      expect(events.map((e) => [e.outcome, e.deliveries])).toEqual([
        ['handler_timed_out', 1],
        ['accepted', 2],
      ]);
      expect(errors.map((e) => e.name)).toEqual(['WebhookTimeoutError']);
    } finally {
      await c.stop();
    }
  });

  it('stop({ timeoutMs }) ends with a handler still running: its message is given back, and the next worker runs it', async () => {
    const url = urlOf(kind);
    await publish(url, delivery('trg_stuck'));
    const timers = manualTimers();
    let started = false;
    const first = new Webhooks({ secret: SECRET, timers }).onAny(() => {
      started = true;
      return new Promise(() => undefined);
    });
    first.onError(() => undefined);
    const c = await first.consume(url, { group: 'app', claimTimeoutMs: 2000, retryDelayMs: 500 });
    await until(() => started, 'the handler to run');
    const stopped = c.stop({ timeoutMs: 5000 });
    await until(() => timers.pending() > 1, "the stop's limit to be set");
    await timers.advance(5000);
    await stopped;
    const ran: string[] = [];
    const events: ConsumerEvent[] = [];
    const second = new Webhooks({ secret: SECRET }).onAny((e) => void ran.push(e.id));
    const d = await second.consume(url, { group: 'app', claimTimeoutMs: 2000, retryDelayMs: 500, onEvent: (e) => events.push(e) });
    try {
      await until(() => events.length === 1, 'the next worker to run it, and acknowledge it', 20_000);
      expect(ran).toEqual(['trg_stuck']);
      // (its count of deliveries is the broker's: JetStream takes back a count it could not hand to the stopped worker)
      expect(events.map((e) => e.outcome)).toEqual(['accepted']);
    } finally {
      await d.stop();
    }
  });
});

/** `listen --sink URL`, spawned, to be refused before its port opens. */
function listenRefusing(url: string) {
  return spawnCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--sink', url], { env: { S: TEST_SECRET, WXHOOKS_CONFIG_DIR: tempDir() }, timeoutMs: 30_000 });
}

describe('redis set to evict (#41.3, #41.17): real maxmemory and maxmemory-policy', () => {
  let redis: Broker;
  let admin: ReturnType<typeof createClient>;
  beforeAll(async () => {
    redis = await BROKERS.redis.start();
    admin = createClient({ url: redis.url });
    await admin.connect();
  }, 60_000);
  afterAll(async () => {
    await admin?.quit().catch(() => undefined);
    await redis?.remove();
  });
  const policy = async (p: string, max = '3mb') => {
    await admin.sendCommand(['CONFIG', 'SET', 'maxmemory', max]);
    await admin.sendCommand(['CONFIG', 'SET', 'maxmemory-policy', p]);
  };
  const urlHere = (label: string) => BROKERS.redis.url(redis, label);

  it.each([
    ['allkeys-lru', /the stream \S+ itself can go/],
    ['allkeys-random', /the stream \S+ itself can go/],
    ['volatile-lru', /pairs' dedupe keys/],
    ['volatile-ttl', /pairs' dedupe keys/],
  ])(
    'maxmemory-policy %s: listen --sink is refused, exit 2, naming the setting to change and ?drops=accept; nothing listens',
    async (p, what) => {
      await policy(p);
      const r = await listenRefusing(urlHere(`refused_${p}`));
      expect(r.code, r.stderr).toBe(ExitCode.USAGE);
      expect(r.stderr).toMatch(what);
      expect(r.stderr).toContain(`maxmemory-policy ${p}`);
      expect(r.stderr).toContain('CONFIG SET maxmemory-policy noeviction');
      expect(r.stderr).toContain('?drops=accept');
      expect(r.stderr).not.toContain(redis.password);
      expect(r.stdout).not.toContain('"listening"');
    },
    40_000,
  );

  it('noeviction, or no maxmemory: nothing to refuse', async () => {
    await policy('noeviction');
    expect((await openSink(urlHere('ok1')).then((s) => s.close().then(() => s.stream.drops))).length).toBe(0);
    await policy('allkeys-lru', '0');
    expect((await openSink(urlHere('ok2')).then((s) => s.close().then(() => s.stream.drops))).length).toBe(0);
  });

  it('accepted with ?drops=accept: listen starts, says so, and says the evictions it then sees', async () => {
    await policy('allkeys-lru');
    const url = `${urlHere('accepted')}?drops=accept`;
    const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--sink', url], { S: TEST_SECRET, WXHOOKS_CONFIG_DIR: tempDir() });
    try {
      const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000);
      expect(proc.stderr()).toMatch(/warning: the sink redis:\/\/:\*\*\*@.* may drop what no worker has read \(accepted with \?drops=accept\): .*allkeys-lru/);
      // what fills the server: 3 MB of other keys, so that Redis evicts
      for (let i = 0; i < 60; i++) await admin.sendCommand(['SET', `filler:${i}`, 'x'.repeat(100_000)]);
      const { headers, body } = signed('trg_after_fill');
      expect((await post(ready.url, headers, body)).status).toBe(200);
      const said = await proc.waitFor<{ event?: string; reason?: string }>((v) => v.event === 'sink_dropped', 30_000);
      expect(said.reason).toMatch(/evicted \d+ keys?/);
    } finally {
      await proc.stop();
      await admin.sendCommand(['FLUSHALL']);
    }
  }, 60_000);

  it('volatile-lru, accepted: the evicted dedupe keys are said, and a pair is then in the stream twice (what the warning said)', async () => {
    await policy('volatile-lru');
    const url = `${urlHere('volatile')}?drops=accept`;
    const said: string[] = [];
    const sink = await openSink(url, { watchMs: 50, onDrops: (w) => said.push(w) });
    try {
      expect(sink.stream.drops.map((d) => d.what)).toEqual([expect.stringContaining("pairs' dedupe keys")]);
      const first = await sink.publish(delivery('trg_twice'));
      const dedupeKeys = async () => (await admin.sendCommand(['KEYS', `${sink.stream.name}:pair:*`])) as string[];
      expect(await dedupeKeys()).toHaveLength(1);
      // keys with a time to live, to fill the server: Redis evicts those, a sample at a time (the least recently
      // used of a few), until the dedupe key is among them (60 of them have not always been enough)
      for (let i = 0; i < 600 && (await dedupeKeys()).length > 0; i++) await admin.sendCommand(['SET', `ttl:${i}`, 'x'.repeat(100_000), 'EX', '3600']);
      expect(await dedupeKeys()).toEqual([]);
      await until(() => said.some((w) => /evicted \d+ key/.test(w)), 'the evictions to be said');
      const again = await sink.publish(delivery('trg_twice'));
      expect([first.duplicate, again.duplicate]).toEqual([false, false]);
      expect(again.id).not.toBe(first.id);
    } finally {
      await sink.close();
      await admin.sendCommand(['FLUSHALL']);
    }
  }, 40_000);

  it('noeviction with maxmemory reached: a publish is refused as full (503 for listen), and the broker is not said lost', async () => {
    await policy('noeviction');
    const url = urlHere('full');
    const states: string[] = [];
    const sink: Sink = await openSink(url, { onConnection: (s) => states.push(s) });
    try {
      let err: unknown;
      for (let i = 0; i < 200 && err === undefined; i++)
        err = await sink.publish(delivery(`trg_full_${i}`, { model: 'wm-6', grid: 'x'.repeat(100_000) })).then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(SinkUnavailableError);
      expect((err as Error).message).toMatch(/is full \(maxmemory\)/);
      expect(states).toEqual([]);
      expect(sink.connected).toBe(true);
    } finally {
      await sink.close();
      await admin.sendCommand(['FLUSHALL']);
    }
  }, 40_000);
});

describe('nats streams that drop (#41.3): real max_bytes and discard', () => {
  /** The broker's own client, to make a stream as a team would. */
  async function withJsm<T>(run: (jsm: import('@nats-io/jetstream').JetStreamManager) => Promise<T>): Promise<T> {
    const { connect } = await import('@nats-io/transport-node');
    const { jetstreamManager } = await import('@nats-io/jetstream');
    const nc = await connect({ servers: `127.0.0.1:${brokers.nats.port}`, user: 'wx', pass: brokers.nats.password });
    try {
      return await run(await jetstreamManager(nc));
    } finally {
      await nc.close();
    }
  }

  it('a stream wxhooks creates: discard new, keep as its age limit, nothing to refuse', async () => {
    const url = `${urlOf('nats')}?keep=2d`;
    const sink = await openSink(url);
    try {
      expect(sink.stream).toMatchObject({ created: true, keepMs: 2 * 86_400_000, drops: [] });
      const config = await withJsm((jsm) => jsm.streams.info(sink.stream.name).then((i) => i.config));
      expect(config).toMatchObject({ discard: 'new', max_age: 2 * 86_400_000 * 1_000_000, retention: 'limits' });
    } finally {
      await sink.close();
    }
  });

  it.each([
    ['max_bytes 1 MiB, discard old', { max_bytes: 1024 * 1024, discard: 'old' }, /max_bytes 1048576 with discard old/],
    ['max_msgs 1000, discard old', { max_msgs: 1000, discard: 'old' }, /max_msgs 1000 with discard old/],
    ['one message per subject', { max_msgs_per_subject: 1 }, /keeps 1 message per subject/],
    ['interest retention', { retention: 'interest' }, /interest retention/],
  ] as const)(
    'a stream of your own with %s: listen --sink is refused, exit 2, with what to change',
    async (_name, config, what) => {
      const url = urlOf('nats');
      const subject = new URL(url).pathname.slice(1);
      await withJsm((jsm) => jsm.streams.add({ name: subject.replace(/\./g, '_'), subjects: [subject], ...config } as Parameters<typeof jsm.streams.add>[0]));
      const r = await listenRefusing(url);
      expect(r.code, r.stderr).toBe(ExitCode.USAGE);
      expect(r.stderr).toMatch(what);
      expect(r.stderr).toContain('?drops=accept');
      expect(r.stdout).not.toContain('"listening"');
    },
    40_000,
  );

  it('accepted: the messages a group had not read that the stream drops are said, and with no group at all', async () => {
    const url = urlOf('nats');
    const subject = new URL(url).pathname.slice(1);
    const stream = subject.replace(/\./g, '_');
    await withJsm(async (jsm) => {
      await jsm.streams.add({ name: stream, subjects: [subject], max_bytes: 256 * 1024, discard: 'old' } as Parameters<typeof jsm.streams.add>[0]);
    });
    const said: string[] = [];
    const sink = await openSink(`${url}?drops=accept`, { watchMs: 50, onDrops: (w) => said.push(w) });
    try {
      expect(sink.stream.drops.map((d) => d.fix)).toEqual([expect.stringContaining(`nats stream edit ${stream} --discard new`)]);
      // published until the watch says what went (the stream holds ~100 of these): no group reads it yet
      const noGroup = (w: string) => /dropped \d+ messages? before any consumer group read them/.test(w);
      for (let i = 0; !said.some(noGroup); i++) {
        expect(i).toBeLessThan(5000);
        await sink.publish(delivery(`trg_nogroup_${i}`, { model: 'wm-6', grid: 'x'.repeat(2000) }));
      }
      // a group that reads nothing: what it has not read, dropped, is said
      await withJsm((jsm) => jsm.consumers.add(stream, { durable_name: 'slow', ack_policy: 'explicit', filter_subject: subject } as Parameters<typeof jsm.consumers.add>[1]));
      const slow = (w: string) => /dropped \d+ messages? that group slow had not read \(its limits: max_bytes 262144\)/.test(w);
      for (let i = 0; !said.some(slow); i++) {
        expect(i).toBeLessThan(5000);
        await sink.publish(delivery(`trg_slow_${i}`, { model: 'wm-6', grid: 'x'.repeat(2000) }));
      }
    } finally {
      await sink.close();
    }
  }, 40_000);

  it('a stream of ours made full by its operator (max_bytes added): a publish is refused as full, not taken for lost', async () => {
    const url = urlOf('nats');
    const states: string[] = [];
    const sink = await openSink(url, { onConnection: (s) => states.push(s) });
    try {
      await withJsm(async (jsm) => {
        const info = await jsm.streams.info(sink.stream.name);
        await jsm.streams.update(sink.stream.name, { ...info.config, max_bytes: 64 * 1024 });
      });
      let err: unknown;
      for (let i = 0; i < 200 && err === undefined; i++)
        err = await sink.publish(delivery(`trg_nfull_${i}`, { model: 'wm-6', grid: 'x'.repeat(2000) })).then(
          () => undefined,
          (e: unknown) => e,
        );
      expect(err).toBeInstanceOf(SinkUnavailableError);
      expect((err as Error).message).toMatch(/is full \(maximum bytes exceeded\)/);
      expect(states).toEqual([]);
    } finally {
      await sink.close();
    }
  });
});
