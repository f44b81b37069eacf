import type { PoolClient } from 'pg';
import { NotFoundError, UsageError } from '../errors.js';
import { migrateSchema, type Migration } from './pg-schema.js';

/**
 * The shared store's schema (the processed pairs and their claims, the delivery history) and its
 * versions: what `listen --store postgres://…` creates or migrates, and what the commands that only
 * read the history check. The statements that use these tables are in pg-connection.ts, pg-history.ts
 * and postgres.ts.
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

export const SCHEMA_VERSION: number = MIGRATIONS.at(-1)!.version;

/** Raised when the schema is newer than this wxhooks knows: it is left as it is. */
function newer(schema: string, version: number): UsageError {
  return new UsageError(`The store's schema "${schema}" is at version ${version}, newer than this wxhooks knows (${SCHEMA_VERSION}); it was left as it is.`, {
    hint: 'Use the newer wxhooks that wrote it, or give this one another --store-schema.',
  });
}

/** Creates the schema, or brings it to SCHEMA_VERSION (under an advisory lock: instances starting together do it once). */
export function migrateStore(client: PoolClient, schema: string, quoted: string): Promise<void> {
  return migrateSchema(client, schema, quoted, MIGRATIONS, (v) => newer(schema, v));
}

/** For reading only: the schema must be there with a history (version 2 on), and not newer than this wxhooks knows. */
export async function checkStoreVersion(client: PoolClient, schema: string, quoted: string, where: string): Promise<void> {
  const { rows } = await client
    .query<{ version: number | null }>(`SELECT (SELECT version FROM ${quoted}.schema_version) AS version WHERE to_regclass($1) IS NOT NULL`, [`${quoted}.schema_version`])
    .catch(() => ({ rows: [] as { version: number | null }[] }));
  const version = rows[0]?.version;
  if (version === undefined || version === null || version < 2) {
    throw new NotFoundError(`The store at ${where} has no wxhooks history in schema "${schema}".`, {
      hint: 'Start `listen --store URL` with --history N (or --inspect) to keep one; --store-schema if it uses another schema.',
    });
  }
  if (version > SCHEMA_VERSION) throw newer(schema, version);
}
