import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { afterAll, beforeAll, inject } from 'vitest';

// The full tier's shared services (started once per run by test/full/global-setup.ts), each given to a
// file apart from the others': a database of its own, streams and keys of its own, a browser context of
// its own. A test that restarts, stops or kills a server starts one of its own instead (startPostgres,
// startNats, startRedis in scripts/harness.js), so that no other file sees it go.

interface Provided {
  url: string;
  password: string;
  port: number;
}

function provided<K extends 'postgres' | 'nats' | 'redis' | 'chromium'>(key: K) {
  const value = inject(key);
  if (value === undefined) throw new Error(`no shared ${key}: the run's services are the full tier's (test/full/, npm run test:all)`);
  return value;
}

/** A database of this file's own on the run's PostgreSQL server; `remove()` drops it. */
export interface SharedPostgres extends Provided {
  /** Carries the password, and names this file's database. */
  url: string;
  database: string;
  remove(): Promise<void>;
}

/**
 * A new database on the run's PostgreSQL server, for this file: the stores' default schemas
 * (`--store-schema`, the relay's) are then this file's alone, as on a server of its own.
 */
export async function sharedPostgres(): Promise<SharedPostgres> {
  const server = provided('postgres');
  const database = `wx_${randomBytes(6).toString('hex')}`;
  await admin(server.url, `CREATE DATABASE ${database}`);
  const url = new URL(server.url);
  url.pathname = `/${database}`;
  return {
    url: url.href,
    password: server.password,
    port: server.port,
    database,
    // FORCE: a pool a test left open must not keep the database
    remove: () => admin(server.url, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`),
  };
}

/** This file's database, and a client connected to it for the file's own queries. */
export interface DatabaseWithClient {
  db: SharedPostgres;
  admin: pg.Client;
}

/**
 * A database of this file's own (`sharedPostgres()`) and a client on it, made before the file's tests and
 * given to `set`; the client ended and the database dropped after them. Call at the top of the file.
 */
export function sharedPostgresFor(set: (made: DatabaseWithClient) => void): void {
  let made: DatabaseWithClient | undefined;
  let db: SharedPostgres | undefined;
  beforeAll(async () => {
    db = await sharedPostgres();
    const { default: pg } = await import('pg');
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    made = { db, admin };
    set(made);
  });
  afterAll(async () => {
    await made?.admin.end();
    await db?.remove();
  });
}

async function admin(url: string, sql: string): Promise<void> {
  const { default: pg } = await import('pg');
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** The run's NATS or Redis server, and a prefix for the names of this file's streams and keys. */
export interface SharedBroker extends Provided {
  /** Carries the password; add `/SUBJECT` or `/STREAM` (BROKERS' url in test/helpers/sinks.ts adds the prefix). */
  url: string;
  prefix: string;
}

/**
 * The run's NATS or Redis server, as `startNats`/`startRedis` would give it but without the means to stop
 * it; each call with a prefix of its own, so that no two files (nor two calls) share a stream or a key.
 */
export function sharedBroker(kind: 'nats' | 'redis'): SharedBroker {
  return { ...provided(kind), prefix: `f${randomBytes(3).toString('hex')}_` };
}

/**
 * This worker's Chromium (one per worker, for the run), connected: each file makes its own contexts and
 * pages; `close()` disconnects this file and leaves the browser to the next.
 */
export async function sharedBrowser(): Promise<import('playwright-core').Browser> {
  const endpoints = provided('chromium');
  const worker = Math.max(0, Number(process.env.VITEST_POOL_ID ?? 1) - 1) % endpoints.length;
  const { chromium } = await import('playwright-core');
  return chromium.connect(endpoints[worker]!);
}
