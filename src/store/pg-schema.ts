import type { PoolClient } from 'pg';

/** One step of a schema: the SQL that brings the version before it to `version`. */
export interface Migration {
  version: number;
  sql: (schema: string) => string;
}

/**
 * Brings `schema` (its name, and `quoted`, as the SQL writes it) to the last of `steps`, in one
 * transaction under an advisory lock, so that instances starting together migrate it once. A schema newer
 * than the steps is left as it is: `newer(version)` is thrown. The shared store and the relay's store
 * both migrate by this.
 */
export async function migrateSchema(client: PoolClient, schema: string, quoted: string, steps: readonly Migration[], newer: (version: number) => Error): Promise<void> {
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock(hashtext($1))', [`wxhooks:${schema}`]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${quoted}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${quoted}.schema_version (version integer NOT NULL)`);
    const { rows } = await client.query<{ version: number }>(`SELECT version FROM ${quoted}.schema_version`);
    let version = rows[0]?.version ?? 0;
    if (!rows.length) await client.query(`INSERT INTO ${quoted}.schema_version (version) VALUES (0)`);
    if (version > (steps.at(-1)?.version ?? 0)) throw newer(version);
    for (const step of steps) {
      if (step.version <= version) continue;
      await client.query(step.sql(quoted));
      await client.query(`UPDATE ${quoted}.schema_version SET version = $1`, [step.version]);
      version = step.version;
    }
    await client.query('COMMIT');
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}
