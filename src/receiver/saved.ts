import { mkdir, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { UsageError } from '../errors.js';
import type { ReceiverEvent } from './event.js';
import { parseBodyObject } from '../signing/json-body.js';
import { idText, textOrBase64 } from '../util/bytes.js';
import { createNewFile, fsReason, readInputFile as read } from '../util/files.js';

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
}

/** Headers as one text each (several values joined as HTTP joins them). */
export function flatHeaders(headers: Record<string, string | string[] | undefined> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

export function toSaved(receivedAt: string, method: string, path: string, headers: Record<string, string | string[] | undefined>, body: Buffer, layout?: string): SavedDelivery {
  return { wxhooks_delivery: 1, received_at: receivedAt, method, path, headers: flatHeaders(headers), ...textOrBase64(body), ...(layout ? { layout } : {}) };
}

export function savedBody(saved: SavedDelivery): Buffer {
  if (saved.body_base64 !== undefined) return Buffer.from(saved.body_base64, 'base64');
  return Buffer.from(saved.body ?? '', 'utf8');
}

export function isSavedDelivery(value: unknown): value is SavedDelivery {
  return typeof value === 'object' && value !== null && (value as SavedDelivery).wxhooks_delivery === 1 && typeof (value as SavedDelivery).headers === 'object';
}

/**
 * Writes one delivery into `dir` as a new file (never over another: two deliveries in the same
 * millisecond with the same ids get `-2`, `-3`...); returns the file's path. Not synced to the disk: a
 * saved delivery is a copy to look at, and the processed pair, not this file, is what must survive.
 */
export async function saveDelivery(dir: string, saved: SavedDelivery, name: string): Promise<string> {
  await mkdir(dir, { recursive: true });
  const safe = name.replace(/[^A-Za-z0-9._-]/g, '_').slice(0, 120);
  return createNewFile(dir, `${saved.received_at.replace(/[:.]/g, '-')}-${safe}`, '.json', JSON.stringify(saved, null, 2), { sync: false });
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

/** The headers and raw body of a captured delivery: a saved file, or a headers file and a body file. */
export async function readCaptured(saved: string | undefined, headersFile?: string, bodyFile?: string) {
  if (saved !== undefined) {
    if (headersFile || bodyFile) throw new UsageError('Give a saved delivery, or --headers and --body, not both.');
    let parsed: unknown;
    try {
      parsed = JSON.parse((await read(saved, 'the saved delivery')).toString('utf8'));
    } catch (err) {
      if (err instanceof UsageError) throw err;
      throw new UsageError(`"${saved}" is not a delivery saved by \`listen --save-dir\` (not JSON).`);
    }
    if (!isSavedDelivery(parsed)) throw new UsageError(`"${saved}" is not a delivery saved by \`listen --save-dir\`.`);
    return { headers: parsed.headers as Record<string, string>, body: savedBody(parsed), receivedAt: Date.parse(parsed.received_at) };
  }
  if (!headersFile || !bodyFile) throw new UsageError('Give a saved delivery, or both --headers FILE and --body FILE.');
  let headers: Record<string, string>;
  try {
    headers = parseHeadersText((await read(headersFile, 'the headers file')).toString('utf8'));
  } catch (err) {
    if (err instanceof UsageError) throw err;
    throw new UsageError(`The headers file "${headersFile}" is neither a JSON object nor "Name: value" lines.`);
  }
  return { headers, body: await read(bodyFile, 'the body file'), receivedAt: undefined };
}


/** A delivery read back from a `--save-dir` folder: its file, what was saved, and its body as an object (if it is one). */
export interface SavedFile {
  file: string;
  saved: SavedDelivery;
  payload: Record<string, unknown> | undefined;
}

/**
 * Every delivery saved in a `--save-dir` folder, in the order they were received (the file names start
 * with the time). Files that are not saved deliveries are passed over, and counted in `skipped`.
 */
export async function readSavedDir(dir: string): Promise<{ deliveries: SavedFile[]; skipped: number }> {
  let names: string[];
  try {
    names = (await readdir(dir)).filter((n) => n.endsWith('.json')).sort();
  } catch (err) {
    throw new UsageError(`Cannot read the folder "${dir}": ${fsReason(err)}.`, { hint: 'Give the folder `listen --save-dir` wrote to.' });
  }
  const deliveries: SavedFile[] = [];
  let skipped = 0;
  for (const name of names) {
    const file = join(dir, name);
    try {
      const saved = JSON.parse(await readFile(file, 'utf8')) as unknown;
      if (!isSavedDelivery(saved)) throw new Error('not a saved delivery');
      deliveries.push({ file, saved, payload: parseBodyObject(savedBody(saved)) });
    } catch {
      skipped++;
    }
  }
  return { deliveries, skipped };
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
 * A saved delivery as the report `listen` made of it (a verified delivery, accepted): so that a restarted
 * `listen --inspect --save-dir` shows what it received before.
 */
export function savedAsEvent(d: SavedFile): ReceiverEvent {
  const facts = runFactsOf(d.payload);
  const p = d.payload;
  return {
    time: d.saved.received_at,
    outcome: 'accepted',
    status: 200,
    method: d.saved.method,
    path: d.saved.path,
    size: savedBody(d.saved).length,
    type: facts.type,
    webhook_id: idText(p?.webhook_id),
    subscription_id: idText(p?.subscription_id),
    trigger_id: idText(p?.trigger_id) ?? d.saved.headers['trigger-id'],
    model: facts.model,
    initialization_time: facts.initialization_time,
    forecast_hour: facts.forecast_hour,
    layout: d.saved.layout ?? 'standard',
    saved_to: d.file,
    ...(p?.test === true ? { test: true as const } : {}),
  };
}
