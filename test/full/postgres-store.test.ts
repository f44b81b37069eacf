import pg from 'pg';
import { describe, expect, it } from 'vitest';
import { freePort, startPostgres, type Postgres } from '../../scripts/harness.js';
import { sharedPostgresFor, type SharedPostgres } from '../helpers/services.js';
import { ExitCode, UnreachableError, UsageError, type WxError } from '../../src/errors.js';
import { MIGRATIONS, PgStore, SCHEMA_VERSION, type PgStoreOptions } from '../../src/store/postgres.js';
import { HISTORY_DEFAULTS } from '../../src/store/history-limits.js';
import type { StoreNotice } from '../../src/delivery/store.js';

// The PostgreSQL store against a real server: a database of this file's own on the run's server, and, for
// the test that stops it, a server of the test's own (the machine's own binaries; .ci/run installs them
// when missing).

let server: SharedPostgres;
let admin: pg.Client;
let schemas = 0;

sharedPostgresFor((made) => ({ db: server, admin } = made));

/** A store in a schema of its own. */
async function open(extra: Partial<PgStoreOptions> = {}): Promise<PgStore> {
  return PgStore.open({ url: server.url, schema: `t${++schemas}_${process.pid}`, ttlMs: 3600_000, leaseMs: 60_000, ...extra });
}

const pairs = async (schema: string) => (await admin.query<{ trigger_id: string; state: string }>(`SELECT trigger_id, subscription_id, state FROM "${schema}".pairs ORDER BY trigger_id`)).rows;

describe('PgStore: claims', () => {
  it('won, then held while in progress, then done once completed; a released claim can be won again', async () => {
    const s = await open();
    try {
      expect(await s.claim('t1', 's1')).toBe('won');
      expect(await s.claim('t1', 's1')).toBe('held');
      expect(await s.claim('t1', 's2')).toBe('won'); // another subscription: another pair
      await s.complete('t1', 's1');
      expect(await s.claim('t1', 's1')).toBe('done');
      await s.release('t1', 's2');
      expect(await s.claim('t1', 's2')).toBe('won');
    } finally {
      await s.close();
    }
  });

  it('complete resolves only once the pair is committed: another connection sees it done', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      await s.claim('t1', 's1');
      expect(await pairs(schema)).toEqual([{ trigger_id: 't1', subscription_id: 's1', state: 'claimed' }]);
      await s.complete('t1', 's1');
      expect(await pairs(schema)).toEqual([{ trigger_id: 't1', subscription_id: 's1', state: 'done' }]);
    } finally {
      await s.close();
    }
  });

  it('two stores on one schema: one wins each pair, the other finds it held, then done', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const a = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const b = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      const triggers = Array.from({ length: 500 }, (_, i) => `trg_${i}`);
      const results = await Promise.all(triggers.flatMap((t) => [a.claim(t, 's'), b.claim(t, 's')]));
      for (let i = 0; i < triggers.length; i++) {
        expect([results[2 * i], results[2 * i + 1]].sort()).toEqual(['held', 'won']);
      }
      await Promise.all(triggers.map((t, i) => (results[2 * i] === 'won' ? a : b).complete(t, 's')));
      expect(new Set(await Promise.all(triggers.map((t) => a.claim(t, 's'))))).toEqual(new Set(['done']));
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('two stores batching the same pairs in opposite orders never deadlock (each batch is written in key order)', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const a = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const b = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      for (let round = 0; round < 20; round++) {
        const triggers = Array.from({ length: 100 }, (_, i) => `r${round}_${String(i).padStart(3, '0')}`);
        const [fromA, fromB] = await Promise.all([Promise.all(triggers.map((t) => a.claim(t, 's'))), Promise.all([...triggers].reverse().map((t) => b.claim(t, 's')))]);
        fromB.reverse();
        triggers.forEach((_, i) => expect([fromA[i], fromB[i]].sort()).toEqual(['held', 'won']));
        // and completed in opposite orders, while the other store claims them again
        await Promise.all([
          ...triggers.map((t, i) => (fromA[i] === 'won' ? a.complete(t, 's') : a.claim(t, 's'))),
          ...[...triggers].reverse().map((t, i) => (fromB[triggers.length - 1 - i] === 'won' ? b.complete(t, 's') : b.claim(t, 's'))),
        ]);
      }
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('the same pair twice in one batch: the first wins, the second is held', async () => {
    const s = await open();
    try {
      expect(await Promise.all([s.claim('t', 's'), s.claim('t', 's')])).toEqual(['won', 'held']);
    } finally {
      await s.close();
    }
  });

  it('a claim whose lease ran out (its holder died) is taken over; a live one is not', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const dead = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const alive = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      expect(await dead.claim('t', 's')).toBe('won');
      expect(await alive.claim('t', 's')).toBe('held');
      // its lease runs out, in the database (no test waits on the clock)
      await admin.query(`UPDATE "${schema}".pairs SET lease_until = now() - interval '1 second'`);
      expect(await alive.claim('t', 's')).toBe('won');
      // the first holder's release no longer touches the claim: it is not its own any more
      await dead.release('t', 's');
      expect(await pairs(schema)).toEqual([{ trigger_id: 't', subscription_id: 's', state: 'claimed' }]);
      await alive.complete('t', 's');
      expect(await dead.claim('t', 's')).toBe('done');
    } finally {
      await dead.close();
      await alive.close();
    }
  });

  it('a pair done longer ago than the TTL can be won again; expire() deletes such pairs in batches', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3_600_000, leaseMs: 60_000 });
    try {
      await Promise.all(Array.from({ length: 12_000 }, (_, i) => s.claim(`old_${i}`, 's')));
      await Promise.all(Array.from({ length: 12_000 }, (_, i) => s.complete(`old_${i}`, 's')));
      expect(await s.claim('old_1', 's')).toBe('done');
      // time passes, in the database: the pairs were done two hours ago (no test waits on the clock)
      await admin.query(`UPDATE "${schema}".pairs SET done_at = now() - interval '2 hours'`);
      expect(await s.claim('old_1', 's')).toBe('won');
      await s.complete('old_1', 's');
      await s.expire();
      // 11,999 past the TTL gone (more than one batch of 5,000), the one just done kept
      expect(await pairs(schema)).toEqual([{ trigger_id: 'old_1', subscription_id: 's', state: 'done' }]);
    } finally {
      await s.close();
    }
  });

  it('ids as awkward as they come are kept exactly', async () => {
    const s = await open();
    const awkward = ['', 'a"b', "it's", 'back\\slash', 'tab\there', 'é', '雪', '🌧', '</script>', ' '.repeat(3), 'x'.repeat(2000)];
    try {
      for (const id of awkward) expect(await s.claim(id, id)).toBe('won');
      await Promise.all(awkward.map((id) => s.complete(id, id)));
      for (const id of awkward) expect(await s.claim(id, id)).toBe('done');
      for (const id of awkward) expect(await s.claim(id, `${id}.`)).toBe('won');
    } finally {
      await s.close();
    }
  });
});

describe('PgStore: leases (#32.8)', () => {
  /** Moves a claim's lease in the database, whose now() is the leases' clock (no test waits on it). */
  const leaseEndsIn = (schema: string, trigger: string, interval: string) => admin.query(`UPDATE "${schema}".pairs SET lease_until = now() + $2::interval WHERE trigger_id = $1`, [trigger, interval]);
  const leaseLeft = async (schema: string, trigger: string) =>
    (await admin.query<{ s: number }>(`SELECT extract(epoch FROM lease_until - now())::float AS s FROM "${schema}".pairs WHERE trigger_id = $1`, [trigger])).rows[0]!.s;

  it('extend renews our claim for another lease: held, by us and by another instance, past the lease it was claimed with', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const a = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const b = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      expect(a.leaseMs).toBe(60_000);
      expect(await a.claim('t', 's')).toBe('won');
      await leaseEndsIn(schema, 't', '1 second'); // its lease nearly over: a slow handler
      expect(await a.extend('t', 's')).toBe(true);
      expect(await leaseLeft(schema, 't')).toBeGreaterThan(50);
      await leaseEndsIn(schema, 't', '-1 second'); // late to extend (its event loop was held), but no one took it
      expect(await a.extend('t', 's')).toBe(true);
      // a claim this instance holds with a live lease is held: the retry that comes here is not run beside it
      expect(await a.claim('t', 's')).toBe('held');
      expect(await b.claim('t', 's')).toBe('held');
      await a.complete('t', 's');
      expect(await b.claim('t', 's')).toBe('done');
      expect(await a.extend('t', 's')).toBe(false); // done: nothing to extend
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('a claim not extended is taken over once its lease has passed; extend of the claim taken over resolves false, and touches the new one not', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const hung = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const other = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      expect(await hung.claim('t', 's')).toBe('won');
      await leaseEndsIn(schema, 't', '-1 second');
      expect(await other.claim('t', 's')).toBe('won');
      await leaseEndsIn(schema, 't', '10 seconds');
      expect(await hung.extend('t', 's')).toBe(false);
      expect(await leaseLeft(schema, 't')).toBeLessThan(11);
      expect(await other.extend('t', 's')).toBe(true);
      expect(await leaseLeft(schema, 't')).toBeGreaterThan(50);
      await hung.release('t', 's');
      expect(await pairs(schema)).toEqual([{ trigger_id: 't', subscription_id: 's', state: 'claimed' }]);
    } finally {
      await hung.close();
      await other.close();
    }
  });

  it('our own lapsed claim taken over by our next delivery: the late one letting go does not free the pair under the other', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    const other = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      expect(await s.claim('t', 's')).toBe('won');
      await leaseEndsIn(schema, 't', '-1 second');
      expect(await s.claim('t', 's')).toBe('won');
      await s.release('t', 's'); // the first, late, fails and lets go
      expect(await other.claim('t', 's')).toBe('held');
      expect(await s.extend('t', 's')).toBe(true); // the second still holds it, and extends it
      await s.release('t', 's');
      expect(await other.claim('t', 's')).toBe('won');
    } finally {
      await s.close();
      await other.close();
    }
  });

  it("a turn's extensions go in one statement: 300 claims extended at once, each answered for itself", async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000 });
    try {
      const triggers = Array.from({ length: 300 }, (_, i) => `trg_${i}`);
      await Promise.all(triggers.map((t) => s.claim(t, 's')));
      await Promise.all(triggers.slice(0, 100).map((t) => s.release(t, 's')));
      const extended = await Promise.all([...triggers.map((t) => s.extend(t, 's')), s.extend('trg_0', 's')]);
      expect(extended).toEqual([...triggers.map((_, i) => i >= 100), false]);
    } finally {
      await s.close();
    }
  });
});

describe('PgStore: schema', () => {
  it('created on first use at the current version, by one of several instances starting at once', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const stores = await Promise.all(Array.from({ length: 4 }, () => PgStore.open({ url: server.url, schema, ttlMs: 1000, leaseMs: 1000 })));
    await Promise.all(stores.map((s) => s.close()));
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([{ version: SCHEMA_VERSION }]);
  });

  it('an older version is migrated, its pairs kept', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".schema_version (version integer NOT NULL)`);
    await admin.query(`INSERT INTO "${schema}".schema_version VALUES (1)`);
    await admin.query(MIGRATIONS[0]!.sql(`"${schema}"`));
    await admin.query(`INSERT INTO "${schema}".pairs (trigger_id, subscription_id, state, done_at) VALUES ('kept', 's', 'done', now())`);
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000, history: { ...HISTORY_DEFAULTS, rows: 10 } });
    try {
      expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([{ version: SCHEMA_VERSION }]);
      expect(await s.claim('kept', 's')).toBe('done');
      // the version 2 table is there and used (and version 3's column)
      s.record({ record: { outcome: 'accepted', layout: 'standard' }, verified: true, outcome: 'accepted', trigger: 'kept' });
      await s.close();
      expect((await admin.query(`SELECT count(*)::int AS n FROM "${schema}".deliveries`)).rows).toEqual([{ n: 1 }]);
    } finally {
      await s.close();
    }
  });

  it("one instance's history rows keep the order it recorded them in, however its batches are written (ids in order)", async () => {
    const schema = `t${++schemas}_${process.pid}`;
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000, history: { ...HISTORY_DEFAULTS, rows: 1000 } });
    const order: string[] = [];
    try {
      // each row in a turn of its own (a batch of its own), some with a body large enough to be written in a
      // statement of its own: batches written at once on two connections took their ids out of order
      for (let i = 0; i < 300; i++) {
        const trigger = `trg_order_${i}`;
        order.push(trigger);
        const body = Buffer.alloc(i % 7 === 0 ? 100 * 1024 : 200, 'x');
        s.record({ record: { outcome: 'accepted', layout: 'standard' }, verified: true, outcome: 'accepted', trigger, body, size: body.length });
        await new Promise((resolve) => setImmediate(resolve));
      }
    } finally {
      await s.close();
    }
    const rows = (await admin.query(`SELECT trigger_id FROM "${schema}".deliveries ORDER BY id`)).rows as { trigger_id: string }[];
    expect(rows.map((r) => r.trigger_id)).toEqual(order);
  });

  it('a newer version is refused (exit 2), and left as it was', async () => {
    const schema = `t${++schemas}_${process.pid}`;
    await admin.query(`CREATE SCHEMA "${schema}"`);
    await admin.query(`CREATE TABLE "${schema}".schema_version (version integer NOT NULL)`);
    await admin.query(`INSERT INTO "${schema}".schema_version VALUES (${SCHEMA_VERSION + 1})`);
    const err = await PgStore.open({ url: server.url, schema, ttlMs: 1000, leaseMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
    expect((err as WxError).exitCode).toBe(ExitCode.USAGE);
    expect((err as Error).message).toMatch(new RegExp(`version ${SCHEMA_VERSION + 1}, newer than this wxhooks knows \\(${SCHEMA_VERSION}\\)`));
    expect((await admin.query(`SELECT version FROM "${schema}".schema_version`)).rows).toEqual([{ version: SCHEMA_VERSION + 1 }]);
    expect((await admin.query(`SELECT to_regclass('"${schema}".pairs') AS t`)).rows).toEqual([{ t: null }]);
  });

  it('a schema name that is not a plain SQL name is refused (exit 2)', async () => {
    const err = await PgStore.open({ url: server.url, schema: 'x"; DROP TABLE y; --', ttlMs: 1000, leaseMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UsageError);
  });
});

describe('PgStore: faults', () => {
  it('credentials refused: exit 6, naming the host, never the password', async () => {
    const wrong = server.url.replace(server.password, 'not-the-password-42');
    const err = await PgStore.open({ url: wrong, schema: 'wxhooks', ttlMs: 1000, leaseMs: 1000 }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(UnreachableError);
    expect((err as WxError).exitCode).toBe(ExitCode.UNREACHABLE);
    expect((err as Error).message).toContain(`127.0.0.1:${server.port}`);
    expect((err as Error).message).toMatch(/password authentication failed/);
    expect(JSON.stringify({ m: (err as Error).message, h: (err as WxError).hint })).not.toContain('not-the-password-42');
  });

  it('nothing listening: exit 6, naming the host', async () => {
    const port = await freePort();
    const err = await PgStore.open({ url: `postgres://u:sekrit-pw@127.0.0.1:${port}/db`, schema: 'wxhooks', ttlMs: 1000, leaseMs: 1000 }).catch((e: unknown) => e);
    expect((err as WxError).exitCode).toBe(ExitCode.UNREACHABLE);
    expect((err as Error).message).toContain(`127.0.0.1:${port}`);
    expect((err as Error).message).not.toContain('sekrit-pw');
  });

  it('the database away: claims reject; a processed pair whose completion failed is kept claimed, and committed once it is back (at its retry, or in the background, said in one notice)', async () => {
    const server: Postgres = await startPostgres(); // of its own: it is stopped
    const schema = `t${++schemas}_${process.pid}`;
    const states: string[] = [];
    const notices: StoreNotice[] = [];
    const s = await PgStore.open({ url: server.url, schema, ttlMs: 3600_000, leaseMs: 60_000, settleMs: 0, onConnection: (state) => states.push(state), onNotice: (n) => notices.push(n) });
    try {
      expect(await s.claim('before', 's')).toBe('won');
      expect(await s.claim('quiet', 's')).toBe('won');
      await server.stop();
      await expect(s.complete('before', 's')).rejects.toThrow(/PostgreSQL store .* failed/);
      await expect(s.complete('quiet', 's')).rejects.toThrow(/PostgreSQL store .* failed/);
      await expect(s.claim('during', 's')).rejects.toThrow(/PostgreSQL store .* failed/);
      // its retry while the database is still away: 503, never processed again
      const retry = await s.claim('before', 's').catch((e: unknown) => e);
      expect(retry).toMatchObject({ processed: true, message: expect.stringMatching(/^Already processed, and its pair still cannot be stored/) });
      expect(states).toEqual(['lost']);
      await server.start();
      // the service's retry of the processed delivery, here: a duplicate, committed now (stored later)
      expect(await s.claim('before', 's')).toBe('stored_now');
      expect(states).toEqual(['lost', 'restored']);
      expect(await s.claim('during', 's')).toBe('won');
      // the other, whose retry has not come, is committed by the store itself (what its timer does every second), and said once
      await s.settle();
      expect(notices).toEqual([{ kind: 'stored_later', pairs: 1 }]);
      expect(await s.claim('quiet', 's')).toBe('done');
    } finally {
      await s.close();
    }
    const fresh = new pg.Client({ connectionString: server.url });
    await fresh.connect();
    try {
      expect((await fresh.query(`SELECT trigger_id, state FROM "${schema}".pairs ORDER BY trigger_id`)).rows).toEqual([
        { trigger_id: 'before', state: 'done' },
        { trigger_id: 'during', state: 'claimed' },
        { trigger_id: 'quiet', state: 'done' },
      ]);
    } finally {
      await fresh.end();
      await server.remove();
    }
  }, 60_000);
});
