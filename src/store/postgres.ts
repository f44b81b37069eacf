import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Pool, PoolClient } from 'pg';
import { NotFoundError, UsageError } from '../errors.js';
import { PairStoreError, type Claim, type PairStore, type StoreNotice } from '../delivery/store.js';
import { StoredLater } from '../delivery/stored-later.js';
import type { HistoryLimits } from './history-limits.js';
import { shownUrl } from './store-url.js';
import { checkOut, connectionLost, openPool, quotedSchema } from './pg-open.js';
import { migrateSchema, type Migration } from './pg-schema.js';

/**
 * Processed pairs, claims and the delivery history in PostgreSQL, shared by any number of `listen`
 * processes. All of the SQL is in this module, with the schema and its versions.
 *
 * The rules: a delivery claims its pair in one statement (an INSERT ... ON CONFLICT on the pair's
 * unique key): won, already done, or held by a live claim (409); a claim whose lease ran out (its holder
 * died, or hung without extending it) is taken over. The holder extends its claim while its delivery is
 * handled (by its token: never another's). Success marks the pair done; a failure releases the claim.
 * Nothing is answered 2xx before the pair's state is committed. Claims, extensions, completions and
 * releases of one turn of the event loop go in one statement each, and each delivery's answer waits for
 * its own.
 */

/** The schema's versions, in order: each step brings the previous version to the next. */
export const MIGRATIONS: Migration[] = [
  {
    version: 1,
    sql: (s) => `
      CREATE TABLE ${s}.pairs (
        trigger_id text NOT NULL,
        subscription_id text NOT NULL,
        state text NOT NULL CHECK (state IN ('claimed', 'done')),
        claimed_by text,
        lease_until timestamptz,
        done_at timestamptz,
        PRIMARY KEY (subscription_id, trigger_id)
      )`,
  },
  {
    version: 2,
    sql: (s) => `
      CREATE INDEX pairs_done_at ON ${s}.pairs (done_at) WHERE state = 'done';
      CREATE TABLE ${s}.deliveries (
        id bigserial PRIMARY KEY,
        received_at timestamptz NOT NULL DEFAULT now(),
        instance text NOT NULL,
        outcome text NOT NULL,
        type text,
        trigger_id text,
        subscription_id text,
        record jsonb NOT NULL,
        headers jsonb,
        body bytea,
        size integer
      );
      CREATE INDEX deliveries_trigger ON ${s}.deliveries (trigger_id)`,
  },
  {
    // verified requests and refused ones are kept apart (an anonymous sender must not push out what the
    // service sent), each trimmed by its own limits
    version: 3,
    sql: (s) => `
      ALTER TABLE ${s}.deliveries ADD COLUMN verified boolean;
      UPDATE ${s}.deliveries SET verified = (record ? 'layout');
      ALTER TABLE ${s}.deliveries ALTER COLUMN verified SET NOT NULL;
      CREATE INDEX deliveries_verified_id ON ${s}.deliveries (verified, id)`,
  },
];

export const SCHEMA_VERSION = MIGRATIONS.at(-1)!.version;

export interface PgStoreOptions {
  url: string;
  schema: string;
  ttlMs: number;
  /** How long a claim holds unless extended, before another instance may take it over (its holder is taken to be dead). */
  leaseMs: number;
  /** The history's limits, when one is kept. */
  history?: HistoryLimits;
  /** Told when the database goes away, and when it is back: one line each, not one per delivery. */
  onConnection?: (state: 'lost' | 'restored', reason?: string) => void;
  /** Told of pairs of processed deliveries whose completion could not be committed then, committed now. */
  onNotice?: (notice: StoreNotice) => void;
  /** How often completions that could not be committed are tried again (default 1 s; 0: only when `settle()` is called, as a test does). */
  settleMs?: number;
  /** For the commands that only read the history (`deliveries`, `runs`): nothing is created or migrated. */
  readOnly?: boolean;
}

/** One request for the shared history. */
export interface HistoryEntry {
  record: object;
  verified: boolean;
  outcome: string;
  type?: string;
  trigger?: string;
  subscription?: string;
  headers?: unknown;
  body?: Buffer;
  size?: number;
}

/**
 * The history rows waiting to be written, and being written, hold at most this many body bytes: past it,
 * a row's body is cut to its start (the history is for looking; the database may be slow or away).
 */
const HISTORY_PENDING_BYTES = 32 * 1024 * 1024;

/** The most body bytes one INSERT of the history's small rows carries (see insertHistory). */
const HISTORY_STATEMENT_BYTES = 4 * 1024 * 1024;
/** A body larger than this is written in a statement of its own, not in an array (see insertHistory). */
const HISTORY_ARRAY_BODY = 64 * 1024;

interface Waiting<T> {
  trigger: string;
  subscription: string;
  resolve: (value: T) => void;
  reject: (err: Error) => void;
}

export class PgStore implements PairStore {
  readonly where: string;
  readonly leaseMs: number;
  /** This process, in the claims it holds: host, pid and a random part. */
  readonly instance = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  private readonly s: string;
  private claims: Waiting<Claim>[] = [];
  /** Claims made so far: a claim's token is the instance and this number. */
  private claimsMade = 0;
  private completes: Waiting<void>[] = [];
  private releases: (Waiting<void> & { token: string })[] = [];
  private extensions: (Waiting<boolean> & { token: string })[] = [];
  private scheduled = false;
  /** The statements under way, for close() to wait for. */
  private readonly running = new Set<Promise<void>>();
  /**
   * The claim this process holds on each pair: its token (extending and releasing act on our own claim
   * only), and how many of our deliveries hold it (one that took over our own lapsed claim adds one: the
   * claim is released when both have let it go, never under the one still handling it).
   */
  private readonly tokens = new Map<string, { token: string; holders: number }>();
  private lost = false;
  /** Statements started so far, and how many had started when the database was last found lost or back. */
  private statements = 0;
  private changedAt = 0;
  private readonly sweeper: NodeJS.Timeout;
  /** Pairs processed here whose completion could not be committed (the database was away): tried again every second until it is. */
  private readonly later: StoredLater;
  private pendingHistory: HistoryEntry[] = [];
  /** Body bytes of the history rows not yet written. */
  private historyBytes = 0;

  private constructor(
    private readonly pool: Pool,
    private readonly options: PgStoreOptions,
  ) {
    this.where = shownUrl(options.url);
    this.leaseMs = options.leaseMs;
    this.s = quotedSchema(options.schema, '--store-schema');
    this.later = new StoredLater({ store: (p) => this.commit(p.trigger, p.subscription), onNotice: options.onNotice, retryMs: options.settleMs ?? 1000 });
    const every = Math.max(1000, Math.min(60_000, Math.floor(options.ttlMs / 4)));
    this.sweeper = setInterval(() => void this.expire().catch(() => undefined), every).unref();
    if (options.readOnly) clearInterval(this.sweeper);
  }

  /**
   * Connects, and creates or migrates the schema (under an advisory lock, so instances starting together
   * do it once). Unreachable, or credentials refused: exit 6 naming the host, never the password. A
   * schema of a newer version than this wxhooks knows: exit 2.
   */
  static async open(options: PgStoreOptions): Promise<PgStore> {
    const { pool, held } = await openPool({
      url: options.url,
      schema: options.schema,
      schemaFlag: '--store-schema',
      hint: 'Check that the server runs and accepts connections from here, and the user name and password in --store (or WXHOOKS_STORE_URL).',
    });
    const store = new PgStore(pool, options);
    try {
      await (options.readOnly ? store.checkVersion(held.client) : store.migrate(held.client));
    } catch (err) {
      held.release(err);
      await store.close();
      throw err;
    }
    held.release();
    return store;
  }

  private newer(version: number): UsageError {
    return new UsageError(`The store's schema "${this.options.schema}" is at version ${version}, newer than this wxhooks knows (${SCHEMA_VERSION}); it was left as it is.`, {
      hint: 'Use the newer wxhooks that wrote it, or give this one another --store-schema.',
    });
  }

  /** For reading only: the schema must be there, and not newer than this wxhooks knows. */
  private async checkVersion(client: PoolClient): Promise<void> {
    const { rows } = await client
      .query<{ version: number | null }>(`SELECT (SELECT version FROM ${this.s}.schema_version) AS version WHERE to_regclass($1) IS NOT NULL`, [`${this.s}.schema_version`])
      .catch(() => ({ rows: [] as { version: number | null }[] }));
    const version = rows[0]?.version;
    if (version === undefined || version === null || version < 2) {
      throw new NotFoundError(`The store at ${this.where} has no wxhooks history in schema "${this.options.schema}".`, {
        hint: 'Start `listen --store URL` with --history N (or --inspect) to keep one; --store-schema if it uses another schema.',
      });
    }
    if (version > SCHEMA_VERSION) throw this.newer(version);
  }

  private migrate(client: PoolClient): Promise<void> {
    return migrateSchema(client, this.options.schema, this.s, MIGRATIONS, (v) => this.newer(v));
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      for (const flush of [this.flushClaims(), this.flushExtensions(), this.flushCompletes(), this.flushReleases(), this.flushHistory()]) {
        this.running.add(flush);
        void flush.finally(() => this.running.delete(flush));
      }
    });
  }

  claim(trigger: string, subscription: string): Promise<Claim> {
    // processed here, its completion not yet committed: commit it now, and the retry is a duplicate
    if (this.later.has(trigger, subscription)) return this.later.storeNow(trigger, subscription);
    return new Promise((resolve, reject) => {
      this.claims.push({ trigger, subscription, resolve, reject });
      this.schedule();
    });
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

  /** Tries again the completions that could not be committed (what its timer does every second). */
  settle(): Promise<void> {
    return this.later.retry();
  }

  /** Runs a statement; notes the database lost or restored; a failure is a (never persistent) PairStoreError. */
  private async run<R extends object>(sql: string, values: unknown[]): Promise<R[]> {
    // A statement under way when the state changed says nothing of the new state (one sent on an old
    // connection fails after the database is back): only those started since count.
    const started = ++this.statements;
    try {
      let rows: R[];
      try {
        rows = (await this.pool.query<R>(sql, values)).rows;
      } catch (err) {
        // a connection the pool kept from before the database went away fails once: try once more on a new one
        if (!connectionLost(err)) throw err;
        rows = (await this.pool.query<R>(sql, values)).rows;
      }
      if (this.lost && started > this.changedAt) {
        this.lost = false;
        this.changedAt = this.statements;
        this.options.onConnection?.('restored');
      }
      return rows;
    } catch (err) {
      if (connectionLost(err) && !this.lost && started > this.changedAt) {
        this.lost = true;
        this.changedAt = this.statements;
        this.options.onConnection?.('lost', (err as Error).message);
      }
      throw new PairStoreError(`The PostgreSQL store at ${this.where} failed: ${(err as Error).message}.`, false, { cause: err });
    }
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

  // ---------------------------------------------------------------- history (what the inspector, `deliveries` and `runs` read)

  /**
   * Adds a request to the shared history (written with the turn's others; the answer does not wait for
   * it). Bodies waiting to be written hold at most HISTORY_PENDING_BYTES: past that, a body is cut to its
   * start, and a row that would not fit even so is not kept.
   */
  record(entry: HistoryEntry): void {
    const limits = this.options.history;
    if (!limits) return;
    let body = entry.body;
    if (body && this.historyBytes + body.length > HISTORY_PENDING_BYTES) body = body.subarray(0, limits.partBytes);
    if (body && this.historyBytes + body.length > HISTORY_PENDING_BYTES) return;
    if (body) body = Buffer.from(body); // its own bytes: the request's buffer may be a slab's, or larger
    this.historyBytes += body?.length ?? 0;
    this.pendingHistory.push(body === entry.body ? entry : { ...entry, body });
    this.schedule();
  }

  /**
   * Writes the turn's requests and trims the history to its limits in one transaction, so it is never
   * past them by more than one batch: the verified rows past `rows`, the refused past `refusedRows`, and
   * the bodies of the older verified rows cut to `partBytes` once all together pass `bytes`. Instances
   * take turns at it (an advisory lock), so two trims never wait on each other's rows.
   *
   * One row the database refuses fails the statement, and with it every row of the batch: an anonymous
   * request's 8 KB Trigger-Id (past what an index entry may hold) took the verified rows of its batch
   * with it: 8 of 50 were kept (#32.11). So what goes in is what PostgreSQL takes (`historyColumns`), and a batch
   * that fails all the same is written again row by row, so that only the row it cannot take is lost,
   * and said (a `history_dropped` notice).
   */
  private async flushHistory(): Promise<void> {
    const batch = this.pendingHistory;
    this.pendingHistory = [];
    const limits = this.options.history;
    if (!batch.length || !limits) return;
    const bytes = batch.reduce((n, b) => n + (b.body?.length ?? 0), 0);
    const rows = batch.map(historyColumns);
    try {
      try {
        await this.transaction(async (client) => {
          await this.insertHistory(client, rows);
          await this.trimHistory(client, batch, limits);
        });
      } catch (err) {
        if (connectionLost(err)) throw err;
        let lost = 0;
        let reason = '';
        await this.transaction(async (client) => {
          for (const row of rows) {
            await client.query('SAVEPOINT one_row');
            try {
              await this.insertHistory(client, [row]);
            } catch (e) {
              if (connectionLost(e)) throw e;
              await client.query('ROLLBACK TO SAVEPOINT one_row');
              lost++;
              reason ||= (e as Error).message.slice(0, 200);
            }
          }
          await this.trimHistory(client, batch, limits);
        });
        if (lost) this.options.onNotice?.({ kind: 'history_dropped', rows: lost, reason });
      }
    } catch {
      // the history is for looking at: losing a few rows while the database is away is not losing a delivery
    } finally {
      this.historyBytes -= bytes;
    }
  }

  /**
   * Inserts `rows`, in order: the small ones together, in statements of at most HISTORY_STATEMENT_BYTES
   * of bodies each; a large body in a statement of its own, as a parameter `pg` sends as it is. (In an
   * array, `pg` writes each bytea as hex text, twice its size, and the statement's buffer grows by doubling:
   * writing 31 pending bodies of 1 MiB took the peak RSS up 218 MiB in one statement, 88-108 MiB in
   * statements of 4 MiB, 62 MiB with each in its own; #32.6.)
   */
  private async insertHistory(client: PoolClient, rows: HistoryColumns[]): Promise<void> {
    const large = (r: HistoryColumns) => (r.body?.length ?? 0) > HISTORY_ARRAY_BODY;
    for (let from = 0; from < rows.length; ) {
      const first = rows[from]!;
      if (large(first)) {
        await client.query(
          `INSERT INTO ${this.s}.deliveries (instance, verified, outcome, type, trigger_id, subscription_id, record, headers, body, size)
           VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::jsonb, $9, $10)`,
          [this.instance, first.verified, first.outcome, first.type, first.trigger, first.subscription, first.record, first.headers, first.body, first.size],
        );
        from++;
        continue;
      }
      let to = from + 1;
      for (let bytes = first.body?.length ?? 0; to < rows.length && !large(rows[to]!) && bytes + (rows[to]!.body?.length ?? 0) <= HISTORY_STATEMENT_BYTES; to++) bytes += rows[to]!.body?.length ?? 0;
      await this.insertHistoryRows(client, rows.slice(from, to));
      from = to;
    }
  }

  private async insertHistoryRows(client: PoolClient, rows: HistoryColumns[]): Promise<void> {
    await client.query(
      `INSERT INTO ${this.s}.deliveries (instance, verified, outcome, type, trigger_id, subscription_id, record, headers, body, size)
       SELECT $1, * FROM unnest($2::boolean[], $3::text[], $4::text[], $5::text[], $6::text[], $7::jsonb[], $8::jsonb[], $9::bytea[], $10::int[])`,
      [
        this.instance,
        rows.map((r) => r.verified),
        rows.map((r) => r.outcome),
        rows.map((r) => r.type),
        rows.map((r) => r.trigger),
        rows.map((r) => r.subscription),
        rows.map((r) => r.record),
        rows.map((r) => r.headers),
        rows.map((r) => r.body),
        rows.map((r) => r.size),
      ],
    );
  }

  private async trimHistory(client: PoolClient, batch: HistoryEntry[], limits: HistoryLimits): Promise<void> {
    const s = this.s;
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`wxhooks:${this.options.schema}:history`]);
    for (const [verified, keep] of [
      [true, limits.rows],
      [false, limits.refusedRows],
    ] as const) {
      if (!batch.some((b) => b.verified === verified)) continue;
      await client.query(`DELETE FROM ${s}.deliveries WHERE verified = $1 AND id <= (SELECT id FROM ${s}.deliveries WHERE verified = $1 ORDER BY id DESC OFFSET $2 LIMIT 1)`, [verified, keep]);
    }
    if (batch.some((b) => b.verified && (b.body?.length ?? 0) > limits.partBytes)) {
      // the newest bodies whole, as many as fit; the older ones cut to their start
      await client.query(
        `UPDATE ${s}.deliveries SET body = substring(body FROM 1 FOR $1) WHERE id IN (
           SELECT id FROM (
             SELECT id, sum(octet_length(body)) OVER (ORDER BY id DESC) AS upto FROM ${s}.deliveries
             WHERE verified AND octet_length(body) > $1) AS newest
           WHERE upto > $2)`,
        [limits.partBytes, limits.bytes],
      );
    }
  }

  /** Runs `work` in a transaction on one connection of the pool (see checkOut: a restart under it is an error of `work`'s, never an exit). */
  private async transaction(work: (client: PoolClient) => Promise<void>): Promise<void> {
    const held = await checkOut(this.pool);
    const { client } = held;
    let failed: unknown;
    try {
      await client.query('BEGIN');
      await work(client);
      await client.query('COMMIT');
    } catch (err) {
      failed = err;
      if (!held.broken() && !connectionLost(err)) await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      held.release(failed);
    }
  }

  /** History rows after id `after`, oldest first (at most `limit`), without their headers and bodies unless `whole`. */
  async historySince(after: number, limit: number, whole = false): Promise<HistoryRow[]> {
    const columns = whole ? ROW_COLUMNS : `id::int, received_at, instance, record, NULL AS headers, NULL AS body, size, ${VERIFIED} AS verified`;
    return this.run<HistoryRow>(`SELECT ${columns} FROM ${this.s}.deliveries WHERE id > $1 ORDER BY id LIMIT $2`, [after, limit]);
  }

  /** History rows after id `after`, and those of the ids in `also` (passed over before), oldest first, without their headers and bodies. */
  async historyAfter(after: number, also: number[], limit: number): Promise<HistoryRow[]> {
    return this.run<HistoryRow>(
      `SELECT id::int, received_at, instance, record, NULL AS headers, NULL AS body, size, ${VERIFIED} AS verified FROM ${this.s}.deliveries
       WHERE id > $1 OR id = ANY($2::bigint[]) ORDER BY id LIMIT $3`,
      [after, also, limit],
    );
  }

  /**
   * The model runs in the history, computed by the database: for each model and initialisation time of
   * the verified forecast deliveries (test deliveries aside), the forecast hours that came and whether
   * the run's initialization_time.available did.
   */
  async historyRuns(): Promise<{ runs: { model: string; initialization_time: string; hours: number[]; init_event: boolean }[]; tests: number }> {
    const tests = await this.run<{ n: number }>(
      `SELECT count(*)::int AS n FROM ${this.s}.deliveries WHERE outcome IN ('accepted', 'duplicate') AND ${VERIFIED} AND coalesce((record->>'test')::boolean, false)`,
      [],
    );
    const runs = await this.run<{ model: string; initialization_time: string; hours: number[]; init_event: boolean }>(
      `SELECT record->>'model' AS model, record->>'initialization_time' AS initialization_time,
              coalesce(array_agg(DISTINCT (record->>'forecast_hour')::int) FILTER (WHERE type = 'forecast_hour.available' AND jsonb_typeof(record->'forecast_hour') = 'number'), '{}') AS hours,
              bool_or(type = 'initialization_time.available') AS init_event
       FROM ${this.s}.deliveries
       WHERE outcome IN ('accepted', 'duplicate') AND type IN ('forecast_hour.available', 'initialization_time.available')
         AND ${VERIFIED} AND record->>'model' <> '' AND record->>'initialization_time' <> '' AND NOT coalesce((record->>'test')::boolean, false)
       GROUP BY 1, 2`,
      [],
    );
    return { runs, tests: tests[0]?.n ?? 0 };
  }

  /** The ids of the history rows whose record or body holds `text` (any case), newest first. */
  async historySearch(text: string, limit: number): Promise<number[]> {
    const like = `%${likeText(pgText(text))}%`;
    const rows = await this.run<{ id: number }>(`SELECT id::int FROM ${this.s}.deliveries WHERE record::text ILIKE $1 OR encode(body, 'escape') ILIKE $1 ORDER BY id DESC LIMIT $2`, [like, limit]);
    return rows.map((r) => r.id);
  }

  /** The newest history id (0 if none). */
  async historyNewest(): Promise<number> {
    return (await this.run<{ id: number | null }>(`SELECT max(id)::int AS id FROM ${this.s}.deliveries`, []))[0]?.id ?? 0;
  }

  async historyOne(id: number): Promise<HistoryRow | undefined> {
    return (await this.run<HistoryRow>(`SELECT ${ROW_COLUMNS} FROM ${this.s}.deliveries WHERE id = $1`, [id]))[0];
  }

  /** The Trigger-Ids of verified rows that start with `prefix` (at most `limit`), and how many refused rows claimed one that does. */
  async historyTriggers(prefix: string, limit: number): Promise<{ triggers: string[]; claims: number }> {
    // found by the indexed column (a long id's start), and told apart by the whole id in the record
    const rows = await this.run<{ trigger_id: string; verified: boolean; n: number }>(
      `SELECT coalesce(record->>'trigger_id', trigger_id) AS trigger_id, ${VERIFIED} AS verified, count(*)::int AS n FROM ${this.s}.deliveries
       WHERE trigger_id LIKE $1 AND coalesce(record->>'trigger_id', trigger_id) LIKE $2 GROUP BY 1, 2 ORDER BY 1 LIMIT $3`,
      [`${likeText(historyTrigger(prefix))}%`, `${likeText(pgText(prefix))}%`, limit * 2],
    );
    return {
      triggers: rows
        .filter((r) => r.verified)
        .map((r) => r.trigger_id)
        .slice(0, limit),
      claims: rows.filter((r) => !r.verified).reduce((n, r) => n + r.n, 0),
    };
  }

  /** The verified attempts of a Trigger-Id (a refused request may claim any: it is no attempt of it), the latest hundred, oldest first. */
  async historyOfTrigger(trigger: string): Promise<HistoryRow[]> {
    const rows = await this.run<HistoryRow>(`SELECT ${ROW_COLUMNS} FROM ${this.s}.deliveries WHERE trigger_id = $1 AND record->>'trigger_id' = $2 AND ${VERIFIED} ORDER BY id DESC LIMIT 100`, [
      historyTrigger(trigger),
      pgText(trigger),
    ]);
    return rows.reverse();
  }

  async close(): Promise<void> {
    clearInterval(this.sweeper);
    this.later.stop();
    if (this.later.size && !this.lost) void this.later.retry(); // one last try (if the database is away, their leases run out)
    while (this.claims.length || this.extensions.length || this.completes.length || this.releases.length || this.pendingHistory.length || this.scheduled || this.running.size) {
      await Promise.all(this.running);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await this.pool.end().catch(() => undefined);
  }
}

/**
 * Whether a history row verified: its record names the layout that matched. (From the record, not the
 * `verified` column, so that the commands that only read a history read one of schema version 2 too.)
 */
const VERIFIED = `(record ? 'layout')`;
const ROW_COLUMNS = `id::int, received_at, instance, record, headers, body, size, ${VERIFIED} AS verified`;

export interface HistoryRow {
  id: number;
  verified: boolean;
  received_at: Date;
  instance: string;
  record: Record<string, unknown>;
  headers: Record<string, string> | null;
  body: Buffer | null;
  size: number | null;
}

/** A history row's columns, as PostgreSQL takes them. */
interface HistoryColumns {
  verified: boolean;
  outcome: string;
  type: string | null;
  trigger: string | null;
  subscription: string | null;
  record: string;
  headers: string | null;
  body: Buffer | null;
  size: number | null;
}

/**
 * The most characters of a Trigger-Id the history's indexed column holds: an index entry may not pass
 * 2,704 bytes (an 8 KB one failed its whole batch, #32.11), and a character is at most 4. A longer id is
 * found by its start, and told apart by the whole id in its record.
 */
const HISTORY_TRIGGER_KEPT = 200;

// eslint-disable-next-line no-control-regex
const NOT_PG_TEXT = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
/** JSON text that holds what PostgreSQL's jsonb refuses: an escaped NUL, or a lone surrogate (JSON.stringify escapes both). */
const NOT_PG_JSON = /\\u0000|\\ud[89a-f]/i;

/** Text as PostgreSQL takes it: a NUL (which text and jsonb refuse) or a lone surrogate (not UTF-8) becomes U+FFFD. */
const pgText = (text: string): string => text.replace(NOT_PG_TEXT, '\ufffd');

/** A value as jsonb takes it: every string in it as pgText (only when one needs it: the look costs a regex over the text). */
function pgJson(value: unknown): string {
  const text = JSON.stringify(value);
  return NOT_PG_JSON.test(text) ? JSON.stringify(value, (_, v: unknown) => (typeof v === 'string' ? pgText(v) : v)) : text;
}

/** A Trigger-Id as the history's indexed column holds it. */
const historyTrigger = (id: string): string => pgText(id.slice(0, HISTORY_TRIGGER_KEPT));

const optionalText = (text: string | undefined) => (text === undefined ? null : pgText(text));

function historyColumns(b: HistoryEntry): HistoryColumns {
  return {
    verified: b.verified,
    outcome: pgText(b.outcome),
    type: optionalText(b.type),
    trigger: b.trigger === undefined ? null : historyTrigger(b.trigger),
    subscription: optionalText(b.subscription),
    record: pgJson(b.record),
    headers: b.headers ? pgJson(b.headers) : null,
    body: b.body ?? null,
    size: b.size ?? null,
  };
}

/** Text for a LIKE pattern, matched as it is. */
const likeText = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

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
