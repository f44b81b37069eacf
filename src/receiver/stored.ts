import { basename } from 'node:path';
import { NotFoundError, NotVerifiedError, UsageError } from '../errors.js';
import { parseBodyObject } from '../signing/json-body.js';
import { configDir } from '../store/paths.js';
import type { HistoryRow, PgStore } from '../store/postgres.js';
import { shownUrl, storeKind } from '../store/store-url.js';
import { idText } from '../util/bytes.js';
import type { ReceiverEvent } from './event.js';
import { provenLayout, readSavedDir, readSaveKey, runFactsOf, savedBody, type SavedDelivery, type SavedFile, type SkippedFile } from './saved.js';
import * as DEFAULTS from '../delivery/defaults.js';

/**
 * Where `deliveries` and `runs` read what `listen` received: a `--save-dir` folder (the verified
 * deliveries, one file each), or the history in a PostgreSQL store (every request any instance
 * answered, when they keep one). Both give the same entries; the commands know only these.
 */
export type DeliverySource = { dir: string; storeDir?: string; secrets?: readonly string[] } | { store: string; schema: string };

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
  /**
   * `verified` (a new delivery, verified), `test` (a test ping), or what listen answered otherwise
   * (`duplicate`, `unverified`, ...). A saved file that shows no verification (no mark of this store's
   * listen, and no signature checked with a secret given) is `unverified`.
   */
  outcome: string;
  /** A test delivery (a ping), whatever was answered: never part of a model run. */
  test?: true;
  model?: string;
  initialization_time?: string;
  forecast_hour?: number;
  /** The notification's own created_at (its delivery lag is received_at minus this). */
  created_at?: string;
  /** The instance that received it (a store's history). */
  instance?: string;
}

/** One delivery with what arrived. */
export interface StoredDelivery extends StoredEntry {
  headers: Record<string, string>;
  body: Buffer;
  payload: Record<string, unknown> | undefined;
  /** A saved file's content, and the layout it shows it verified with (provenLayout), if it does. */
  saved?: SavedDelivery;
  layout?: string;
}

/**
 * The source the options name: --dir, or --store (else WXHOOKS_STORE_URL), not both. A folder is read
 * with the store folder's key (what listen saved there is marked with it), and the secrets given, if any,
 * to check the signatures of files without the mark.
 */
export function sourceOf(o: { dir?: string; store?: string; storeSchema?: string }, env: NodeJS.ProcessEnv, secrets: readonly string[] = []): DeliverySource {
  if (o.dir !== undefined && o.store !== undefined) throw new UsageError('Give --dir or --store, not both.');
  if (o.dir !== undefined) return { dir: o.dir, storeDir: configDir(env), secrets };
  const store = o.store ?? env.WXHOOKS_STORE_URL;
  if (store === undefined) throw new UsageError("Give --dir DIR (a `listen --save-dir` folder) or --store postgres://... (the receivers' shared store; else WXHOOKS_STORE_URL).");
  if (storeKind(store) === 'file') throw new UsageError('The file store keeps no deliveries: give --dir DIR, the folder `listen --save-dir` wrote to.');
  return { store, schema: o.storeSchema ?? DEFAULTS.schema };
}

/** The source for messages: the folder, or the store's URL without its password. */
export const whereOf = (source: DeliverySource): string => ('dir' in source ? source.dir : shownUrl(source.store));

function fromFile(d: SavedFile, secrets: readonly string[] = []): StoredDelivery {
  const p = d.payload;
  const facts = runFactsOf(p);
  const body = savedBody(d.saved);
  const layout = d.marked ? (d.saved.layout ?? 'standard') : provenLayout(d.saved, undefined, secrets);
  return {
    ref: basename(d.file),
    file: d.file,
    received_at: d.saved.received_at,
    type: facts.type,
    trigger_id: idText(p?.trigger_id) ?? d.saved.headers['trigger-id'],
    subscription_id: idText(p?.subscription_id),
    size: body.length,
    outcome: layout === undefined ? 'unverified' : p?.test === true ? 'test' : 'verified',
    ...(p?.test === true ? { test: true as const } : {}),
    model: facts.model,
    initialization_time: facts.initialization_time,
    forecast_hour: facts.forecast_hour,
    created_at: idText(p?.created_at),
    headers: d.saved.headers,
    body,
    payload: p,
    saved: d.saved,
    layout,
  };
}

/** A folder's deliveries, each marked or not with its store folder's key. */
async function readFolder(source: { dir: string; storeDir?: string }) {
  return readSavedDir(source.dir, source.storeDir === undefined ? undefined : await readSaveKey(source.storeDir));
}

/** What `deliveries list` and `runs` say of the files of a folder that show no verification, or nothing. */
export function unverifiedLine(entries: readonly StoredEntry[], source: DeliverySource, done = 'listed as unverified, never replayed'): string | undefined {
  if (!('dir' in source)) return undefined;
  const n = entries.filter((e) => e.outcome === 'unverified').length;
  if (!n) return undefined;
  return `warning: ${n} file${n === 1 ? '' : 's'} in ${source.dir} ${n === 1 ? 'carries' : 'carry'} no mark of a delivery this store's listen verified (put there by hand or by another user, changed since, or saved elsewhere or by an older wxhooks): ${done}${source.secrets?.length ? ', and their signatures do not verify with the secret given' : '. Give --webhook ID or --secret-env VAR to check their own signatures'}.`;
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
    created_at: r.created_at,
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

/** Every delivery the source holds, oldest first; `skipped`, the files of a folder passed over, and why. */
export async function listStored(source: DeliverySource): Promise<{ entries: StoredEntry[]; skipped: SkippedFile[] }> {
  if ('dir' in source) {
    const { deliveries, skipped } = await readFolder(source);
    return { entries: deliveries.map((d) => fromFile(d, source.secrets)), skipped };
  }
  const store = await openStore(source);
  try {
    const newest = await store.historyNewest();
    return { entries: (await store.historySince(Math.max(0, newest - MOST), MOST)).map(entryOfRow), skipped: [] };
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
 * refused request is refused too (exit 9): what did not verify is never signed again. (A folder's file
 * that shows no verification is found, by its name or, when no verified file has it, its Trigger-Id: the
 * caller decides; `deliveries replay` checks its signature with the secret it is given.)
 */
export async function findStored(source: DeliverySource, which: string, options: { verifiedOnly?: boolean } = {}): Promise<{ found: StoredDelivery; others: number }> {
  const notFound = (what: string) =>
    new NotFoundError(`No delivery ${'dir' in source ? `saved in ${source.dir}` : `in the history at ${whereOf(source)}`} is "${which}" (${what}).`, {
      hint: `\`wxhooks deliveries list ${'dir' in source ? `--dir ${source.dir}` : '--store URL'}\` shows what is there.`,
    });
  if ('dir' in source) {
    // listen saves only verified deliveries, marked so; a file without the mark may be anything
    const { deliveries } = await readFolder(source);
    const byFile = deliveries.find((d) => d.file === which || basename(d.file) === which || basename(d.file) === basename(which));
    if (byFile) return { found: fromFile(byFile, source.secrets), others: 0 };
    const all = deliveries.map((d) => fromFile(d, source.secrets));
    const triggers = [...new Set(all.map((d) => d.trigger_id).filter((t): t is string => typeof t === 'string' && t.startsWith(which)))];
    const trigger = triggers.includes(which) ? which : triggers.length === 1 ? triggers[0] : undefined;
    if (triggers.length > 1 && !trigger) throw ambiguous(which, triggers);
    const byTrigger = all.filter((d) => d.trigger_id === trigger);
    if (!byTrigger.length) throw notFound('a file name, or a Trigger-Id or the start of one');
    const verifiedOnes = byTrigger.filter((d) => d.outcome !== 'unverified');
    const pick = verifiedOnes.length ? verifiedOnes : byTrigger;
    return { found: pick.at(-1)!, others: pick.length - 1 };
  }
  const store = await openStore(source);
  try {
    const id = /^#?(\d+)$/.exec(which);
    if (id) {
      const row = await store.historyOne(Number(id[1]));
      if (row && options.verifiedOnly && !row.verified) {
        const r = row.record as unknown as ReceiverEvent;
        throw new NotVerifiedError(`#${row.id} is a request that did not verify (${r.outcome}${r.message ? `: ${r.message}` : ''}): only verified deliveries are replayed.`, {
          hint: "What did not verify is never signed with the webhook's secret. `wxhooks deliveries list --store URL --outcome verified` shows what can be.",
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
        throw new NotVerifiedError(
          `No verified delivery of "${which}" is kept; ${claims} request${claims === 1 ? '' : 's'} that did not verify claimed that Trigger-Id, and ${claims === 1 ? 'it is' : 'they are'} never replayed.`,
          {
            hint: 'A request that does not verify may carry any Trigger-Id: it is no attempt of that delivery.',
          },
        );
      }
      throw notFound('a history id such as #12, or a Trigger-Id or the start of one');
    }
    return { found: fromRow(rows.at(-1)!), others: rows.length - 1 };
  } finally {
    await store.close();
  }
}
