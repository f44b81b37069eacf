import type { ChannelRecord, ChannelUsage, Refusal, RelayStorage, Removed, StoredDelivery } from './storage.js';

/**
 * The relay's storage in its Durable Object's own SQLite (the Worker host, worker.ts): no Node module.
 * A Durable Object's SQL runs synchronously and each call is a transaction; what it wrote is durable
 * before the object's next answer leaves (its output gate), so an inbound delivery is answered 2xx only
 * once stored. A value holds at most 2 MB there: bodies are kept in parts of 1 MiB.
 */

/** What the relay uses of a Durable Object's `ctx.storage`. */
export interface DurableSql {
  sql: { exec(query: string, ...bindings: unknown[]): { toArray(): Record<string, unknown>[] } };
  transactionSync<T>(fn: () => T): T;
}

const PART = 1024 * 1024;

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS channels (
     name TEXT PRIMARY KEY, secrets TEXT NOT NULL, temporary INTEGER NOT NULL,
     created_at INTEGER NOT NULL, last_seen_at INTEGER NOT NULL, next_seq INTEGER NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS deliveries (
     channel TEXT NOT NULL, seq INTEGER NOT NULL, received_at INTEGER NOT NULL, headers TEXT NOT NULL,
     size INTEGER NOT NULL, body_length INTEGER NOT NULL, PRIMARY KEY (channel, seq))`,
  'CREATE INDEX IF NOT EXISTS deliveries_received_at ON deliveries (received_at)',
  `CREATE TABLE IF NOT EXISTS parts (
     channel TEXT NOT NULL, seq INTEGER NOT NULL, part INTEGER NOT NULL, data BLOB NOT NULL, PRIMARY KEY (channel, seq, part))`,
];

/** Columns added since the first schema, each added to a table that lacks it (an object created by an older relay). */
const ADDED: [table: string, column: string, type: string][] = [
  ['channels', 'tolerance', 'INTEGER'],
  ['channels', 'scheme', 'TEXT'],
  ['channels', 'retired', "TEXT NOT NULL DEFAULT '[]'"],
  ['deliveries', 'refused', 'TEXT'],
];

export class DurableObjectRelayStorage implements RelayStorage {
  readonly where = "the Durable Object's storage";

  constructor(private readonly storage: DurableSql) {
    storage.transactionSync(() => {
      for (const statement of SCHEMA) storage.sql.exec(statement);
      for (const [table, column, type] of ADDED) {
        const has = storage.sql
          .exec(`PRAGMA table_info(${table})`)
          .toArray()
          .some((c) => c.name === column);
        if (!has) storage.sql.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${type}`);
      }
    });
  }

  private rows(query: string, ...bindings: unknown[]): Record<string, unknown>[] {
    return this.storage.sql.exec(query, ...bindings).toArray();
  }

  async channels(): Promise<ChannelRecord[]> {
    return this.rows('SELECT name, secrets, temporary, created_at, last_seen_at, next_seq, tolerance, scheme, retired FROM channels').map((r) => {
      const retired = JSON.parse(String(r.retired)) as { secret: string; at: number }[];
      return {
        name: String(r.name),
        secrets: JSON.parse(String(r.secrets)) as string[],
        temporary: Boolean(r.temporary),
        createdAt: Number(r.created_at),
        lastSeenAt: Number(r.last_seen_at),
        nextSeq: Number(r.next_seq),
        ...(r.tolerance !== null ? { tolerance: Number(r.tolerance) } : {}),
        ...(r.scheme !== null ? { scheme: String(r.scheme) } : {}),
        ...(retired.length ? { retired } : {}),
      };
    });
  }

  async usage(): Promise<Map<string, ChannelUsage>> {
    const rows = this.rows(
      `SELECT channel, sum(refused IS NULL) AS queued, sum(refused IS NOT NULL) AS refused, sum(size) AS bytes, min(CASE WHEN refused IS NULL THEN received_at END) AS oldest
       FROM deliveries GROUP BY channel`,
    );
    return new Map(
      rows.map((r) => [String(r.channel), { queued: Number(r.queued), refused: Number(r.refused), bytes: Number(r.bytes), ...(r.oldest !== null ? { oldestAt: Number(r.oldest) } : {}) }]),
    );
  }

  async saveChannel(c: ChannelRecord): Promise<void> {
    this.rows(
      `INSERT INTO channels (name, secrets, temporary, created_at, last_seen_at, next_seq, tolerance, scheme, retired) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (name) DO UPDATE SET secrets = excluded.secrets, temporary = excluded.temporary, last_seen_at = excluded.last_seen_at,
         next_seq = max(channels.next_seq, excluded.next_seq), tolerance = excluded.tolerance, scheme = excluded.scheme, retired = excluded.retired`,
      c.name,
      JSON.stringify(c.secrets),
      c.temporary ? 1 : 0,
      c.createdAt,
      c.lastSeenAt,
      c.nextSeq,
      c.tolerance ?? null,
      c.scheme ?? null,
      JSON.stringify(c.retired ?? []),
    );
  }

  async deleteChannel(name: string): Promise<Removed[]> {
    return this.storage.transactionSync(() => {
      const gone = this.rows('SELECT seq, size FROM deliveries WHERE channel = ?', name).map((r) => ({ channel: name, seq: Number(r.seq), size: Number(r.size) }));
      this.rows('DELETE FROM parts WHERE channel = ?', name);
      this.rows('DELETE FROM deliveries WHERE channel = ?', name);
      this.rows('DELETE FROM channels WHERE name = ?', name);
      return gone;
    });
  }

  async clear(name: string): Promise<Removed[]> {
    return this.storage.transactionSync(() => {
      const gone = this.rows('DELETE FROM deliveries WHERE channel = ? AND refused IS NULL RETURNING seq, size', name).map((r) => ({ channel: name, seq: Number(r.seq), size: Number(r.size) }));
      for (const r of gone) this.rows('DELETE FROM parts WHERE channel = ? AND seq = ?', name, r.seq);
      return gone;
    });
  }

  async append(channel: string, deliveries: StoredDelivery[], nextSeq: number): Promise<void> {
    this.storage.transactionSync(() => {
      if (!this.rows('SELECT 1 FROM channels WHERE name = ?', channel).length) throw new Error(`the relay has no channel ${channel}`);
      for (const d of deliveries) {
        this.rows(
          'INSERT INTO deliveries (channel, seq, received_at, headers, size, body_length) VALUES (?, ?, ?, ?, ?, ?)',
          channel,
          d.seq,
          d.receivedAt,
          JSON.stringify(d.headers),
          d.size,
          d.body.length,
        );
        for (let part = 0, at = 0; at === 0 || at < d.body.length; part++, at += PART) {
          this.rows('INSERT INTO parts (channel, seq, part, data) VALUES (?, ?, ?, ?)', channel, d.seq, part, d.body.subarray(at, at + PART));
        }
      }
      this.rows('UPDATE channels SET next_seq = max(next_seq, ?) WHERE name = ?', nextSeq, channel);
    });
  }

  async read(channel: string, afterSeq: number, limit: number, maxBytes: number): Promise<StoredDelivery[]> {
    const metas = this.rows('SELECT seq, received_at, headers, size, body_length FROM deliveries WHERE channel = ? AND seq > ? AND refused IS NULL ORDER BY seq LIMIT ?', channel, afterSeq, limit);
    const out: StoredDelivery[] = [];
    let bytes = 0;
    for (const m of metas) {
      const size = Number(m.size);
      if (out.length && bytes + size > maxBytes) break;
      bytes += size;
      const body = new Uint8Array(Number(m.body_length));
      let at = 0;
      for (const p of this.rows('SELECT data FROM parts WHERE channel = ? AND seq = ? ORDER BY part', channel, m.seq)) {
        const data = new Uint8Array(p.data as ArrayBuffer);
        body.set(data, at);
        at += data.length;
      }
      out.push({ seq: Number(m.seq), receivedAt: Number(m.received_at), headers: JSON.parse(String(m.headers)) as [string, string][], body, size });
    }
    return out;
  }

  async remove(channel: string, seqs: readonly number[]): Promise<Removed[]> {
    return this.storage.transactionSync(() => {
      const out: Removed[] = [];
      for (const seq of seqs) {
        const row = this.rows('DELETE FROM deliveries WHERE channel = ? AND seq = ? RETURNING size', channel, seq)[0];
        if (!row) continue;
        this.rows('DELETE FROM parts WHERE channel = ? AND seq = ?', channel, seq);
        out.push({ channel, seq, size: Number(row.size) });
      }
      return out;
    });
  }

  async expire(before: number): Promise<Removed[]> {
    return this.storage.transactionSync(() => {
      const old = this.rows('DELETE FROM deliveries WHERE received_at < ? AND refused IS NULL RETURNING channel, seq, size', before).map((r) => ({
        channel: String(r.channel),
        seq: Number(r.seq),
        size: Number(r.size),
      }));
      for (const r of old) this.rows('DELETE FROM parts WHERE channel = ? AND seq = ?', r.channel, r.seq);
      return old;
    });
  }

  async refuse(channel: string, seq: number, refusal: Refusal): Promise<number | undefined> {
    const rows = this.rows('UPDATE deliveries SET refused = ? WHERE channel = ? AND seq = ? AND refused IS NULL RETURNING seq', JSON.stringify(refusal), channel, seq);
    return rows.length ? 0 : undefined;
  }

  async refusedOf(channel: string): Promise<Omit<StoredDelivery, 'body'>[]> {
    return this.rows('SELECT seq, received_at, headers, size, refused FROM deliveries WHERE channel = ? AND refused IS NOT NULL ORDER BY seq', channel).map((r) => ({
      seq: Number(r.seq),
      receivedAt: Number(r.received_at),
      headers: JSON.parse(String(r.headers)) as [string, string][],
      size: Number(r.size),
      refused: JSON.parse(String(r.refused)) as Refusal,
    }));
  }

  async close(): Promise<void> {
    // nothing to let go: the Durable Object's storage is the runtime's
  }
}
