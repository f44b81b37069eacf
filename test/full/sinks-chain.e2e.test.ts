import { cpSync } from 'node:fs';
import { Agent, createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { post, type PostResult } from '../helpers/http.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readSink } from '../../src/sinks/index.js';
import type { SinkKind } from '../../src/sinks/sink-url.js';
import { runCli, tempDir } from '../helpers/cli.js';
import { startCli, type Running } from '../helpers/process.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';
import { BROKERS, startWorker, until, type TestBroker, type Worker } from '../helpers/sinks.js';

// The whole chain of #37, each link a real process or server: the emulator (spawned) delivers to a
// proxy that sends each request to two `listen --sink` receivers at once (spawned, a store folder each);
// the stream holds each delivery once; three consumer workers (test/helpers/sink-worker.js, the built
// module) sharing a PostgreSQL store process each once. Then the broker's faults under load (restarted;
// down while the emulator retries), and forged requests, which never reach the stream.

/** The run's brokers and PostgreSQL (names and a database of this file's own); a test that stops or restarts a broker starts its own. */
const brokers: Record<SinkKind, TestBroker> = { nats: BROKERS.nats.shared(), redis: BROKERS.redis.shared() };
let db: SharedPostgres;
let streams = 0;
const urlOf = (kind: SinkKind, broker: TestBroker = brokers[kind]) => BROKERS[kind].url(broker, `chain${++streams}`);
const agent = new Agent({ keepAlive: true, maxSockets: 32 });

beforeAll(async () => {
  db = await sharedPostgres();
});
afterAll(async () => {
  agent.destroy();
  await db?.remove();
});

/** A POST on the test's keep-alive agent. */
const postOn = (url: string, headers: Record<string, string | string[] | undefined>, body: Buffer): Promise<PostResult> => post(url, headers, body, agent);

interface Proxy {
  url: string;
  /** Every answer a target gave, in the order they came. */
  answers: { target: string; status: number; retryAfter?: string }[];
  close(): Promise<void>;
}

/**
 * The webhook's URL: sends each request (its bytes and signature headers) to every target at once and
 * answers the sender with the first 2xx; with none, with the first target's answer.
 */
async function startProxy(targets: () => string[]): Promise<Proxy> {
  const answers: Proxy['answers'] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      const { host: _host, connection: _connection, ...headers } = req.headers;
      let answered = false;
      const answer = (a: PostResult) => {
        if (answered) return;
        answered = true;
        res.writeHead(a.status, { 'content-type': 'application/json', ...(a.headers['retry-after'] ? { 'retry-after': a.headers['retry-after'] } : {}) }).end(a.body);
      };
      const each = targets().map((target) =>
        postOn(target, headers, body).then(
          (a) => {
            answers.push({ target, status: a.status, retryAfter: a.headers['retry-after'] as string | undefined });
            if (a.status >= 200 && a.status < 300) answer(a);
            return a;
          },
          (err: Error) => ({ status: 502, headers: {}, body: JSON.stringify({ error: err.message }) }) as PostResult,
        ),
      );
      void Promise.all(each).then((all) => answer(all[0]!));
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    answers,
    close: () => new Promise<void>((r) => (server.closeAllConnections(), server.close(() => r()))),
  };
}

interface Emulator {
  proc: Running;
  env: Record<string, string>;
  dir: string;
  /** Publishes a forecast hour of the model run; resolves with its trigger. */
  publish(hour: number): Promise<string>;
}

async function startEmulator(retryDelays: string): Promise<Emulator> {
  const dir = tempDir();
  const proc = startCli(['emulator', '--port', '0', '--json', '--in-memory', '--retry-delays', retryDelays], { WXHOOKS_CONFIG_DIR: dir });
  const info = await proc.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string', 30_000);
  return {
    proc,
    dir,
    env: { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir },
    async publish(hour) {
      const res = await fetch(`${info.base_url}/emulator/v1/events`, {
        method: 'POST',
        headers: { authorization: `Bearer ${info.api_key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ type: 'forecast_hour.available', model: 'wm-chain', initialization_time: '2026-11-25T00:00:00Z', forecast_hour: hour }),
      });
      expect(res.status).toBe(202);
      return ((await res.json()) as { trigger_id: string }).trigger_id;
    },
  };
}

/** A webhook on the emulator that delivers to `url`, subscribed to the forecast hours; its id. */
/** A webhook of the emulator's that delivers to `url`: its id, and its secret (shown once), which the workers verify with. */
async function createWebhook(emu: Emulator, url: string): Promise<{ id: string; secret: string }> {
  const created = await runCli(['webhook', 'create', '--url', url, '--json', '--subscribe', 'forecast_hour.available'], { env: emu.env });
  expect(created.code).toBe(0);
  const { id, secret } = JSON.parse(created.stdout) as { id: string; secret: string };
  expect(secret).toMatch(/^whsec_/);
  return { id, secret };
}

async function startListen(args: string[], env: Record<string, string>): Promise<{ proc: Running; url: string }> {
  const proc = startCli(['listen', '--port', '0', '--json', ...args], env);
  const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000);
  return { proc, url: ready.url };
}

/** Publishes hours 0..n-1, `width` at a time; the triggers, in hour order. */
async function publishRun(emu: Emulator, n: number, width = 8): Promise<string[]> {
  const triggers: string[] = new Array(n);
  let next = 0;
  await Promise.all(
    Array.from({ length: width }, async () => {
      while (next < n) {
        const hour = next++;
        triggers[hour] = await emu.publish(hour);
      }
    }),
  );
  return triggers;
}

type Attempt = { event?: string; trigger_id?: string; attempt?: number; outcome?: string; status?: number };
const attempts = (emu: Emulator) => emu.proc.lines.map((l) => JSON.parse(l) as Attempt).filter((a) => a.event === 'attempt');
type Line = { outcome?: string; trigger_id?: string; published?: { duplicate: boolean }[]; event?: string };
const linesOf = (proc: Running) => proc.lines.map((l) => JSON.parse(l) as Line);

/** How many times the stream holds each trigger (all of it: `limit` past its length). */
async function streamCounts(url: string): Promise<Map<string, number>> {
  const view = await readSink(url, 100_000);
  expect(view.deliveries).toHaveLength(view.stream.messages);
  const counts = new Map<string, number>();
  for (const d of view.deliveries) counts.set(d.trigger_id ?? '?', (counts.get(d.trigger_id ?? '?') ?? 0) + 1);
  return counts;
}

/** Every one of `triggers` is in `seen` (a set made once per look: the lines it is made from are read once, not once per trigger). */
const isSubset = (triggers: string[], seen: Set<string | undefined>) => triggers.every((t) => seen.has(t));

function doneCounts(workers: Worker[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const w of workers) for (const l of w.lines) if (typeof l.done === 'string') counts.set(l.done, (counts.get(l.done) ?? 0) + 1);
  return counts;
}

describe.each(['nats', 'redis'] as const)('%s', (kind) => {
  it('emulator → a proxy → two listen --sink at once → the stream holds each delivery once → three workers process each once', async () => {
    const N = 300;
    const url = urlOf(kind);
    const schema = `chain_${kind}_${process.pid}`;
    let listens: { proc: Running; url: string }[] = [];
    const proxy = await startProxy(() => listens.map((l) => l.url));
    const emu = await startEmulator('200ms,500ms,1s');
    const workers: Worker[] = [];
    try {
      const { id: webhook, secret } = await createWebhook(emu, proxy.url);
      // two receivers, each with a store folder of its own (a copy holding the webhook's stored secret)
      listens = await Promise.all(
        [1, 2].map(() => {
          const dir = tempDir();
          cpSync(emu.dir, dir, { recursive: true });
          return startListen(['--webhook', webhook, '--sink', url], { ...emu.env, WXHOOKS_CONFIG_DIR: dir });
        }),
      );
      workers.push(...(await Promise.all([1, 2, 3].map(() => startWorker({ url, group: 'chain', secret, concurrency: 16, store: { url: db.url, schema, leaseMs: 60_000 } })))));

      const triggers = await publishRun(emu, N);
      expect(new Set(triggers).size).toBe(N);
      const delivered = () =>
        new Set(
          attempts(emu)
            .filter((a) => a.outcome === 'delivered')
            .map((a) => a.trigger_id),
        );
      await until(() => isSubset(triggers, delivered()), `the emulator to deliver all ${N}`, 120_000);
      // both receivers got each delivery; each answered it 2xx (one published it, the broker told the other it
      // had it) or, on a machine so loaded that the broker's answer took past the publish timeout, 503 (not
      // acknowledged: the proxy had the other's 2xx for the service). At most one publish of each was new.
      const answered = (l: Running) =>
        new Set(
          linesOf(l)
            .filter((x) => x.outcome === 'accepted' || x.outcome === 'sink_failed')
            .map((x) => x.trigger_id),
        );
      await until(() => listens.every((l) => isSubset(triggers, answered(l.proc))), 'both receivers to answer all', 60_000);
      const publishedBy = new Map<string, boolean[]>();
      for (const l of listens)
        for (const x of linesOf(l.proc)) if (x.outcome === 'accepted') publishedBy.set(x.trigger_id!, [...(publishedBy.get(x.trigger_id!) ?? []), ...x.published!.map((p) => !p.duplicate)]);
      expect(publishedBy.size).toBe(N);
      expect([...publishedBy.entries()].filter(([, fresh]) => fresh.filter(Boolean).length > 1)).toEqual([]);

      const inStream = await streamCounts(url);
      expect([...inStream.keys()].sort()).toEqual([...triggers].sort());
      expect([...inStream.values()].filter((n) => n !== 1)).toEqual([]);

      await until(() => doneCounts(workers).size === N, `the workers to process all ${N}`, 120_000);
      await Promise.all(workers.map((w) => w.stop()));
      const done = doneCounts(workers);
      expect(done.size).toBe(N);
      expect([...done.values()].filter((n) => n !== 1)).toEqual([]);
      expect([...done.keys()].map((k) => decodeURIComponent(k.split('/')[1]!)).sort()).toEqual([...triggers].sort());
      expect(workers.flatMap((w) => w.lines.filter((l) => ['handler_failed', 'handler_timed_out', 'dead_lettered'].includes(l.outcome as string)))).toEqual([]);
      // the emulator never had to retry: each first attempt was answered 2xx (by one receiver at least)
      expect(attempts(emu).filter((a) => a.outcome !== 'delivered')).toEqual([]);
    } finally {
      await Promise.all(workers.map((w) => w.stop('SIGKILL')));
      await Promise.all(listens.map((l) => l.proc.stop()));
      await emu.proc.stop();
      await proxy.close();
    }
  }, 300_000);

  it('the broker restarted mid-load: every delivery answered 2xx is in the stream; one answered 503, sent again, is accepted once', async () => {
    const broker = await BROKERS[kind].start(); // of its own: it is restarted
    const url = urlOf(kind, broker);
    const { proc, url: at } = await startListen(['--secret-env', 'S', '--sink', url], { WXHOOKS_CONFIG_DIR: tempDir(), S: TEST_SECRET });
    const statuses = new Map<string, number>();
    let stop = false;
    let sent = 0;
    let brokerDown = false;
    const ok = () => [...statuses.values()].filter((s) => s === 200).length;
    const senders = Array.from({ length: 8 }, async () => {
      while (!stop) {
        const trigger = `trg_restart_${kind}_${sent++}`;
        const { headers, body } = signed(trigger);
        statuses.set(trigger, (await postOn(at, headers, body)).status);
      }
    });
    try {
      await until(() => ok() >= 100, '100 deliveries before the restart', 60_000);
      brokerDown = true;
      await broker.restart();
      brokerDown = false;
      const atRestart = ok();
      await proc.waitFor<Line>((l) => l.event === 'sink_restored', 60_000).catch(() => undefined);
      await until(() => ok() >= atRestart + 100, '100 deliveries after the restart', 60_000);
      stop = true;
      await Promise.all(senders);

      expect([...statuses.values()].filter((s) => s !== 200 && s !== 503)).toEqual([]);
      const accepted = [...statuses].filter(([, s]) => s === 200).map(([t]) => t);
      const refused = [...statuses].filter(([, s]) => s === 503).map(([t]) => t);
      let inStream = await streamCounts(url);
      // nothing acknowledged is lost, nor held twice
      expect(accepted.filter((t) => inStream.get(t) !== 1)).toEqual([]);
      // with 8 senders always in flight, some came while the broker was away (seen each run: tens to hundreds)
      expect(refused.length).toBeGreaterThan(0);
      // the service's retries of the 503s, now the broker is back: each accepted, and held once
      for (const t of refused) {
        const { headers, body } = signed(t);
        expect((await postOn(at, headers, body)).status).toBe(200);
      }
      inStream = await streamCounts(url);
      expect(inStream.size).toBe(statuses.size);
      expect([...statuses.keys()].filter((t) => inStream.get(t) !== 1)).toEqual([]);
    } finally {
      stop = true;
      await Promise.allSettled(senders);
      if (brokerDown) await broker.start().catch(() => undefined);
      await proc.stop();
      await broker.remove();
    }
  }, 180_000);

  it('the broker down while the emulator delivers: 503 with Retry-After; once it is back, the retries land and each delivery is in the stream once', async () => {
    const K = 20;
    const broker = await BROKERS[kind].start(); // of its own: it is stopped
    const url = urlOf(kind, broker);
    let listen: { proc: Running; url: string } | undefined;
    const proxy = await startProxy(() => [listen!.url]); // one target: it records each answer's Retry-After
    const emu = await startEmulator('1s,5s,15s');
    let brokerDown = false;
    try {
      const { id: webhook } = await createWebhook(emu, proxy.url);
      listen = await startListen(['--webhook', webhook, '--sink', url], emu.env);
      expect(await emu.publish(1000)).toBeTruthy(); // the stream exists, and the chain works, before the broker goes
      await until(() => attempts(emu).some((a) => a.outcome === 'delivered'), 'the first delivery', 30_000);

      brokerDown = true;
      await broker.stop();
      const triggers = await publishRun(emu, K);
      const firstRefused = () =>
        new Set(
          attempts(emu)
            .filter((a) => a.attempt === 1 && a.status === 503)
            .map((a) => a.trigger_id),
        );
      await until(() => isSubset(triggers, firstRefused()), `the ${K} first attempts to be answered 503`, 60_000);
      await listen.proc.waitFor<Line>((l) => l.event === 'sink_lost', 30_000);
      await broker.start();
      brokerDown = false;

      const delivered = () => attempts(emu).filter((a) => a.outcome === 'delivered' && triggers.includes(a.trigger_id!));
      await until(() => new Set(delivered().map((a) => a.trigger_id)).size === K, `the emulator's retries of all ${K} to land`, 90_000);
      expect(delivered()).toHaveLength(K);
      expect(delivered().every((a) => a.attempt! > 1)).toBe(true);
      const refused = proxy.answers.filter((a) => a.status !== 200);
      expect(refused.length).toBeGreaterThanOrEqual(K);
      expect(refused.filter((a) => a.status !== 503 || a.retryAfter !== '5')).toEqual([]);

      const inStream = await streamCounts(url);
      expect(inStream.size).toBe(K + 1);
      expect(triggers.filter((t) => inStream.get(t) !== 1)).toEqual([]);
      expect(linesOf(listen.proc).filter((l) => l.event === 'sink_lost')).toHaveLength(1);
    } finally {
      if (brokerDown) await broker.start().catch(() => undefined);
      await listen?.proc.stop();
      await emu.proc.stop();
      await proxy.close();
      await broker.remove();
    }
  }, 180_000);

  it('hostile: an unsigned, a wrongly signed, a tampered and a stale request never reach the stream', async () => {
    const url = urlOf(kind);
    const { proc, url: at } = await startListen(['--secret-env', 'S', '--sink', url], { WXHOOKS_CONFIG_DIR: tempDir(), S: TEST_SECRET });
    try {
      const good = signed('trg_real');
      expect((await postOn(at, good.headers, good.body)).status).toBe(200);
      const listed = async () => {
        const r = await runCli(['deliveries', 'list', '--sink', url, '--json']);
        expect(r.code).toBe(0);
        return JSON.parse(r.stdout) as { stream: { messages: number }; deliveries: { trigger_id?: string }[] };
      };
      const before = await listed();
      expect(before.stream.messages).toBe(1);

      const unsigned = signed('trg_unsigned');
      const wrong = signed('trg_wrong_secret', { secret: `whsec_${Buffer.alloc(32, 1).toString('base64')}` });
      const tampered = signed('trg_tampered');
      const stale = signed('trg_stale', { timestamp: Math.floor(Date.now() / 1000) - 3600 });
      const forged: [string, Record<string, string>, Buffer][] = [
        ['unsigned', { 'content-type': 'application/json' }, unsigned.body],
        ['wrong secret', wrong.headers, wrong.body],
        ['tampered body', tampered.headers, Buffer.from(tampered.body.toString().replace('"forecast_hour":0', '"forecast_hour":6'))],
        ['stale timestamp', stale.headers, stale.body],
      ];
      for (const [name, headers, body] of forged) {
        const r = await postOn(at, headers, body);
        expect(r.status, name).toBeGreaterThanOrEqual(400);
        expect(r.status, name).toBeLessThan(500);
      }
      const after = await listed();
      expect(after.stream.messages).toBe(1);
      expect(after.deliveries.map((d) => d.trigger_id)).toEqual(['trg_real']);
      // listen's lines are written in batches: wait for the accepted one, then look at them all
      await proc.waitFor<{ outcome?: string; trigger_id?: string }>((l) => l.outcome === 'accepted' && l.trigger_id === 'trg_real');
      expect(
        linesOf(proc)
          .filter((l) => l.outcome === 'accepted')
          .map((l) => l.trigger_id),
      ).toEqual(['trg_real']);
    } finally {
      await proc.stop();
    }
  }, 60_000);
});
