import { isUtf8 } from 'node:buffer';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { mkdir, readdir } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import { UsageError } from '../errors.js';
import type { ReceiverEvent } from './event.js';
import { parseBodyObject } from '../signing/json-body.js';
import { LAYOUT_NAMES, type LayoutName } from '../signing/layouts.js';
import { verifyDelivery } from '../signing/verify.js';
import { keptValue, readKept } from '../store/kept.js';
import { idText } from '../util/bytes.js';
import { createNewFile, ensureWritableDir, FileRefusedError, fsReason, readInputFile as read, readRegularFile } from '../util/files.js';

/** A delivery as `listen --save-dir` writes it, and `verify` and `send` read it back. */
export interface SavedDelivery {
  wxhooks_delivery: 1;
  received_at: string;
  method: string;
  path: string;
  headers: Record<string, string>;
  /** The body as text, when it is valid UTF-8 that round-trips byte for byte. */
  body?: string;
  /** Otherwise the exact bytes, in base64. */
  body_base64?: string;
  /** The signature layout that verified it (files saved before session 6 have none: they were verified too). */
  layout?: string;
  /**
   * What shows that listen verified it: an HMAC of what was saved, with a key only the store folder holds
   * (save-key.json). A file without it (planted, changed, saved elsewhere or by an older wxhooks) is not
   * taken as verified (#32.9).
   */
  verified_mark?: string;
}

/** Headers as one text each (several values joined as HTTP joins them). */
export function flatHeaders(headers: Record<string, string | string[] | undefined> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

export function savedMeta(receivedAt: string, method: string, path: string, headers: Record<string, string | string[] | undefined>, layout?: string): SavedMeta {
  return { wxhooks_delivery: 1, received_at: receivedAt, method, path, headers: flatHeaders(headers), ...(layout ? { layout } : {}) };
}

export function savedBody(saved: SavedDelivery): Buffer {
  if (saved.body_base64 !== undefined) return Buffer.from(saved.body_base64, 'base64');
  return Buffer.from(saved.body ?? '', 'utf8');
}

const isText = (v: unknown) => typeof v === 'string';
const optionalText = (v: unknown) => v === undefined || typeof v === 'string';

/** Whether a parsed file has the shape of a saved delivery (every field the reader uses, of its type). */
export function isSavedDelivery(value: unknown): value is SavedDelivery {
  if (typeof value !== 'object' || value === null) return false;
  const v = value as Record<string, unknown>;
  const headers = v.headers;
  return (
    v.wxhooks_delivery === 1 &&
    isText(v.received_at) &&
    isText(v.method) &&
    isText(v.path) &&
    typeof headers === 'object' &&
    headers !== null &&
    !Array.isArray(headers) &&
    Object.values(headers).every(isText) &&
    optionalText(v.body) &&
    optionalText(v.body_base64) &&
    optionalText(v.layout) &&
    optionalText(v.verified_mark)
  );
}

/** The file in the store folder that keeps the key `listen --save-dir` marks what it saves with. */
export const SAVE_KEY_FILE = 'save-key.json';

/** What a saved delivery's file says besides its body and its mark. */
export type SavedMeta = Omit<SavedDelivery, 'body' | 'body_base64' | 'verified_mark'>;

/**
 * The mark of a saved delivery: HMAC-SHA256, with the store's key, of everything a replay would send
 * (what was received, the layout, the body as it is written: its text's UTF-8, which is the body's own
 * bytes, or its base64). The body is fed as it is, so that no copy of it is made.
 */
function markOf(saved: SavedMeta, field: 'body' | 'body_base64', written: string | Buffer, key: Buffer): string {
  const headers = Object.entries(saved.headers).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const hmac = createHmac('sha256', key);
  hmac.update(JSON.stringify(['wxhooks saved delivery 1', saved.received_at, saved.method, saved.path, headers, saved.layout ?? null, field]));
  hmac.update('\n');
  hmac.update(written);
  return hmac.digest('base64url');
}

const markOfFile = (saved: SavedDelivery, key: Buffer): string =>
  saved.body_base64 !== undefined ? markOf(saved, 'body_base64', saved.body_base64, key) : markOf(saved, 'body', saved.body ?? '', key);

/** Whether a saved delivery carries the mark of this store's listen (constant-time). */
export function isMarked(saved: SavedDelivery, key: Buffer | undefined): boolean {
  if (!key || saved.verified_mark === undefined) return false;
  const given = Buffer.from(saved.verified_mark);
  const wanted = Buffer.from(markOfFile(saved, key));
  return given.length === wanted.length && timingSafeEqual(given, wanted);
}

/**
 * The layout a saved delivery shows it verified with, or undefined: the mark of this store's listen, else
 * (a file saved elsewhere, or by an older wxhooks) its own signature, checked now with one of `secrets`.
 * Its timestamp is not held to a window: what the check proves is that the service signed these bytes,
 * and a replay signs them afresh with the time of the replay.
 */
export function provenLayout(saved: SavedDelivery, key: Buffer | undefined, secrets: readonly string[]): string | undefined {
  if (isMarked(saved, key)) return saved.layout ?? 'standard';
  if (!secrets.length) return undefined;
  const pinned = LAYOUT_NAMES.includes(saved.layout as LayoutName) ? (saved.layout as LayoutName) : 'auto';
  const result = verifyDelivery({ secret: secrets, headers: saved.headers, body: savedBody(saved), scheme: pinned, tolerance: Number.MAX_SAFE_INTEGER, diagnose: false });
  return result.ok ? result.layout : undefined;
}

/** What to say of a saved delivery that shows no verification: why it is not signed again, and what to do. */
export function unprovenError(file: string, secretsGiven: boolean): { message: string; hint: string } {
  return {
    message: `${basename(file)} carries no mark of a delivery this store's listen verified (it was put there by hand or by another user, changed since, or saved elsewhere or by an older wxhooks)${secretsGiven ? ', and its own signature does not verify with the secret given' : ''}: it is not signed again.`,
    hint: "Only what verified is signed with the webhook's secret. If it is a delivery you received, give the secret it was signed with (`wxhooks verify FILE --webhook ID` checks it); a file saved by `listen --save-dir` with this store folder (WXHOOKS_CONFIG_DIR) carries the mark.",
  };
}

/** The key each save-dir's marks are made with, from its store folder: set by openSaveDir, read by saveDelivery. */
const markKeys = new Map<string, Buffer>();

/**
 * Readies a `--save-dir` for listen: writable (else a usage error, exit 2), and the key that marks what
 * is saved there taken from the store folder (made the first time; another user's is refused, exit 2).
 * saveDelivery marks every file it writes into `dir` with it. If the key cannot be kept (a read-only
 * store folder: listen may not need it otherwise, with a postgres store), it is used for this session
 * only, and the warning returned says what that means.
 */
export async function openSaveDir(dir: string, storeDir: string): Promise<string | undefined> {
  await ensureWritableDir(dir, '--save-dir');
  const kept = await keptValue(storeDir, SAVE_KEY_FILE, () => randomBytes(32).toString('base64url'));
  markKeys.set(resolve(dir), Buffer.from(kept.value, 'base64url'));
  if (!kept.kept) {
    return `the key that marks what --save-dir saves as verified could not be kept in ${storeDir} (${kept.problem}): once listen stops, its files show they verified only by their signature (give --webhook or --secret-env to deliveries and runs).`;
  }
  return kept.warning;
}

/** The key what listen saves into `dir` is marked with (openSaveDir), if the folder was opened so. */
export const saveKeyOf = (dir: string): Buffer | undefined => markKeys.get(resolve(dir));

/** The key of the store folder `storeDir` that marks saved deliveries, or undefined if it has none yet. */
export async function readSaveKey(storeDir: string): Promise<Buffer | undefined> {
  const value = await readKept(storeDir, SAVE_KEY_FILE);
  return value ? Buffer.from(value, 'base64url') : undefined;
}

/**
 * Writes one delivery into `dir` as a new file (never over another: two deliveries in the same
 * millisecond with the same ids get `-2`, `-3`...), marked as verified when the folder was opened by
 * openSaveDir; returns the file's path. Not synced to the disk: a saved delivery is a copy to look at,
 * and the processed pair, not this file, is what must survive.
 */
export async function saveDelivery(dir: string, saved: SavedMeta, body: Buffer, name: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 120);
  return createNewFile(dir, `${saved.received_at.replace(/[:.]/g, '-')}-${safe}`, '.json', savedFileBytes(saved, body, saveKeyOf(dir)), { sync: false });
}

/**
 * A saved delivery's file, byte for byte what `JSON.stringify(file, null, 2)` gives, made from the body's
 * own bytes: the body is escaped into the one buffer written (#32.6). Made as strings, a 1 MiB body was
 * four copies (its text, the round-trip check, the JSON text, its UTF-8) where --max-inflight counts two:
 * 300 of them at once took listen's peak RSS to 563-578 MiB at the default 256 MiB; 251-270 MiB so.
 */
export function savedFileBytes(saved: SavedMeta, body: Buffer, key: Buffer | undefined): Buffer {
  const text = isUtf8(body); // valid UTF-8 is exactly what round-trips through a string, byte for byte
  const field = text ? 'body' : 'body_base64';
  const written = text ? body : Buffer.from(body.toString('base64'), 'latin1');
  const file: SavedDelivery = { wxhooks_delivery: 1, received_at: saved.received_at, method: saved.method, path: saved.path, headers: saved.headers, [field]: '' };
  if (saved.layout) file.layout = saved.layout;
  if (key) file.verified_mark = markOf(saved, field, written, key);
  // the body's place: at the top level (two spaces), on a line of its own; no header can hold a raw
  // newline in JSON, so this text is found once, where the body goes
  const json = JSON.stringify(file, null, 2);
  const at = json.indexOf(`\n  "${field}": ""`) + `\n  "${field}": "`.length;
  return Buffer.concat([Buffer.from(json.slice(0, at)), text ? jsonEscaped(body) : written, Buffer.from(json.slice(at))]);
}

/** What JSON.stringify does to a string's characters, on its UTF-8 bytes: quote, backslash and controls escaped; the rest as they are. */
function jsonEscaped(bytes: Buffer): Buffer {
  let extra = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    if (b === 0x22 || b === 0x5c || b === 0x08 || b === 0x09 || b === 0x0a || b === 0x0c || b === 0x0d) extra += 1;
    else if (b < 0x20) extra += 5;
  }
  if (extra === 0) return bytes;
  const out = Buffer.allocUnsafe(bytes.length + extra);
  let o = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i]!;
    const short = SHORT_ESCAPES.get(b);
    if (short !== undefined) {
      out[o++] = 0x5c;
      out[o++] = short;
    } else if (b < 0x20) {
      o += out.write(`\\u00${b < 0x10 ? '0' : ''}${b.toString(16)}`, o, 'latin1');
    } else out[o++] = b;
  }
  return out;
}

/** The bytes JSON writes as a backslash and one letter. */
const SHORT_ESCAPES = new Map<number, number>([
  [0x22, 0x22],
  [0x5c, 0x5c],
  [0x08, 0x62],
  [0x09, 0x74],
  [0x0a, 0x6e],
  [0x0c, 0x66],
  [0x0d, 0x72],
]);

/**
 * The most a saved delivery's file may hold to be read back. listen's default --max-body is 25 MiB, and
 * a body is written as text (a JSON body's quotes escaped: under twice its size) or base64 (4/3): 128 MiB
 * holds any of those whole. A larger file is passed over (and said), never read.
 */
export const SAVED_FILE_LIMIT: number = 128 * 1024 * 1024;

/**
 * One saved delivery's file, read safely: a regular file only (a FIFO does not hang it, a device is
 * not read), at most SAVED_FILE_LIMIT, and a symbolic link followed only when `follow` (a file the user
 * named; never inside a folder being listed). Throws a FileRefusedError, a file-system error, or an Error
 * that says it is not a saved delivery.
 */
export async function readSavedFile(file: string, follow = false): Promise<SavedDelivery> {
  const { data } = await readRegularFile(file, { maxBytes: SAVED_FILE_LIMIT, what: 'a saved delivery', follow });
  let parsed: unknown;
  try {
    parsed = JSON.parse(data.toString('utf8'));
  } catch {
    throw new Error('not JSON');
  }
  if (!isSavedDelivery(parsed)) throw new Error('not a delivery saved by `listen --save-dir`');
  return parsed;
}

/** A headers file: a JSON object, or HTTP-style "Name: value" lines (a status line is skipped). */
export function parseHeadersText(text: string): Record<string, string> {
  const trimmed = text.trim();
  if (trimmed.startsWith('{')) {
    const parsed = JSON.parse(trimmed) as Record<string, unknown>;
    return Object.fromEntries(Object.entries(parsed).map(([k, v]) => [k.toLowerCase(), Array.isArray(v) ? v.join(', ') : String(v)]));
  }
  const out: Record<string, string> = {};
  for (const raw of trimmed.split(/\r?\n/)) {
    const colon = raw.indexOf(':');
    if (colon <= 0 || /^HTTP\//i.test(raw)) continue;
    out[raw.slice(0, colon).trim().toLowerCase()] = raw.slice(colon + 1).trim();
  }
  return out;
}

/** A captured delivery read back: from a saved file (with when it was received), or from a headers file and a body file. */
export type Captured =
  | { headers: Record<string, string>; body: Buffer; receivedAt: number; saved: SavedDelivery }
  | { headers: Record<string, string>; body: Buffer; receivedAt: undefined; saved: undefined };

/** The headers and raw body of a captured delivery: a saved file, or a headers file and a body file. */
export async function readCaptured(saved: string | undefined, headersFile?: string, bodyFile?: string): Promise<Captured> {
  if (saved !== undefined) {
    if (headersFile || bodyFile) throw new UsageError('Give a saved delivery, or --headers and --body, not both.');
    let parsed: SavedDelivery;
    try {
      parsed = await readSavedFile(saved, true);
    } catch (err) {
      if (err instanceof FileRefusedError) throw new UsageError(`Cannot read the saved delivery "${saved}": ${err.why}.`);
      if ((err as NodeJS.ErrnoException).code) throw new UsageError(`Cannot read the saved delivery "${saved}": ${fsReason(err)}.`);
      throw new UsageError(`"${saved}" is not a delivery saved by \`listen --save-dir\` (${(err as Error).message}).`);
    }
    return { headers: parsed.headers, body: savedBody(parsed), receivedAt: Date.parse(parsed.received_at), saved: parsed };
  }
  if (!headersFile || !bodyFile) throw new UsageError('Give a saved delivery, or both --headers FILE and --body FILE.');
  let headers: Record<string, string>;
  try {
    headers = parseHeadersText((await read(headersFile, 'the headers file')).toString('utf8'));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`The headers file "${headersFile}" is neither a JSON object nor "Name: value" lines.`);
  }
  return { headers, body: await read(bodyFile, 'the body file'), receivedAt: undefined, saved: undefined };
}

/** A delivery read back from a `--save-dir` folder: its file, what was saved, and its body as an object (if it is one). */
export interface SavedFile {
  file: string;
  saved: SavedDelivery;
  payload: Record<string, unknown> | undefined;
  /** It carries the mark of this store's listen (isMarked): it verified. */
  marked: boolean;
}

/** A file of a `--save-dir` folder that was passed over, and why, in words. */
export interface SkippedFile {
  file: string;
  why: string;
}

/**
 * Every delivery saved in a `--save-dir` folder, in the order they were received (the file names start
 * with the time), each marked or not with `key` (the store's: readSaveKey). Files that cannot be read
 * back safely (not a regular file, a symbolic link, over SAVED_FILE_LIMIT) or are not saved deliveries
 * are passed over, in `skipped` with why.
 */
export async function readSavedDir(dir: string, key?: Buffer): Promise<{ deliveries: SavedFile[]; skipped: SkippedFile[] }> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json')).sort();
  } catch (err) {
    throw new UsageError(`Cannot read the folder "${dir}": ${fsReason(err)}.`, { hint: 'Give the folder `listen --save-dir` wrote to.' });
  }
  const deliveries: SavedFile[] = [];
  const skipped: SkippedFile[] = [];
  for (const name of names) {
    const file = join(dir, name);
    try {
      const saved = await readSavedFile(file);
      deliveries.push({ file, saved, payload: parseBodyObject(savedBody(saved)), marked: isMarked(saved, key) });
    } catch (err) {
      const why = err instanceof FileRefusedError ? err.why : (err as NodeJS.ErrnoException).code ? fsReason(err) : (err as Error).message;
      skipped.push({ file, why });
    }
  }
  return { deliveries, skipped };
}

/** What a command says of the files it passed over: a line, then one a file (the first 10). */
export function skippedLines(skipped: readonly SkippedFile[], where: string): string[] {
  if (!skipped.length) return [];
  const shown = skipped.slice(0, 10).map((s) => `  ${basename(s.file)}: ${s.why}`);
  if (skipped.length > 10) shown.push(`  … and ${skipped.length - 10} more`);
  return [`warning: ${skipped.length} file${skipped.length === 1 ? '' : 's'} in ${where} passed over:`, ...shown];
}

/** What a delivery's body says of its model run (the fields the run tracker reads). */
export function runFactsOf(payload: Record<string, unknown> | undefined): { type?: string; model?: string; initialization_time?: string; forecast_hour?: number } {
  const data = (typeof payload?.data === 'object' && payload.data !== null ? payload.data : {}) as Record<string, unknown>;
  return {
    type: idText(payload?.type),
    model: idText(data.model),
    initialization_time: idText(data.initialization_time),
    forecast_hour: typeof data.forecast_hour === 'number' ? data.forecast_hour : undefined,
  };
}

/**
 * A saved delivery as the report `listen` made of it, so that a restarted `listen --inspect --save-dir`
 * shows what it received before: accepted, with the layout that verified it, when it shows it verified
 * (provenLayout: the store's mark, or its signature with `secrets`); else a request that did not verify,
 * which only claims its Trigger-Id and is never signed again.
 */
export function savedAsEvent(d: SavedFile, key: Buffer | undefined, secrets: readonly string[]): ReceiverEvent {
  const facts = runFactsOf(d.payload);
  const p = d.payload;
  const base = { time: d.saved.received_at, method: d.saved.method, path: d.saved.path, size: savedBody(d.saved).length, type: facts.type, saved_to: d.file };
  const trigger = idText(p?.trigger_id) ?? d.saved.headers['trigger-id'];
  const layout = provenLayout(d.saved, key, secrets);
  if (layout === undefined) {
    const { message, hint } = unprovenError(d.file, secrets.length > 0);
    return { ...base, outcome: 'unverified', status: 0, claimed_trigger_id: trigger?.slice(0, 200), reason: 'not_marked', message, hint };
  }
  return {
    ...base,
    outcome: 'accepted',
    status: 200,
    webhook_id: idText(p?.webhook_id),
    subscription_id: idText(p?.subscription_id),
    trigger_id: trigger,
    model: facts.model,
    initialization_time: facts.initialization_time,
    forecast_hour: facts.forecast_hour,
    layout,
    ...(p?.test === true ? { test: true as const } : {}),
  };
}

/**
 * The whole body of a verified delivery kept in part in the history, read back from the file it was saved
 * to; only if the file still shows it verified (it may have been replaced since): else why not, in words.
 */
export async function readProvenBody(file: string, key: Buffer | undefined, secrets: readonly string[]): Promise<{ body: Buffer } | { error: string }> {
  let saved: SavedDelivery;
  try {
    saved = await readSavedFile(file);
  } catch (err) {
    return {
      error: `its saved file ${basename(file)} cannot be read back (${err instanceof FileRefusedError ? err.why : (err as NodeJS.ErrnoException).code ? fsReason(err) : (err as Error).message})`,
    };
  }
  if (provenLayout(saved, key, secrets) === undefined) return { error: unprovenError(file, secrets.length > 0).message };
  return { body: savedBody(saved) };
}
