import type { Pool } from 'pg';
import * as DEFAULTS from '../delivery/defaults.js';
import { sweepEvery } from '../delivery/defaults.js';
import type { Claim, PairStore } from '../delivery/store.js';
import { StoredLater } from '../delivery/stored-later.js';
import { PgHistoryStore, type PgHistoryOptions } from './pg-history.js';
import { openPgStore } from './pg-open.js';
import { checkStoreVersion, migrateStore } from './pg-tables.js';

export { MIGRATIONS, SCHEMA_VERSION } from './pg-tables.js';
export type { HistoryEntry, HistoryRow } from './pg-history.js';

/**
 * Processed pairs, claims and the delivery history in PostgreSQL, shared by any number of `listen`
 * processes. The store is in four modules, each with its own SQL: the schema and its versions
 * (pg-tables.ts), the pool and the batching of statements (pg-open.ts, pg-connection.ts), the history
 * (pg-history.ts), and here the pairs and their claims.
 *
 * The rules: a delivery claims its pair in one statement (an INSERT ... ON CONFLICT on the pair's
 * unique key): won, already done, or held by a live claim (409); a claim whose lease ran out (its holder
 * died, or hung without extending it) is taken over. The holder extends its claim while its delivery is
 * handled (by its token: never another's). Success marks the pair done; a failure releases the claim.
 * Nothing is answered 2xx before the pair's state is committed. Claims, extensions, completions and
 * releases of one turn of the event loop go in one statement each, and each delivery's answer waits for
 * its own.
 */

export interface PgStoreOptions extends PgHistoryOptions {
  ttlMs: number;
  /** How long a claim holds unless extended, before another instance may take it over (its holder is taken to be dead). */
  leaseMs: number;
  /** How often completions that could not be committed are tried again (default 1 s; 0: only when `settle()` is called, as a test does). */
  settleMs?: number;
  /** For the commands that only read the history (`deliveries`, `runs`): nothing is created or migrated. */
  readOnly?: boolean;
}

interface Waiting<T> {
  trigger: string;
  subscription: string;
  resolve: (value: T) => void;
  reject: (err: Error) => void;
}

export class PgStore extends PgHistoryStore<PgStoreOptions> implements PairStore {
  readonly leaseMs: number;
  private claims: Waiting<Claim>[] = [];
  /** Claims made so far: a claim's token is the instance and this number. */
  private claimsMade = 0;
  private completes: Waiting<void>[] = [];
  private releases: (Waiting<void> & { token: string })[] = [];
  private extensions: (Waiting<boolean> & { token: string })[] = [];
  private peeks: Waiting<'done' | 'held' | 'free'>[] = [];
  /**
   * The claim this process holds on each pair: its token (extending and releasing act on our own claim
   * only), and how many of our deliveries hold it (one that took over our own lapsed claim adds one: the
   * claim is released when both have let it go, never under the one still handling it).
   */
  private readonly tokens = new Map<string, { token: string; holders: number }>();
  private readonly sweeper: NodeJS.Timeout;
  /** Pairs processed here whose completion could not be committed (the database was away): tried again every second until it is. */
  private readonly later: StoredLater;

  private constructor(pool: Pool, options: PgStoreOptions) {
    super(pool, options);
    this.leaseMs = options.leaseMs;
    this.later = new StoredLater({ store: (p) => this.commit(p.trigger, p.subscription), onNotice: options.onNotice, retryMs: options.settleMs ?? DEFAULTS.storeWatchMs });
    this.sweeper = setInterval(() => void this.expire().catch(() => undefined), sweepEvery(options.ttlMs)).unref();
    if (options.readOnly) clearInterval(this.sweeper);
  }

  /**
   * Connects, and creates or migrates the schema (under an advisory lock, so instances starting together
   * do it once). Unreachable, or credentials refused: exit 6 naming the host, never the password. A
   * schema of a newer version than this wxhooks knows: exit 2.
   */
  static async open(options: PgStoreOptions): Promise<PgStore> {
    return openPgStore(
      {
        url: options.url,
        schema: options.schema,
        schemaFlag: '--store-schema',
        hint: 'Check that the server runs and accepts connections from here, and the user name and password in --store (or WXHOOKS_STORE_URL).',
      },
      (pool) => new PgStore(pool, options),
      (store, client) => (options.readOnly ? checkStoreVersion(client, options.schema, store.s, store.where) : migrateStore(client, options.schema, store.s)),
    );
  }

  protected override flushes(): Promise<void>[] {
    return [this.flushClaims(), this.flushPeeks(), this.flushExtensions(), this.flushCompletes(), this.flushReleases(), ...super.flushes()];
  }

  protected override queued(): boolean {
    return this.claims.length > 0 || this.peeks.length > 0 || this.extensions.length > 0 || this.completes.length > 0 || this.releases.length > 0 || super.queued();
  }

  claim(trigger: string, subscription: string): Promise<Claim> {
    // processed here, its completion not yet committed: commit it now, and the retry is a duplicate
    if (this.later.has(trigger, subscription)) return this.later.storeNow(trigger, subscription);
    return new Promise((resolve, reject) => {
      this.claims.push({ trigger, subscription, resolve, reject });
      this.schedule();
    });
  }

  peek(trigger: string, subscription: string): Promise<'done' | 'held' | 'free'> {
    if (this.later.has(trigger, subscription)) return Promise.resolve('done'); // processed here, its completion not yet committed
    return new Promise((resolve, reject) => {
      this.peeks.push({ trigger, subscription, resolve, reject });
      this.schedule();
    });
  }

  /** One statement for the turn's looks: each pair done within the TTL, claimed under a live lease, or neither. */
  private async flushPeeks(): Promise<void> {
    const batch = this.peeks;
    this.peeks = [];
    if (!batch.length) return;
    try {
      const rows = await this.run<{ trigger_id: string; subscription_id: string; state: string }>(
        `SELECT p.trigger_id, p.subscription_id, p.state FROM ${this.s}.pairs p
         JOIN unnest($1::text[], $2::text[]) AS t(trigger_id, subscription_id) ON p.trigger_id = t.trigger_id AND p.subscription_id = t.subscription_id
         WHERE (p.state = 'done' AND p.done_at >= now() - $3 * interval '1 millisecond') OR (p.state = 'claimed' AND p.lease_until >= now())`,
        [batch.map((w) => w.trigger), batch.map((w) => w.subscription), this.options.ttlMs],
      );
      const found = new Map(rows.map((r) => [key(r.trigger_id, r.subscription_id), r.state === 'done' ? ('done' as const) : ('held' as const)]));
      for (const w of batch) w.resolve(found.get(key(w.trigger, w.subscription)) ?? 'free');
    } catch (err) {
      for (const w of batch) w.reject(err as Error);
    }
  }

  extend(trigger: string, subscription: string): Promise<boolean> {
    const held = this.tokens.get(key(trigger, subscription));
    if (!held) return Promise.resolve(false);
    return new Promise((resolve) => {
      this.extensions.push({ trigger, subscription, token: held.token, resolve, reject: () => resolve(false) });
      this.schedule();
    });
  }

  complete(trigger: string, subscription: string): Promise<void> {
    return this.commit(trigger, subscription).catch((err: unknown) => {
      // Not committed, but processed (forwarded): our claim stays in the database, so that no other
      // instance processes it while its lease lasts, and the completion is tried again until it is
      // committed (at once when the service's retry comes back here: claim() above).
      this.later.keep({ trigger, subscription, at: 0 });
      throw err;
    });
  }

  /** Marks the pair done, with the turn's others. */
  private commit(trigger: string, subscription: string): Promise<void> {
    return new Promise((resolve, reject) => {
      this.completes.push({ trigger, subscription, resolve, reject });
      this.schedule();
    });
  }

  release(trigger: string, subscription: string): Promise<void> {
    const k = key(trigger, subscription);
    const held = this.tokens.get(k);
    if (held && --held.holders > 0) return Promise.resolve(); // another of our deliveries took it over, and still holds it
    this.tokens.delete(k);
    return new Promise((resolve, reject) => {
      this.releases.push({ trigger, subscription, token: held?.token ?? '', resolve, reject });
      this.schedule();
    });
  }

  /** Which of these pairs are done (processed, within the TTL), as keys `subscription\0trigger`: for `reconcile`, which claims nothing. */
  async doneAmong(pairs: readonly { trigger: string; subscription: string }[]): Promise<Set<string>> {
    if (!pairs.length) return new Set();
    const rows = await this.run<{ trigger_id: string; subscription_id: string }>(
      `SELECT p.trigger_id, p.subscription_id FROM ${this.s}.pairs p
       JOIN unnest($1::text[], $2::text[]) AS t(trigger_id, subscription_id) ON p.trigger_id = t.trigger_id AND p.subscription_id = t.subscription_id
       WHERE p.state = 'done' AND p.done_at >= now() - $3 * interval '1 millisecond'`,
      [pairs.map((p) => p.trigger), pairs.map((p) => p.subscription), this.options.ttlMs],
    );
    return new Set(rows.map((r) => key(r.trigger_id, r.subscription_id)));
  }

  /** Tries again the completions that could not be committed (what its timer does every second). */
  settle(): Promise<void> {
    return this.later.retry();
  }

  /** One statement for the turn's claims (and a second for those not won): each wins, finds its pair done, or finds it held (a pair twice in one turn: the second is held). */
  private async flushClaims(): Promise<void> {
    const batch = this.claims;
    this.claims = [];
    if (!batch.length) return;
    const first = new Map<string, Waiting<Claim>>();
    const again: Waiting<Claim>[] = [];
    for (const w of batch) {
      const k = key(w.trigger, w.subscription);
      if (first.has(k)) again.push(w);
      else first.set(k, w);
    }
    const unique = [...first.values()].sort(inKeyOrder);
    const tokens = unique.map(() => `${this.instance}:${++this.claimsMade}`); // (random bytes each cost listen ~3% of its CPU)
    try {
      const won = await this.run<{ trigger_id: string; subscription_id: string }>(
        `INSERT INTO ${this.s}.pairs (trigger_id, subscription_id, state, claimed_by, lease_until)
         SELECT trigger_id, subscription_id, 'claimed', token, now() + $4 * interval '1 millisecond'
         FROM unnest($1::text[], $2::text[], $3::text[]) AS t(trigger_id, subscription_id, token)
         ON CONFLICT (subscription_id, trigger_id) DO UPDATE
           SET state = 'claimed', claimed_by = EXCLUDED.claimed_by, lease_until = EXCLUDED.lease_until, done_at = NULL
           WHERE (pairs.state = 'claimed' AND pairs.lease_until < now())
              OR (pairs.state = 'done' AND pairs.done_at < now() - $5 * interval '1 millisecond')
         RETURNING trigger_id, subscription_id`,
        [unique.map((w) => w.trigger), unique.map((w) => w.subscription), tokens, this.options.leaseMs, this.options.ttlMs],
      );
      const wonKeys = new Set(won.map((r) => key(r.trigger_id, r.subscription_id)));
      const lost: Waiting<Claim>[] = [];
      unique.forEach((w, i) => {
        const k = key(w.trigger, w.subscription);
        if (!wonKeys.has(k)) return lost.push(w);
        const held = this.tokens.get(k); // our own claim, whose lease ran out, taken over
        if (held) {
          held.token = tokens[i]!;
          held.holders++;
        } else this.tokens.set(k, { token: tokens[i]!, holders: 1 });
        w.resolve('won');
      });
      if (lost.length) {
        // found done, or held: which (a second statement, only for these; most deliveries are new)
        const rows = await this.run<{ trigger_id: string; subscription_id: string; state: string }>(
          `SELECT p.trigger_id, p.subscription_id, p.state FROM ${this.s}.pairs p
           JOIN unnest($1::text[], $2::text[]) AS t(trigger_id, subscription_id) ON p.trigger_id = t.trigger_id AND p.subscription_id = t.subscription_id`,
          [lost.map((w) => w.trigger), lost.map((w) => w.subscription)],
        );
        const done = new Set(rows.filter((r) => r.state === 'done').map((r) => key(r.trigger_id, r.subscription_id)));
        for (const w of lost) w.resolve(done.has(key(w.trigger, w.subscription)) ? 'done' : 'held'); // gone meanwhile (released): held, and the retry wins it
      }
      for (const w of again) w.resolve('held');
    } catch (err) {
      // a claim that was won is not handed out: its lease runs out (it may have been committed)
      for (const w of batch) w.reject(err as Error);
    }
  }

  /**
   * One statement for the turn's extensions: each renews our own claim (by its token) for another lease,
   * even one whose lease ran out if no other instance took it over meanwhile; false for one no longer
   * ours (taken over, released, done) or when the database is away.
   */
  private async flushExtensions(): Promise<void> {
    const batch = this.extensions;
    this.extensions = [];
    if (!batch.length) return;
    const pairs = [...new Map(batch.map((w) => [key(w.trigger, w.subscription), w])).values()].sort(inKeyOrder);
    try {
      const rows = await this.run<{ trigger_id: string; subscription_id: string }>(
        `UPDATE ${this.s}.pairs p SET lease_until = now() + $4 * interval '1 millisecond'
         FROM unnest($1::text[], $2::text[], $3::text[]) AS t(trigger_id, subscription_id, token)
         WHERE p.trigger_id = t.trigger_id AND p.subscription_id = t.subscription_id AND p.claimed_by = t.token AND p.state = 'claimed'
         RETURNING p.trigger_id, p.subscription_id`,
        [pairs.map((w) => w.trigger), pairs.map((w) => w.subscription), pairs.map((w) => w.token), this.options.leaseMs],
      );
      const renewed = new Set(rows.map((r) => key(r.trigger_id, r.subscription_id)));
      for (const w of batch) w.resolve(renewed.has(key(w.trigger, w.subscription)));
    } catch {
      for (const w of batch) w.resolve(false);
    }
  }

  /** One statement for the turn's completions: each pair done (committed: the statement is its own transaction) before its answer. */
  private async flushCompletes(): Promise<void> {
    const batch = this.completes;
    this.completes = [];
    if (!batch.length) return;
    // each pair once (one statement may not update a row twice: a retry and the background settling can
    // both ask for the same pair), in key order
    const pairs = [...new Map(batch.map((w) => [key(w.trigger, w.subscription), w])).values()].sort(inKeyOrder);
    try {
      // Our own claims; one that was taken over meanwhile (our lease ran out) is marked done all the same:
      // it was processed, and processing it again would be worse.
      await this.run(
        `INSERT INTO ${this.s}.pairs (trigger_id, subscription_id, state, done_at)
         SELECT trigger_id, subscription_id, 'done', now() FROM unnest($1::text[], $2::text[]) AS t(trigger_id, subscription_id)
         ON CONFLICT (subscription_id, trigger_id) DO UPDATE SET state = 'done', done_at = now(), claimed_by = NULL, lease_until = NULL`,
        [pairs.map((w) => w.trigger), pairs.map((w) => w.subscription)],
      );
      for (const w of batch) {
        this.tokens.delete(key(w.trigger, w.subscription));
        w.resolve();
      }
    } catch (err) {
      for (const w of batch) w.reject(err as Error);
    }
  }

  private async flushReleases(): Promise<void> {
    const batch = this.releases.sort(inKeyOrder);
    this.releases = [];
    if (!batch.length) return;
    try {
      await this.run(
        `DELETE FROM ${this.s}.pairs p USING unnest($1::text[], $2::text[], $3::text[]) AS t(trigger_id, subscription_id, token)
         WHERE p.trigger_id = t.trigger_id AND p.subscription_id = t.subscription_id AND p.claimed_by = t.token AND p.state = 'claimed'`,
        [batch.map((w) => w.trigger), batch.map((w) => w.subscription), batch.map((w) => w.token)],
      );
    } catch {
      // the database is away: these claims hold until their lease runs out, then a retry takes them over
    }
    for (const w of batch) w.resolve();
  }

  /** Deletes pairs past the TTL, in batches (never one long lock). */
  async expire(): Promise<void> {
    for (let i = 0; i < 100; i++) {
      const rows = await this.run<{ n: number }>(
        `WITH gone AS (
           DELETE FROM ${this.s}.pairs WHERE ctid IN (
             SELECT ctid FROM ${this.s}.pairs WHERE state = 'done' AND done_at < now() - $1 * interval '1 millisecond' LIMIT 5000)
           RETURNING 1)
         SELECT count(*)::int AS n FROM gone`,
        [this.options.ttlMs],
      );
      if ((rows[0]?.n ?? 0) < 5000) break;
    }
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.later.stop();
    if (this.later.size && !this.lost) void this.later.retry(); // one last try (if the database is away, their leases run out)
    await this.end();
  }
}

const key = (trigger: string, subscription: string) => `${subscription}\u0000${trigger}`;

/**
 * The order every instance writes a batch's rows in. Two batches that lock the same rows in different
 * orders deadlock (PostgreSQL then fails one of them): three instances sent the same deliveries did,
 * 8 times in 40,000 requests, before the batches were sorted.
 */
const inKeyOrder = (a: { trigger: string; subscription: string }, b: { trigger: string; subscription: string }) => {
  const x = key(a.trigger, a.subscription);
  const y = key(b.trigger, b.subscription);
  return x < y ? -1 : x > y ? 1 : 0;
};
