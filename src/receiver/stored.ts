import { basename } from 'node:path';
import { NotFoundError, NotVerifiedError, UsageError } from '../errors.js';
import { parseBodyObject } from '../signing/json-body.js';
import type { HistoryRow, PgStore } from '../store/postgres.js';
import { shownUrl, storeKind } from '../store/store-url.js';
import { idText } from '../util/bytes.js';
import type { ReceiverEvent } from './event.js';
import { readSavedDir, runFactsOf, savedBody, type SavedFile } from './saved.js';

/**
 * Where `deliveries` and `runs` read what `listen` received: a `--save-dir` folder (the verified
 * deliveries, one file each), or the history in a PostgreSQL store (every request any instance
 * answered, when they keep one). Both give the same entries; the commands know only these.
 */
export type DeliverySource = { dir: string } | { store: string; schema: string };

/** One delivery as the list shows it. */
export interface StoredEntry {
  /** How `show` and `replay` name it: the file's name, or `#ID` in the store's history. */
  ref: string;
  file?: string;
  id?: number;
  received_at: string;
  type?: string;
  trigger_id?: string;
  subscription_id?: string;
  size: number;
  /** `verified` (a new delivery, verified), `test` (a test ping), or what listen answered otherwise (`duplicate`, `unverified`, ...). */
  outcome: string;
  /** A test delivery (a ping), whatever was answered: never part of a model run. */
  test?: true;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  /** The instance that received it (a store's history). */
  instance?: string;
}

/** One delivery with what arrived. */
export interface StoredDelivery extends StoredEntry {
  headers: Record<string, string>;
  body: Buffer;
  payload: Record<string, unknown> | undefined;
}

/** The source the options name: --dir, or --store (else WXHOOKS_STORE_URL), not both. */
export function sourceOf(o: { dir?: string; store?: string; storeSchema?: string }, env: NodeJS.ProcessEnv): DeliverySource {
  if (o.dir !== undefined && o.store !== undefined) throw new UsageError('Give --dir or --store, not both.');
  if (o.dir !== undefined) return { dir: o.dir };
  const store = o.store ?? env.WXHOOKS_STORE_URL;
  if (store === undefined) throw new UsageError('Give --dir DIR (a `listen --save-dir` folder) or --store postgres://... (the receivers\' shared store; else WXHOOKS_STORE_URL).');
  if (storeKind(store) === 'file') throw new UsageError('The file store keeps no deliveries: give --dir DIR, the folder `listen --save-dir` wrote to.');
  return { store, schema: o.storeSchema ?? 'wxhooks' };
}

/** The source for messages: the folder, or the store's URL without its password. */
export const whereOf = (source: DeliverySource) => ('dir' in source ? source.dir : shownUrl(source.store));


function fromFile(d: SavedFile): StoredDelivery {
  const p = d.payload;
  const facts = runFactsOf(p);
  const body = savedBody(d.saved);
  return {
    ref: basename(d.file),
    file: d.file,
    received_at: d.saved.received_at,
    type: facts.type,
    trigger_id: idText(p?.trigger_id) ?? d.saved.headers['trigger-id'],
    subscription_id: idText(p?.subscription_id),
    size: body.length,
    outcome: p?.test === true ? 'test' : 'verified',
    ...(p?.test === true ? { test: true as const } : {}),
    model: facts.model,
    initialization_time: facts.initialization_time,
    forecast_hour: facts.forecast_hour,
    headers: d.saved.headers,
    body,
    payload: p,
  };
}

function entryOfRow(row: HistoryRow): StoredEntry {
  const r = row.record as unknown as ReceiverEvent;
  return {
    ref: `#${row.id}`,
    id: row.id,
    received_at: r.time ?? new Date(row.received_at).toISOString(),
    type: r.type,
    trigger_id: r.trigger_id,
    subscription_id: r.subscription_id,
    size: row.size ?? r.size ?? 0,
    outcome: r.outcome === 'accepted' ? (r.test ? 'test' : 'verified') : r.outcome,
    ...(r.test ? { test: true as const } : {}),
    model: r.model,
    initialization_time: r.initialization_time,
    forecast_hour: r.forecast_hour,
    instance: row.instance,
  };
}

function fromRow(row: HistoryRow): StoredDelivery {
  const body = row.body ?? Buffer.alloc(0);
  return { ...entryOfRow(row), headers: row.headers ?? {}, body, payload: parseBodyObject(body) };
}

async function openStore(source: { store: string; schema: string }): Promise<PgStore> {
  const { PgStore } = await import('../store/postgres.js');
  return PgStore.open({ url: source.store, schema: source.schema, ttlMs: 0, leaseMs: 0, readOnly: true });
}

/** The most rows read from a store's history at once. */
const MOST = 100_000;

/** Every delivery the source holds, oldest first; `skipped` counts files in a folder that are not saved deliveries. */
export async function listStored(source: DeliverySource): Promise<{ entries: StoredEntry[]; skipped: number }> {
  if ('dir' in source) {
    const { deliveries, skipped } = await readSavedDir(source.dir);
    return { entries: deliveries.map(fromFile), skipped };
  }
  const store = await openStore(source);
  try {
    const newest = await store.historyNewest();
    return { entries: (await store.historySince(Math.max(0, newest - MOST), MOST)).map(entryOfRow), skipped: 0 };
  } finally {
    await store.close();
  }
}

/** At most this many Trigger-Ids are named when a prefix matches several. */
const AMBIGUOUS_SHOWN = 10;

/** A Trigger-Id prefix that matches several: a usage error that lists them, as git does. */
function ambiguous(which: string, triggers: string[]): UsageError {
  return new UsageError(`"${which}" is the start of several Trigger-Ids: ${triggers.slice(0, AMBIGUOUS_SHOWN).join(', ')}${triggers.length > AMBIGUOUS_SHOWN ? ', …' : ''}.`, {
    hint: 'Give more of it.',
  });
}

/**
 * One delivery: by file name (a folder) or `#ID` (a store's history), or by Trigger-Id, whole or a unique
 * start of one (its latest verified attempt; `others` counts the earlier ones). A request that did not
 * verify only claims its Trigger-Id: it is never found by it. With `verifiedOnly` (replay), `#ID` of a
 * refused request is refused too (exit 9): what did not verify is never signed again.
 */
export async function findStored(source: DeliverySource, which: string, options: { verifiedOnly?: boolean } = {}): Promise<{ found: StoredDelivery; others: number }> {
  const notFound = (what: string) =>
    new NotFoundError(`No delivery ${'dir' in source ? `saved in ${source.dir}` : `in the history at ${whereOf(source)}`} is "${which}" (${what}).`, {
      hint: `\`wxhooks deliveries list ${'dir' in source ? `--dir ${source.dir}` : '--store URL'}\` shows what is there.`,
    });
  if ('dir' in source) {
    // a folder holds only verified deliveries: listen saves nothing else
    const { deliveries } = await readSavedDir(source.dir);
    const byFile = deliveries.find((d) => d.file === which || basename(d.file) === which || basename(d.file) === basename(which));
    if (byFile) return { found: fromFile(byFile), others: 0 };
    const all = deliveries.map(fromFile);
    const triggers = [...new Set(all.map((d) => d.trigger_id).filter((t): t is string => t !== undefined && t.startsWith(which)))];
    const trigger = triggers.includes(which) ? which : triggers.length === 1 ? triggers[0] : undefined;
    if (triggers.length > 1 && !trigger) throw ambiguous(which, triggers);
    const byTrigger = all.filter((d) => d.trigger_id === trigger);
    if (!byTrigger.length) throw notFound('a file name, or a Trigger-Id or the start of one');
    return { found: byTrigger.at(-1)!, others: byTrigger.length - 1 };
  }
  const store = await openStore(source);
  try {
    const id = /^#?(\d+)$/.exec(which);
    if (id) {
      const row = await store.historyOne(Number(id[1]));
      if (row && options.verifiedOnly && !row.verified) {
        const r = row.record as unknown as ReceiverEvent;
        throw new NotVerifiedError(`#${row.id} is a request that did not verify (${r.outcome}${r.message ? `: ${r.message}` : ''}): only verified deliveries are replayed.`, {
          hint: 'What did not verify is never signed with the webhook\'s secret. `wxhooks deliveries list --store URL --outcome verified` shows what can be.',
        });
      }
      if (row) return { found: fromRow(row), others: 0 };
    }
    const { triggers, claims } = await store.historyTriggers(which, AMBIGUOUS_SHOWN + 1);
    const trigger = triggers.includes(which) ? which : triggers.length === 1 ? triggers[0] : undefined;
    if (triggers.length > 1 && !trigger) throw ambiguous(which, triggers);
    const rows = trigger ? (await store.historyOfTrigger(trigger)).filter((r) => r.body) : [];
    if (!rows.length) {
      if (claims) {
        throw new NotVerifiedError(`No verified delivery of "${which}" is kept; ${claims} request${claims === 1 ? '' : 's'} that did not verify claimed that Trigger-Id, and ${claims === 1 ? 'it is' : 'they are'} never replayed.`, {
          hint: 'A request that does not verify may carry any Trigger-Id: it is no attempt of that delivery.',
        });
      }
      throw notFound('a history id such as #12, or a Trigger-Id or the start of one');
    }
    return { found: fromRow(rows.at(-1)!), others: rows.length - 1 };
  } finally {
    await store.close();
  }
}
