import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { openSink, type Sink } from '../../src/sinks/index.js';
import type { SinkKind } from '../../src/sinks/sink-url.js';
import { sharedPostgresFor, type SharedPostgres } from '../helpers/services.js';
import { BROKERS, delivery, startWorker, until, type TestBroker, type Worker } from '../helpers/sinks.js';

// Workers of a consumer group in processes of their own (test/helpers/sink-worker.js, the built module),
// sharing the PostgreSQL store, against real brokers: the process is the point (several at once, SIGKILL).

/** The run's brokers, with stream names of this file's own, and a database of its own on the run's PostgreSQL. */
const brokers: Record<SinkKind, TestBroker> = { nats: BROKERS.nats.shared(), redis: BROKERS.redis.shared() };
let db: SharedPostgres;
let admin: pg.Client;
let streams = 0;
const urlOf = (kind: SinkKind) => BROKERS[kind].url(brokers[kind], `e${++streams}`);

sharedPostgresFor((made) => ({ db, admin } = made));

/** The `done` lines of the workers: how many times each key's handler resolved. */
function doneCounts(workers: Worker[]): Map<string, number> {
  const counts = new Map<string, number>();
  for (const w of workers) for (const l of w.lines) if (typeof l.done === 'string') counts.set(l.done, (counts.get(l.done) ?? 0) + 1);
  return counts;
}

/** Publishes the deliveries through every sink at once (as receivers given the same deliveries would), 64 at a time each. */
async function publishAll(sinks: Sink[], triggers: string[]): Promise<void> {
  await Promise.all(
    sinks.map(async (sink) => {
      let next = 0;
      await Promise.all(
        Array.from({ length: 64 }, async () => {
          while (next < triggers.length) await sink.publish(delivery(triggers[next++]!));
        }),
      );
    }),
  );
}

describe.each(['nats', 'redis'] as const)('%s', (kind) => {
  it('5,000 deliveries, three workers (processes): each delivery processed exactly once', async () => {
    const url = urlOf(kind);
    const schema = `sinks_${kind}_${process.pid}`;
    // one publisher (two publishers of the same deliveries are test/full/sinks.test.ts's): the load is the consumers'
    const sinks = [await openSink(url)];
    const workers: Worker[] = [];
    try {
      workers.push(...(await Promise.all([1, 2, 3].map(() => startWorker({ url, group: 'g', concurrency: 32, store: { url: db.url, schema, leaseMs: 60_000 } })))));
      // 5,000: 52 rounds of the 96 in flight at once (three workers, 32 each), every one claimed against the
      // others in the one store; 20,000 proved the same in four times the time
      const N = 5_000;
      const triggers = Array.from({ length: N }, (_, i) => `trg_big_${i}`);
      await publishAll(sinks, triggers);
      await until(() => doneCounts(workers).size === N, `all ${N} deliveries to be processed`, 120_000);
      await Promise.all(workers.map((w) => w.stop()));
      const counts = doneCounts(workers);
      expect(counts.size).toBe(N);
      expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
      // the three shared them
      for (const w of workers) expect(w.lines.filter((l) => 'done' in l).length).toBeGreaterThan(N / 20);
      // nothing failed (a store slow to answer on a busy machine is waited for, and may say so: store_failed)
      expect(workers.flatMap((w) => w.lines.filter((l) => ['handler_failed', 'handler_timed_out', 'dead_lettered'].includes(l.outcome as string)))).toEqual([]);
      const { rows } = await admin.query(`SELECT count(*)::int AS n FROM "${schema}".pairs WHERE state = 'done'`);
      expect(rows[0].n).toBe(N);
    } finally {
      await Promise.all(workers.map((w) => w.stop('SIGKILL')));
      await Promise.all(sinks.map((s) => s.close()));
    }
  }, 180_000);

  it('a worker killed with SIGKILL mid-handler: its message goes to another worker, and is processed once', async () => {
    const url = urlOf(kind);
    const schema = `sinks_kill_${kind}_${process.pid}`;
    const sink = await openSink(url);
    const workers: Worker[] = [];
    // one message at a time: the only handler the kill interrupts is the one that hangs (a handler that had
    // resolved, in a worker killed before its pair was stored, would rightly run again elsewhere)
    const options = { url, group: 'g', hang: '7/trg_killed', concurrency: 1, retryDelayMs: 200, claimTimeoutMs: 1500, store: { url: db.url, schema, leaseMs: 1500 } };
    try {
      workers.push(...(await Promise.all([startWorker(options), startWorker(options)])));
      const triggers = ['trg_killed', ...Array.from({ length: 40 }, (_, i) => `trg_k_${i}`)];
      await publishAll([sink], triggers);
      // whichever worker got it first is killed while its handler runs
      const holder = await Promise.race(
        workers.map(async (w) => {
          await w.waitFor((l) => l.started === '7/trg_killed');
          return w;
        }),
      );
      await holder.stop('SIGKILL');
      const survivor = workers.find((w) => w !== holder)!;
      await survivor.waitFor((l) => l.done === '7/trg_killed', 20_000);
      await until(() => doneCounts(workers).size === triggers.length, 'every delivery to be processed');
      const counts = doneCounts(workers);
      expect([...counts.values()].filter((n) => n !== 1)).toEqual([]);
      expect(holder.lines.some((l) => l.done === '7/trg_killed')).toBe(false);
      // the broker counted the killed worker's delivery
      expect(survivor.lines.find((l) => l.done === '7/trg_killed')?.deliveries).toBeGreaterThanOrEqual(2);
    } finally {
      await Promise.all(workers.map((w) => w.stop('SIGKILL')));
      await sink.close();
    }
  }, 60_000);
});
