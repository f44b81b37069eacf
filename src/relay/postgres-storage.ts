import type { Pool, PoolClient } from 'pg';
import * as DEFAULTS from '../delivery/defaults.js';
import { StorageError, UsageError } from '../errors.js';
import { openPgStore, quotedSchema } from '../store/pg-open.js';
import { shownUrl } from '../store/store-url.js';
import type { ChannelRecord, ChannelUsage, Refusal, RelayStorage, Removed, StoredDelivery } from './storage.js';
import { migrateSchema, type Migration } from '../store/pg-schema.js';

/**
 * The relay's storage in PostgreSQL (`relay serve --store postgres://…`), in a schema of its own
 * (`wxhooks_relay` unless told). All of the relay's SQL is in this module, with the schema and its
 * versions. Times are the relay's clock (ms since the epoch), not the database's, so that the age of a
 * delivery is what the relay decides. Every write is one statement, committed before it resolves.
 */

/** The schema's versions, in order: each step brings the previous version to the next. */
export const RELAY_MIGRATIONS: Migration[] = [
  {
    version: 1,
    sql: (s) => `
      CREATE TABLE ${s}.channels (
        name text PRIMARY KEY,
        secrets jsonb NOT NULL,
        temporary boolean NOT NULL,
        created_at bigint NOT NULL,
        last_seen_at bigint NOT NULL,
        next_seq bigint NOT NULL
      );
      CREATE TABLE ${s}.deliveries (
        channel text NOT NULL REFERENCES ${s}.channels (name) ON DELETE CASCADE,
        seq bigint NOT NULL,
        received_at bigint NOT NULL,
        headers jsonb NOT NULL,
        body bytea NOT NULL,
        size integer NOT NULL,
        PRIMARY KEY (channel, seq)
      );
      CREATE INDEX deliveries_received_at ON ${s}.deliveries (received_at)`,
  },
  {
    // what listen verifies with, the secrets replaced lately, and the deliveries listen refused (kept apart)
    version: 2,
    sql: (s) => `
      ALTER TABLE ${s}.channels ADD COLUMN tolerance integer, ADD COLUMN scheme text, ADD COLUMN retired jsonb NOT NULL DEFAULT '[]';
      ALTER TABLE ${s}.deliveries ADD COLUMN refused jsonb`,
  },
];

export const RELAY_SCHEMA_VERSION: number = RELAY_MIGRATIONS.at(-1)!.version;

export interface PgRelayStorageOptions {
  url: string;
  schema?: string;
}

interface DeliveryRow {
  seq: string;
  received_at: string;
  headers: [string, string][];
  body: Buffer;
  size: number;
}

export class PgRelayStorage implements RelayStorage {
  readonly where: string;
  private readonly s: string;

  private constructor(
    private readonly pool: Pool,
    private readonly schema: string,
    url: string,
  ) {
    this.where = shownUrl(url);
    this.s = quotedSchema(schema, '--schema');
  }

  /**
   * Connects through the stores' one opening (src/store/pg-open.ts: the schema's name checked, the password
   * kept out of every message, a first connection that proves the server), and creates or migrates the
   * schema (under an advisory lock). Unreachable: exit 6, naming the host and never the password.
   */
  static async open(options: PgRelayStorageOptions): Promise<PgRelayStorage> {
    const schema = options.schema ?? DEFAULTS.relaySchema;
    return openPgStore(
      { url: options.url, schema, schemaFlag: '--schema', hint: 'Check that the server runs and accepts connections from here, and the user name and password in --store.' },
      (pool) => new PgRelayStorage(pool, schema, options.url),
      (store, client) => store.migrate(client),
    );
  }

  private migrate(client: PoolClient): Promise<void> {
    return migrateSchema(
      client,
      this.schema,
      this.s,
      RELAY_MIGRATIONS,
      (version) =>
        new UsageError(`The relay's schema "${this.schema}" is at version ${version}, newer than this wxhooks knows (${RELAY_SCHEMA_VERSION}); it was left as it is.`, {
          hint: 'Use the newer wxhooks that wrote it, or give this one another --schema.',
        }),
    );
  }

  private async run<R extends object>(sql: string, values: unknown[] = []): Promise<R[]> {
    try {
      return (await this.pool.query<R>(sql, values)).rows;
    } catch (err) {
      throw new StorageError(`The relay's PostgreSQL store at ${this.where} failed: ${(err as Error).message}.`, { cause: err });
    }
  }

  async channels(): Promise<ChannelRecord[]> {
    const rows = await this.run<{
      name: string;
      secrets: string[];
      temporary: boolean;
      created_at: string;
      last_seen_at: string;
      next_seq: string;
      tolerance: number | null;
      scheme: string | null;
      retired: { secret: string; at: number }[];
    }>(`SELECT name, secrets, temporary, created_at, last_seen_at, next_seq, tolerance, scheme, retired FROM ${this.s}.channels`);
    return rows.map((r) => ({
      name: r.name,
      secrets: r.secrets,
      temporary: r.temporary,
      createdAt: Number(r.created_at),
      lastSeenAt: Number(r.last_seen_at),
      nextSeq: Number(r.next_seq),
      ...(r.tolerance !== null ? { tolerance: r.tolerance } : {}),
      ...(r.scheme !== null ? { scheme: r.scheme } : {}),
      ...(r.retired.length ? { retired: r.retired } : {}),
    }));
  }

  async usage(): Promise<Map<string, ChannelUsage>> {
    const rows = await this.run<{ channel: string; queued: string; refused: string; bytes: string; oldest: string | null }>(
      `SELECT channel, count(*) FILTER (WHERE refused IS NULL) AS queued, count(*) FILTER (WHERE refused IS NOT NULL) AS refused, sum(size) AS bytes,
         min(received_at) FILTER (WHERE refused IS NULL) AS oldest
       FROM ${this.s}.deliveries GROUP BY channel`,
    );
    return new Map(rows.map((r) => [r.channel, { queued: Number(r.queued), refused: Number(r.refused), bytes: Number(r.bytes), ...(r.oldest !== null ? { oldestAt: Number(r.oldest) } : {}) }]));
  }

  async saveChannel(c: ChannelRecord): Promise<void> {
    await this.run(
      `INSERT INTO ${this.s}.channels (name, secrets, temporary, created_at, last_seen_at, next_seq, tolerance, scheme, retired) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
       ON CONFLICT (name) DO UPDATE SET secrets = EXCLUDED.secrets, temporary = EXCLUDED.temporary, last_seen_at = EXCLUDED.last_seen_at,
         next_seq = GREATEST(${this.s}.channels.next_seq, EXCLUDED.next_seq), tolerance = EXCLUDED.tolerance, scheme = EXCLUDED.scheme, retired = EXCLUDED.retired`,
      [c.name, JSON.stringify(c.secrets), c.temporary, c.createdAt, c.lastSeenAt, c.nextSeq, c.tolerance ?? null, c.scheme ?? null, JSON.stringify(c.retired ?? [])],
    );
  }

  async deleteChannel(name: string): Promise<Removed[]> {
    // the channel's row goes, and its deliveries with it (ON DELETE CASCADE): one statement
    const rows = await this.run<{ seq: string; size: number }>(
      `WITH gone AS (DELETE FROM ${this.s}.channels WHERE name = $1 RETURNING name)
       SELECT d.seq, d.size FROM ${this.s}.deliveries d JOIN gone ON d.channel = gone.name`,
      [name],
    );
    return rows.map((r) => ({ channel: name, seq: Number(r.seq), size: r.size }));
  }

  async clear(name: string): Promise<Removed[]> {
    const rows = await this.run<{ seq: string; size: number }>(`DELETE FROM ${this.s}.deliveries WHERE channel = $1 AND refused IS NULL RETURNING seq, size`, [name]);
    return rows.map((r) => ({ channel: name, seq: Number(r.seq), size: r.size }));
  }

  async append(channel: string, deliveries: StoredDelivery[], nextSeq: number): Promise<void> {
    // one row of parameters per delivery: a body goes as a parameter of its own, in binary (an array of
    // bodies would be written out in hex: 3× slower for a 1 MiB body, measured)
    const values: unknown[] = [channel, nextSeq];
    const rows = deliveries.map((d) => {
      const at = values.length;
      values.push(d.seq, d.receivedAt, JSON.stringify(d.headers), Buffer.from(d.body.buffer, d.body.byteOffset, d.body.byteLength), d.size);
      return `($${at + 1}::bigint, $${at + 2}::bigint, $${at + 3}::jsonb, $${at + 4}::bytea, $${at + 5}::integer)`;
    });
    const inserted = await this.run<{ seq: string }>(
      `WITH c AS (UPDATE ${this.s}.channels SET next_seq = GREATEST(next_seq, $2) WHERE name = $1 RETURNING name)
       INSERT INTO ${this.s}.deliveries (channel, seq, received_at, headers, body, size)
       SELECT c.name, d.seq, d.received_at, d.headers, d.body, d.size FROM c, (VALUES ${rows.join(', ')}) AS d (seq, received_at, headers, body, size)
       RETURNING seq`,
      values,
    );
    if (inserted.length !== deliveries.length) throw new StorageError(`The relay has no channel ${channel}.`);
  }

  async read(channel: string, afterSeq: number, limit: number, maxBytes: number): Promise<StoredDelivery[]> {
    // the first `limit` after afterSeq, cut where their running size passes maxBytes (the first always kept):
    // sizes are summed before any body is read
    const rows = await this.run<DeliveryRow>(
      `WITH next AS (
         SELECT seq, sum(size) OVER (ORDER BY seq) - size AS before
         FROM (SELECT seq, size FROM ${this.s}.deliveries WHERE channel = $1 AND seq > $2 AND refused IS NULL ORDER BY seq LIMIT $3) w
       )
       SELECT d.seq, d.received_at, d.headers, d.body, d.size
       FROM ${this.s}.deliveries d JOIN next ON d.channel = $1 AND d.seq = next.seq
       WHERE next.before = 0 OR next.before + d.size <= $4
       ORDER BY d.seq`,
      [channel, afterSeq, limit, maxBytes],
    );
    return rows.map((r) => ({ seq: Number(r.seq), receivedAt: Number(r.received_at), headers: r.headers, body: r.body, size: r.size }));
  }

  async remove(channel: string, seqs: readonly number[]): Promise<Removed[]> {
    const rows = await this.run<{ seq: string; size: number }>(`DELETE FROM ${this.s}.deliveries WHERE channel = $1 AND seq = ANY($2::bigint[]) RETURNING seq, size`, [channel, seqs]);
    return rows.map((r) => ({ channel, seq: Number(r.seq), size: r.size }));
  }

  async expire(before: number): Promise<Removed[]> {
    const rows = await this.run<{ channel: string; seq: string; size: number }>(`DELETE FROM ${this.s}.deliveries WHERE received_at < $1 AND refused IS NULL RETURNING channel, seq, size`, [before]);
    return rows.map((r) => ({ channel: r.channel, seq: Number(r.seq), size: r.size }));
  }

  async refuse(channel: string, seq: number, refusal: Refusal): Promise<number | undefined> {
    const rows = await this.run(`UPDATE ${this.s}.deliveries SET refused = $3 WHERE channel = $1 AND seq = $2 AND refused IS NULL RETURNING seq`, [channel, seq, JSON.stringify(refusal)]);
    return rows.length ? 0 : undefined;
  }

  async refusedOf(channel: string): Promise<Omit<StoredDelivery, 'body'>[]> {
    const rows = await this.run<{ seq: string; received_at: string; headers: [string, string][]; size: number; refused: Refusal }>(
      `SELECT seq, received_at, headers, size, refused FROM ${this.s}.deliveries WHERE channel = $1 AND refused IS NOT NULL ORDER BY seq`,
      [channel],
    );
    return rows.map((r) => ({ seq: Number(r.seq), receivedAt: Number(r.received_at), headers: r.headers, size: r.size, refused: r.refused }));
  }

  async close(): Promise<void> {
    await this.pool.end().catch(() => undefined);
  }
}
