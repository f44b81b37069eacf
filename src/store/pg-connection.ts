import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import type { Pool, PoolClient } from 'pg';
import { PairStoreError } from '../delivery/store.js';
import { checkOut, connectionLost, quotedSchema } from './pg-open.js';
import { shownUrl } from './store-url.js';

/**
 * What every part of the shared PostgreSQL store stands on: its pool, a statement run with the database's
 * going and coming said once each, a transaction on one connection, and the batching of one turn of the
 * event loop (each part queues its work, and `flushes` writes it, one statement for each kind).
 */

export interface PgConnectionOptions {
  url: string;
  schema: string;
  /** Told when the database goes away, and when it is back: one line each, not one per delivery. */
  onConnection?: (state: 'lost' | 'restored', reason?: string) => void;
}

export abstract class PgConnection<O extends PgConnectionOptions> {
  readonly where: string;
  /** This process, in the claims it holds and the history rows it writes: host, pid and a random part. */
  readonly instance: string = `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  /** The schema, quoted, as every statement writes it. */
  protected readonly s: string;
  private scheduled = false;
  /** The statements under way, for close() to wait for. */
  private readonly running = new Set<Promise<void>>();
  protected lost = false;
  /** Statements started so far, and how many had started when the database was last found lost or back. */
  private statements = 0;
  private changedAt = 0;

  protected constructor(
    protected readonly pool: Pool,
    protected readonly options: O,
  ) {
    this.where = shownUrl(options.url);
    this.s = quotedSchema(options.schema, '--store-schema');
  }

  /** The statements that write what this turn queued (each part adds its own). */
  protected abstract flushes(): Promise<void>[];

  /** Whether anything is queued and not yet written. */
  protected abstract queued(): boolean;

  /** Writes the turn's queued work at the end of the turn, with whatever else it queues meanwhile. */
  protected schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    setImmediate(() => {
      this.scheduled = false;
      for (const flush of this.flushes()) {
        this.running.add(flush);
        void flush.finally(() => this.running.delete(flush));
      }
    });
  }

  /** Runs a statement; notes the database lost or restored; a failure is a (never persistent) PairStoreError. */
  protected async run<R extends object>(sql: string, values: unknown[]): Promise<R[]> {
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

  /** Runs `work` in a transaction on one connection of the pool (see checkOut: a restart under it is an error of `work`'s, never an exit). */
  protected async transaction(work: (client: PoolClient) => Promise<void>): Promise<void> {
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

  /** Waits until nothing is queued or under way, then ends the pool. */
  protected async end(): Promise<void> {
    while (this.queued() || this.scheduled || this.running.size) {
      await Promise.all(this.running);
      await new Promise((resolve) => setImmediate(resolve));
    }
    await this.pool.end().catch(() => undefined);
  }
}
