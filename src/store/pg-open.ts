import type { Pool, PoolClient } from 'pg';
import { UnreachableError, UsageError } from '../errors.js';
import { addSensitive } from '../util/redact.js';
import { storeSecrets } from './store-url.js';

/**
 * Opening a PostgreSQL store, the one way every store of wxhooks does it (the shared store of `listen`,
 * and the relay's): the schema's name checked, the URL's password kept out of every message, `pg` loaded
 * only now, one pool, and a first connection that proves the server is there (else exit 6, naming the host
 * and never the password). Also here: how a connection is held (checkOut) and what says the database went
 * away (connectionLost), which every statement of a store needs.
 */

/** The pool's size and waits. */
const POOL = { max: 8, connectionTimeoutMillis: 5000, idleTimeoutMillis: 10_000 } as const;

export interface PgOpening {
  url: string;
  schema: string;
  /** The flag that names the schema, for the message when its name is refused (`--store-schema`, `--schema`). */
  schemaFlag: string;
  /** What to check when the server cannot be reached (the flags or variables the URL comes from). */
  hint?: string;
}

/** The schema's name, as every statement writes it: a lowercase SQL name (checked here), quoted. */
export function quotedSchema(schema: string, flag: string): string {
  if (!/^[a-z_][a-z0-9_]*$/.test(schema)) throw new UsageError(`${flag} must be a lowercase SQL name (letters, digits, _), not "${schema}".`);
  return `"${schema}"`;
}

/**
 * A pool on the store's server, and a first connection of it (checked out: the caller migrates or checks
 * the schema on it, then releases it). Refused: a schema name that is not a plain SQL name (exit 2); a
 * server that cannot be reached or refuses the credentials (exit 6).
 */
export async function openPool(o: PgOpening): Promise<{ pool: Pool; held: Held }> {
  quotedSchema(o.schema, o.schemaFlag);
  storeSecrets(o.url).forEach(addSensitive);
  const { default: pg } = await import('pg');
  const pool = new pg.Pool({ connectionString: o.url, ...POOL });
  pool.on('error', () => undefined); // an idle connection that breaks: the next query finds out, and says so
  try {
    return { pool, held: await checkOut(pool) };
  } catch (err) {
    await pool.end().catch(() => undefined);
    const u = new URL(o.url);
    throw new UnreachableError(`Cannot use the PostgreSQL store at ${u.hostname}:${u.port || 5432}: ${(err as Error).message}.`, {
      hint: o.hint ?? 'Check that the server runs and accepts connections from here, and the user name and password in the store URL.',
      cause: err,
    });
  }
}

/**
 * A store opened the one way (openPool), made over its pool, and its schema made ready on the first
 * connection (migrated, or its version checked): on a failure there, the connection is let go and the
 * store closed before the error goes on.
 */
export async function openPgStore<S extends { close(): Promise<void> }>(o: PgOpening, make: (pool: Pool) => S, ready: (store: S, client: PoolClient) => Promise<void>): Promise<S> {
  const { pool, held } = await openPool(o);
  const store = make(pool);
  try {
    await ready(store, held.client);
  } catch (err) {
    held.release(err);
    await store.close();
    throw err;
  }
  held.release();
  return store;
}

/** The error codes of a database that could not be reached or went away: the socket's, and PostgreSQL's own (57P01-03 shutting down, class 08 connection exceptions). */
const LOST_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND', 'EAI_AGAIN', '57P01', '57P02', '57P03', '08006', '08001', '08003', '08000']);
/** What `pg` says, without a code, when its connection ends or cannot be made within `connectionTimeoutMillis`. */
const LOST_MESSAGES = /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error and is not queryable)/;

/** Errors that mean the database could not be reached or went away, rather than a mistake in a statement. */
export function connectionLost(err: unknown): boolean {
  const e = err as { code?: string; message?: string };
  return LOST_CODES.has(e.code ?? '') || LOST_MESSAGES.test(e.message ?? '');
}

/** A connection checked out of the pool, listened to while it is held. */
export interface Held {
  client: PoolClient;
  /** The error its connection ended with, if it did. */
  broken(): Error | undefined;
  /** Hands it back: as broken (the pool drops it) when it is, or when `err` says it went away. */
  release(err?: unknown): void;
}

/**
 * A connection of the pool, listened to from the moment it is handed over. While it is checked out, no
 * listener of the pool's is on it, and one the database ends (a restart: 57P01, "Connection terminated
 * unexpectedly") emitted an 'error' nothing listened for, and `listen` exited 1 (#32.2). Not with
 * `await pool.connect()`: its promise hands the connection over a turn of microtasks later, and the
 * chunk of the socket that finished its previous statement (and so freed it for us) may already hold the
 * database's goodbye, parsed at once. The callback is called as it is handed over.
 */
export function checkOut(pool: Pool): Promise<Held> {
  return new Promise((resolve, reject) =>
    pool.connect((err, client) => {
      if (err || !client) return reject(err ?? new Error('no connection from the pool'));
      let broken: Error | undefined;
      const onError = (e: Error) => (broken ??= e);
      client.on('error', onError);
      resolve({
        client,
        broken: () => broken,
        release(failed?: unknown) {
          if (!broken && failed !== undefined && connectionLost(failed)) broken = failed as Error;
          // a broken connection keeps the listener: it may say more before it is gone
          if (!broken) client.removeListener('error', onError);
          client.release(broken);
        },
      });
    }),
  );
}
