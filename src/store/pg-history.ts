import type { PoolClient } from 'pg';
import { DELIVERED_OUTCOMES } from '../delivery/outcomes.js';
import type { StoreNotice } from '../delivery/store.js';
import type { HistoryLimits } from './history-limits.js';
import { PgConnection, type PgConnectionOptions } from './pg-connection.js';
import { connectionLost } from './pg-open.js';

/**
 * The delivery history in the shared PostgreSQL store: every request any `listen` answered, written with
 * its turn's others and trimmed to its limits, and the reads of it (the inspector's page, `deliveries`,
 * `runs`, `wxhooks mcp`). All of the history's SQL is here.
 */

export interface PgHistoryOptions extends PgConnectionOptions {
  /** The history's limits, when one is kept. */
  history?: HistoryLimits;
  /** Told of what the person running listen should know (requests the history could not keep; the pairs' notices). */
  onNotice?: (notice: StoreNotice) => void;
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

export abstract class PgHistoryStore<O extends PgHistoryOptions> extends PgConnection<O> {
  private pendingHistory: HistoryEntry[] = [];
  /** Body bytes of the history rows not yet written. */
  private historyBytes = 0;

  protected flushes(): Promise<void>[] {
    return [this.flushHistory()];
  }

  protected queued(): boolean {
    return this.pendingHistory.length > 0;
  }

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
  /** The history's writes, one after another (see flushHistory). */
  private historyWrites: Promise<void> = Promise.resolve();

  /**
   * Writes the rows queued so far once the batch before has been written: two batches written at once, on
   * two of the pool's connections, could take their ids out of order, and the history lists by id (one
   * instance's requests were seen out of the order it received them). A write never rejects.
   */
  private flushHistory(): Promise<void> {
    this.historyWrites = this.historyWrites.then(() => this.writeHistory());
    return this.historyWrites;
  }

  private async writeHistory(): Promise<void> {
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
      `SELECT count(*)::int AS n FROM ${this.s}.deliveries WHERE outcome IN (${DELIVERED}) AND ${VERIFIED} AND coalesce((record->>'test')::boolean, false)`,
      [],
    );
    const runs = await this.run<{ model: string; initialization_time: string; hours: number[]; init_event: boolean }>(
      `SELECT record->>'model' AS model, record->>'initialization_time' AS initialization_time,
              coalesce(array_agg(DISTINCT (record->>'forecast_hour')::int) FILTER (WHERE type = 'forecast_hour.available' AND jsonb_typeof(record->'forecast_hour') = 'number'), '{}') AS hours,
              bool_or(type = 'initialization_time.available') AS init_event
       FROM ${this.s}.deliveries
       WHERE outcome IN (${DELIVERED}) AND type IN ('forecast_hour.available', 'initialization_time.available')
         AND ${VERIFIED} AND record->>'model' <> '' AND record->>'initialization_time' <> '' AND NOT coalesce((record->>'test')::boolean, false)
       GROUP BY 1, 2`,
      [],
    );
    return { runs, tests: tests[0]?.n ?? 0 };
  }

  /**
   * When each forecast hour of the history's runs first arrived, and its notification's created_at (for its
   * delivery lag): the verified forecast_hour.available deliveries that carry one, test deliveries aside.
   */
  async historyArrivals(): Promise<{ model: string; initialization_time: string; forecast_hour: number; time: string; created_at: string }[]> {
    return this.run(
      `SELECT record->>'model' AS model, record->>'initialization_time' AS initialization_time, (record->>'forecast_hour')::int AS forecast_hour,
              min(record->>'time') AS time, min(record->>'created_at') AS created_at
       FROM ${this.s}.deliveries
       WHERE outcome IN (${DELIVERED}) AND type = 'forecast_hour.available' AND jsonb_typeof(record->'forecast_hour') = 'number' AND record ? 'created_at' AND record ? 'time'
         AND ${VERIFIED} AND record->>'model' <> '' AND record->>'initialization_time' <> '' AND NOT coalesce((record->>'test')::boolean, false)
       GROUP BY 1, 2, 3`,
      [],
    );
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
}

/**
 * Whether a history row verified: its record names the layout that matched. (From the record, not the
 * `verified` column, so that the commands that only read a history read one of schema version 2 too.)
 */
const VERIFIED = `(record ? 'layout')`;
/** The outcomes that count as delivered (the core's DELIVERED_OUTCOMES), as an SQL list: what a run is made of. */
const DELIVERED = DELIVERED_OUTCOMES.map((o) => `'${o.replaceAll("'", "''")}'`).join(', ');
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
