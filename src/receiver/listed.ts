// What the inspector page's list needs of a record, and how its event stream carries it: each record as
// an array of these fields' values, in this order (null for none). The server writes rows with `listedRow`
// and the page reads them with `fromRow`, so the order lives here only. No imports but an import-free one:
// the page bundles it.

import { claimKept } from '../store/history-limits.js';

/** The fields of a record the page's list shows and filters on; the rest comes with the record itself, when one is picked. */
export interface Listed {
  id: number;
  time: string;
  outcome: string;
  status: number;
  type?: string;
  /** A verified delivery's Trigger-Id. */
  trigger_id?: string;
  /** The Trigger-Id a refused request carried: a claim, not verified, never one of that delivery's attempts. */
  claimed_trigger_id?: string;
  subscription_id?: string;
  webhook_id?: string;
  model?: string;
  forecast_hour?: number;
  /** A test delivery (a ping). */
  test?: boolean;
  message?: string;
  replay_of?: number;
  /** A replay whose body was edited first. */
  replay_edited?: boolean;
}

/** Their order in a row. (Every field of Listed, once: the test of the round trip checks it.) */
export const LISTED: readonly (keyof Listed)[] = [
  'id',
  'time',
  'outcome',
  'status',
  'type',
  'trigger_id',
  'claimed_trigger_id',
  'subscription_id',
  'webhook_id',
  'model',
  'forecast_hour',
  'test',
  'message',
  'replay_of',
  'replay_edited',
];

/**
 * A record as one row of the stream: the report `r`, with the history's `id` for it (and, for a replay,
 * the id it replays), which the history keeps beside the report rather than in it. An array, not an
 * object: the names are not sent again for every record, which halves the bytes, and makes the stream's
 * JSON cost ~40% less CPU per record (JSON.stringify of 1,500 records, the batch of 100 ms at 15,000
 * deliveries a second).
 */
export function listedRow(r: Omit<Listed, 'id' | 'replay_of'>, id: number, replayOf?: number): unknown[] {
  const row = LISTED.map((name) => (name === 'id' ? id : name === 'replay_of' ? (replayOf ?? null) : name === 'message' && r.outcome === 'accepted' ? null : (r[name] ?? null))); // a message is for refused requests: an accepted delivery's says only that it was accepted
  // a claimed Trigger-Id goes to every page cut, however it was kept (src/store/history-limits.ts)
  if (r.claimed_trigger_id !== undefined) row[CLAIMED] = claimKept(r.claimed_trigger_id);
  return row;
}

const CLAIMED = LISTED.indexOf('claimed_trigger_id');

/** A row of the stream as the record it came from (its listed fields). */
export function fromRow(row: unknown[]): Listed {
  const out: Record<string, unknown> = {};
  LISTED.forEach((name, i) => {
    if (row[i] !== null && row[i] !== undefined) out[name] = row[i];
  });
  return out as unknown as Listed;
}
