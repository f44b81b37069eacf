import { Agent } from 'node:http';
import { connect } from 'node:net';
import { createClient } from 'redis';
import { post, type PostResult } from '../helpers/http.js';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { readSink } from '../../src/sinks/index.js';
import type { SinkKind } from '../../src/sinks/sink-url.js';
import { spawnCli, tempDir } from '../helpers/cli.js';
import { startCli, type Running } from '../helpers/process.js';
import { signed, TEST_SECRET } from '../helpers/receiver.js';
import { BROKERS, type TestBroker } from '../helpers/sinks.js';

// `listen --sink` end to end: the built binary, spawned, publishing to a real nats-server (JetStream)
// and a real redis-server: the run's (test/full/global-setup.ts), or, for a test that stops or pauses
// one, a server of the test's own.

const brokers: Record<SinkKind, TestBroker> = { nats: BROKERS.nats.shared(), redis: BROKERS.redis.shared() };
let streams = 0;
const urlOf = (kind: SinkKind, broker: TestBroker = brokers[kind]) => BROKERS[kind].url(broker, `l${++streams}`);
const agent = new Agent({ keepAlive: true, maxSockets: 8 });

afterAll(() => {
  agent.destroy();
});

/** POSTs a signed delivery for `trigger` (signed now, as each of the service's attempts is). */
function deliver(url: string, trigger: string, data?: Record<string, unknown>): Promise<PostResult> {
  const { headers, body } = signed(trigger, data ? { data } : {});
  return post(url, headers, body, agent);
}

async function startListen(sinks: string[], dir = tempDir()): Promise<{ proc: Running; url: string }> {
  const proc = startCli(['listen', '--port', '0', '--json', '--secret-env', 'S', ...sinks.flatMap((s) => ['--sink', s])], { WXHOOKS_CONFIG_DIR: dir, S: TEST_SECRET });
  const ready = await proc.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening', 30_000);
  return { proc, url: ready.url };
}

type Line = { outcome?: string; trigger_id?: string; published?: { id: string; duplicate: boolean }[]; event?: string; sink?: string };

/** The triggers the stream holds, each as many times as it holds it. */
async function triggersIn(url: string): Promise<string[]> {
  return (await readSink(url)).deliveries.map((d) => d.trigger_id ?? '?');
}

describe.each(['nats', 'redis'] as const)('listen --sink %s', (kind) => {
  it('answered 2xx only once the broker has it; a duplicate is not published twice; two sinks each get it once', async () => {
    const url = urlOf(kind);
    const other = urlOf(kind);
    const { proc, url: at } = await startListen([url, other]);
    try {
      const sinkLines = proc.lines.map((l) => JSON.parse(l) as Line).filter((l) => l.event === 'sink');
      expect(sinkLines.map((l) => l.sink)).toHaveLength(2);
      const first = await deliver(at, 'trg_l1');
      expect(first.status).toBe(200);
      // the 200 came, so the stream has it: read at once, nothing waited for
      expect(await triggersIn(url)).toEqual(['trg_l1']);
      expect(await triggersIn(other)).toEqual(['trg_l1']);
      const accepted = await proc.waitFor<Line>((l) => l.outcome === 'accepted' && l.trigger_id === 'trg_l1');
      expect(accepted.published).toHaveLength(2);
      expect(accepted.published!.every((p) => !p.duplicate)).toBe(true);
      // the service's retry of a delivery answered 2xx: a duplicate, and not published again
      const again = await deliver(at, 'trg_l1');
      expect(again.status).toBe(200);
      expect(JSON.parse(again.body)).toEqual({ ok: true, duplicate: true });
      expect(await triggersIn(url)).toEqual(['trg_l1']);
      // nothing in the output shows the password
      expect(proc.lines.join('\n') + proc.stderr()).not.toContain(brokers[kind].password);
    } finally {
      expect(await proc.stop()).toBe(130);
    }
  }, 60_000);

  it('two receivers with stores of their own given the same delivery: the broker holds it once', async () => {
    const url = urlOf(kind);
    const [a, b] = await Promise.all([startListen([url]), startListen([url])]);
    try {
      const [ra, rb] = await Promise.all([deliver(a.url, 'trg_two'), deliver(b.url, 'trg_two')]);
      expect([ra.status, rb.status]).toEqual([200, 200]);
      expect(await triggersIn(url)).toEqual(['trg_two']);
      const lines = await Promise.all([a, b].map((r) => r.proc.waitFor<Line>((l) => l.outcome === 'accepted')));
      // one of them was told by the broker that it had the pair already
      expect(lines.flatMap((l) => l.published!.map((p) => p.duplicate)).sort()).toEqual([false, true]);
    } finally {
      await Promise.all([a.proc.stop(), b.proc.stop()]);
    }
  }, 60_000);

  it('the broker stopped: 503 with Retry-After, the claim let go, one line each way; the retry once it is back is published once', async () => {
    const broker = await BROKERS[kind].start(); // of its own: it is stopped
    const url = urlOf(kind, broker);
    const { proc, url: at } = await startListen([url]);
    try {
      expect((await deliver(at, 'trg_before')).status).toBe(200);
      await broker.stop();
      const away = await deliver(at, 'trg_away');
      expect(away.status).toBe(503);
      expect(away.headers['retry-after']).toBe('5');
      expect(JSON.parse(away.body)).toMatchObject({ reason: 'sink_unavailable' });
      const failed = await proc.waitFor<Line & { status: number }>((l) => l.trigger_id === 'trg_away');
      expect(failed).toMatchObject({ outcome: 'sink_failed', status: 503 });
      expect((failed as { message?: string }).message).toContain('not taken by redis://'.replace('redis', kind));
      expect(away.body).not.toContain(String(broker.port)); // the sender is not told where the broker is
      await proc.waitFor<Line>((l) => l.event === 'sink_lost');
      await broker.start();
      // the service retries at its pace: until the broker is back, each retry is 503 again (never 409: the claim was let go)
      const statuses: number[] = [];
      const deadline = Date.now() + 30_000;
      for (;;) {
        const r = await deliver(at, 'trg_away');
        statuses.push(r.status);
        if (r.status === 200 || Date.now() > deadline) break;
        await proc.waitFor<Line>((l) => l.event === 'sink_restored' || (l.trigger_id === 'trg_away' && l.outcome !== 'sink_failed'), 2_000).catch(() => undefined);
      }
      expect(statuses.at(-1)).toBe(200);
      expect(statuses.slice(0, -1).every((s) => s === 503)).toBe(true);
      await proc.waitFor<Line>((l) => l.event === 'sink_restored');
      await proc.waitFor<Line>((l) => l.trigger_id === 'trg_away' && l.outcome === 'accepted'); // reported once answered
      const all = proc.lines.map((l) => JSON.parse(l) as Line);
      expect(all.filter((l) => l.event === 'sink_lost')).toHaveLength(1);
      expect(all.filter((l) => l.trigger_id === 'trg_away' && l.outcome === 'accepted')).toHaveLength(1);
      expect((await triggersIn(url)).sort()).toEqual(['trg_away', 'trg_before']);
    } finally {
      await proc.stop();
      await broker.remove();
    }
  }, 90_000);
});

describe('listen --sink, a delivery the broker refuses for good', () => {
  it('nats, over max_payload: 502 sink_refused, no Retry-After, not marked processed', async () => {
    const url = urlOf('nats');
    const { proc, url: at } = await startListen([url]);
    try {
      const r = await deliver(at, 'trg_huge', { model: 'wm-6', grid: 'x'.repeat(1_100_000) });
      expect(r.status).toBe(502);
      expect(r.headers['retry-after']).toBeUndefined();
      expect(JSON.parse(r.body)).toMatchObject({ reason: 'sink_refused' });
      const line = await proc.waitFor<Line & { status: number; message: string }>((l) => l.trigger_id === 'trg_huge');
      expect(line).toMatchObject({ outcome: 'sink_failed', status: 502 });
      expect(line.message).toMatch(/refused for good by nats:\/\/.*max_payload.*Raise max_payload/);
      expect(await triggersIn(url)).toEqual([]);
    } finally {
      await proc.stop();
    }
  }, 40_000);
});

/** Resolves when `check` holds (asked every 25 ms); rejects after 15 s, saying what did not come. */
async function eventually(check: () => Promise<boolean>, what: string): Promise<void> {
  const deadline = Date.now() + 15_000;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

const refusesConnections = (port: string) =>
  new Promise<boolean>((resolve) => {
    const socket = connect(Number(port), '127.0.0.1');
    socket.once('connect', () => (socket.destroy(), resolve(false)));
    socket.once('error', () => resolve(true));
  });

describe('listen --sink, stopped with a delivery in flight', () => {
  it('redis: Ctrl-C while a publish waits for the broker: the delivery is answered 200 once the broker has it, then the sinks close and listen exits', async () => {
    const broker = await BROKERS.redis.start(); // of its own: its writes are paused
    const url = urlOf('redis', broker);
    const admin = createClient({ url: broker.url });
    await admin.connect();
    const { proc, url: at } = await startListen([url]);
    try {
      // the broker holds every write (the publish's script) until told: the publish is in flight, and seen to be
      await admin.sendCommand(['CLIENT', 'PAUSE', '20000', 'WRITE']);
      const answer = deliver(at, 'trg_inflight');
      await eventually(async () => /blocked_clients:[1-9]/.test(String(await admin.sendCommand(['INFO', 'clients']))), 'the publish to be held by the broker');
      proc.child.kill('SIGINT');
      await eventually(() => refusesConnections(new URL(at).port), 'listen to stop taking connections');
      await admin.sendCommand(['CLIENT', 'UNPAUSE']);
      const r = await answer;
      expect(r.status).toBe(200);
      expect(await proc.exited).toBe(130);
      expect(await triggersIn(url)).toEqual(['trg_inflight']);
      expect(
        proc.lines
          .map((l) => JSON.parse(l) as Line)
          .filter((l) => l.trigger_id === 'trg_inflight')
          .map((l) => l.outcome),
      ).toEqual(['accepted']);
    } finally {
      await admin.sendCommand(['CLIENT', 'UNPAUSE']).catch(() => undefined);
      await admin.quit();
      await proc.stop();
      await broker.remove();
    }
  }, 40_000);
});

describe('listen --sink, refused before the port opens', () => {
  it('a broker that cannot be reached: exit 6, naming the host, never the password; nothing listens', async () => {
    const port = await freePort();
    const r = await spawnCli(['listen', '--port', '0', '--json', '--secret-env', 'S', '--sink', `redis://:hunter2secret@127.0.0.1:${port}/s`], { env: { S: TEST_SECRET }, timeoutMs: 30_000 });
    expect(r.code).toBe(6);
    expect(r.stderr).toContain(`127.0.0.1:${port}`);
    expect(r.stdout + r.stderr).not.toContain('hunter2secret');
    expect(r.stdout).not.toContain('"listening"');
  }, 40_000);

  it('a sink URL that is not one: exit 2 with what is wrong', async () => {
    const r = await spawnCli(['listen', '--port', '0', '--secret-env', 'S', '--sink', 'ftp://host/x'], { env: { S: TEST_SECRET } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('--sink must be nats://, redis:// or rediss://');
  });

  it('a stream whose duplicate window is shorter than --dedupe-ttl: a warning at start', async () => {
    const url = `${urlOf('nats')}?dedupe=1m&keep=1h`;
    const { proc } = await startListen([url]);
    try {
      expect(proc.stderr()).toMatch(/warning: the sink .* drops a second copy of a pair for 1m only/);
    } finally {
      await proc.stop();
    }
  }, 40_000);
});
