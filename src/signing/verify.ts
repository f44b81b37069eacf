import { timingSafeEqual } from 'node:crypto';
import { LAYOUTS, hmac, layoutNamed, type Layout, type Scheme } from './layouts.js';
import { LARGE_BODY, parseBodyObject } from './json-body.js';
import { parseTimestamp } from './timestamp.js';

export type HeaderSource = Record<string, string | string[] | undefined> | { get(name: string): string | null };

export type { Scheme };

export interface VerifyOptions {
  /** The webhook's secret, or several during a rotation (any one may match). */
  secret: string | readonly string[];
  headers: HeaderSource;
  /** The raw body as received. A string is taken as its UTF-8 bytes; prefer the bytes. */
  body: Uint8Array | string;
  /** `auto` (default) tries every layout that signs the timestamp; a name pins one. */
  scheme?: Scheme;
  /** Seconds a timestamp may be off the clock, past or future (default 300). */
  tolerance?: number;
  /** The clock, in milliseconds (default `Date.now()`). */
  now?: number | Date;
  /** The layout table (default: the built-in one); a test, or a user with a sender of their own, may add rows. */
  layouts?: readonly Layout[];
  /**
   * After a failure, look further for why (default true): would the body match had it not been
   * re-formatted, or in a layout not tried? That costs several times a verification, so a receiver facing
   * anonymous senders does it only now and then (`Verifier`'s `diagnosePerMinute`).
   */
  diagnose?: boolean;
}

export type VerifyFailureReason =
  | 'missing_header'
  | 'invalid_timestamp'
  | 'timestamp_out_of_window'
  | 'malformed_signature'
  | 'no_match'
  | 'body_reformatted'
  | 'not_json_object';

export interface VerifySuccess {
  ok: true;
  /** The name of the layout whose signature matched. */
  layout: string;
  /** What that layout's signature covers besides the body. */
  signs: { timestamp: boolean; triggerId: boolean };
  triggerId: string;
  /** Seconds since the epoch. */
  timestamp: number;
  /**
   * The body, parsed: always a JSON object. Above 1 MiB it holds only the
   * members under 64 KiB (and those of `data`): parse the raw body yourself
   * if you need all of a large one.
   */
  payload: Record<string, unknown>;
  /** Which of the secrets matched (0 for a single secret). */
  secretIndex: number;
  /** Set when the layout does not protect against replays (`hex-body`). */
  warning?: string;
}

export interface VerifyFailure {
  ok: false;
  reason: VerifyFailureReason;
  /** What went wrong, in words a person can act on. */
  message: string;
  /** What to do about it. */
  hint?: string;
  /** The header at fault, when one is. */
  header?: string;
  /** For `timestamp_out_of_window`: local clock minus the timestamp, in seconds. */
  skewSeconds?: number;
  /** Set when no signature matched and the further look for why was not taken (`diagnose` off, or its budget spent). */
  diagnosisSkipped?: true;
}

export type VerifyResult = VerifySuccess | VerifyFailure;

/** A session's result (`Verifier`): on the first match in auto mode, `pinnedNow` says its layout is now pinned. */
export type SessionVerifyResult = (VerifySuccess & { pinnedNow?: true }) | VerifyFailure;

export const MAX_SIGNATURE_HEADER = 4096;
/** Bodies up to this size are re-serialised, after a failure, to tell "re-formatted on the way" from "wrong secret". */
export const REFORMAT_DIAGNOSIS_MAX = 64 * 1024;

/**
 * A header by its lower-case name first (as Node gives them), then by any casing. Several values are
 * joined with `join` (`, ` as HTTP does; a space for Webhook-Signature, whose entries are space-separated,
 * so that two signature headers are one list whatever their order).
 */
function lookup(headers: HeaderSource, lower: string, name: string, join = ', '): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    return (headers as { get(n: string): string | null }).get(name) ?? undefined;
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let v = record[lower] ?? record[name];
  if (v === undefined) {
    for (const k in record) if (k.toLowerCase() === lower) v = record[k];
  }
  return typeof v === 'string' || v === undefined ? v : v.join(join);
}

function fail(reason: VerifyFailureReason, message: string, extra: Partial<VerifyFailure> = {}): VerifyFailure {
  return { ok: false, reason, message, ...extra };
}

/** The keys a layout derives from each secret (Verifier keeps them; verifyDelivery derives them per call). */
type KeysFor = (row: Layout) => Buffer[][];

function matches(row: Layout, keysFor: KeysFor, signatures: Buffer[], id: string, ts: string, body: Buffer): number {
  const keys = keysFor(row);
  const prefix = row.prefix(id, ts);
  for (let i = 0; i < keys.length; i++) {
    for (const key of keys[i]!) {
      const expected = hmac(key, prefix, body);
      // Every comparison is constant-time, over equal-length buffers only.
      for (const s of signatures) if (s.length === expected.length && timingSafeEqual(s, expected)) return i;
    }
  }
  return -1;
}

/** Other ways the same JSON might have been written before something re-serialised it. */
function reformattings(body: Buffer): Buffer[] {
  if (body.length > REFORMAT_DIAGNOSIS_MAX) return []; // an unauthenticated request must not buy much CPU with a large body
  try {
    const parsed = JSON.parse(body.toString('utf8')) as unknown;
    return [JSON.stringify(parsed), JSON.stringify(parsed, null, 2), JSON.stringify(parsed, null, 4)]
      .map((t) => Buffer.from(t, 'utf8'))
      .filter((b) => !b.equals(body));
  } catch {
    return [];
  }
}

/** The rows a scheme tries: `auto`, every row that signs the timestamp; a name, that row alone. */
function rowsFor(scheme: Scheme | string, table: readonly Layout[]): Layout[] {
  if (scheme === 'auto') return table.filter((l) => l.signsTimestamp);
  const row = layoutNamed(scheme, table);
  if (!row) throw new TypeError(`unknown signature scheme "${scheme}"`);
  return [row];
}

function secretsOf(secret: string | readonly string[], who: string): string[] {
  const secrets = (typeof secret === 'string' ? [secret] : [...secret]).filter((s) => s.length > 0);
  if (!secrets.length) throw new TypeError(`${who} needs a non-empty secret`);
  return secrets;
}

/**
 * Verifies one delivery, in a fixed order: headers present, timestamp
 * well-formed and within the window (past or future), an HMAC over the raw
 * bytes compared in constant time, then the body a JSON object.
 */
export function verifyDelivery(options: VerifyOptions): VerifyResult {
  const secrets = secretsOf(options.secret, 'verifyDelivery');
  const table = options.layouts ?? LAYOUTS;
  const rows = rowsFor(options.scheme ?? 'auto', table);
  const nowMs = options.now === undefined ? Date.now() : +options.now;
  const body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : Buffer.from(options.body.buffer, options.body.byteOffset, options.body.byteLength);
  const keysFor: KeysFor = (row) => secrets.map((secret) => row.keys(secret));
  const rules: Rules = { keysFor, secrets, rows, table, tolerance: options.tolerance ?? 300, diagnose: () => options.diagnose !== false, shallowAbove: LARGE_BODY };
  return check(rules, nowMs, options.headers, body);
}

function missing(name: string, value: string | undefined): VerifyFailure {
  return fail('missing_header', `The ${name} header is ${value === undefined ? 'missing' : 'empty'}.`, {
    header: name,
    hint: 'Every delivery of the service carries Trigger-Id, Webhook-Timestamp and Webhook-Signature; a proxy in between may have dropped it.',
  });
}

/** The checks themselves, on normalised inputs (so a session's Verifier pays for normalising once). */
/** What one verification runs with, besides the request: the secrets and their keys, the rows tried, and the rules. */
interface Rules {
  keysFor: KeysFor;
  secrets: readonly string[];
  rows: readonly Layout[];
  table: readonly Layout[];
  tolerance: number;
  /** Whether the further look for why a request failed may be taken now. */
  diagnose: () => boolean;
  /** Bodies larger than this are parsed shallowly: only their small members (src/signing/json-body.ts). */
  shallowAbove: number;
}

function check(rules: Rules, nowMs: number, headers: HeaderSource, body: Buffer): VerifyResult {
  const { keysFor, secrets, rows, table, tolerance, diagnose } = rules;
  const id = lookup(headers, 'trigger-id', 'Trigger-Id');
  if (id === undefined || id.trim() === '') return missing('Trigger-Id', id);
  const ts = lookup(headers, 'webhook-timestamp', 'Webhook-Timestamp');
  if (ts === undefined || ts.trim() === '') return missing('Webhook-Timestamp', ts);
  const sigHeader = lookup(headers, 'webhook-signature', 'Webhook-Signature', ' ');
  if (sigHeader === undefined || sigHeader.trim() === '') return missing('Webhook-Signature', sigHeader);

  const seconds = parseTimestamp(ts);
  if (seconds === undefined) {
    return fail('invalid_timestamp', `Webhook-Timestamp "${ts.slice(0, 40)}" is not a Unix time (10 to 13 ASCII digits, nothing else).`, {
      header: 'Webhook-Timestamp',
    });
  }
  const skew = Math.floor(nowMs / 1000) - seconds;
  if (Math.abs(skew) > tolerance) {
    const off = skew > 0 ? `${skew} s old` : `${-skew} s in the future`;
    return fail('timestamp_out_of_window', `The timestamp is ${off}; at most ${tolerance} s either way is accepted.`, {
      header: 'Webhook-Timestamp',
      skewSeconds: skew,
      hint:
        Math.abs(skew) < 3600
          ? "A replayed or long-delayed delivery, or a clock that is off: check this machine's clock (and the sender's)."
          : 'Far outside the window: a replayed capture, or a timestamp in the wrong unit.',
    });
  }

  if (sigHeader.length > MAX_SIGNATURE_HEADER) {
    return fail('malformed_signature', `The Webhook-Signature header is ${sigHeader.length} bytes long (at most ${MAX_SIGNATURE_HEADER} are read).`, {
      header: 'Webhook-Signature',
    });
  }

  const problems: string[] = [];
  const parsedRows: { row: Layout; signatures: Buffer[] }[] = [];
  for (const row of rows) {
    const parsed = row.parse(sigHeader);
    if (parsed.problems.length) problems.push(...parsed.problems);
    if (!parsed.signatures.length) continue;
    if (parsed.timestamp !== undefined && parsed.timestamp !== ts) {
      problems.push(`its t=${parsed.timestamp.slice(0, 20)} is not the Webhook-Timestamp`);
      continue;
    }
    const index = matches(row, keysFor, parsed.signatures, id, ts, body);
    if (index !== -1) return accept(row, id, seconds, body, index, rules.shallowAbove);
    parsedRows.push({ row, signatures: parsed.signatures });
  }

  // A row that was not tried because it does not sign the timestamp (hex-body) may match: say so, rather than "wrong secret".
  const unsigned = () => {
    for (const row of table) {
      if (rows.includes(row) || row.signsTimestamp) continue;
      const parsed = row.parse(sigHeader);
      if (parsed.signatures.length && matches(row, keysFor, parsed.signatures, id, ts, body) !== -1) {
        return fail('no_match', `The signature is in the ${row.name} layout, which does not sign the timestamp or Trigger-Id, so a captured delivery could be replayed.`, {
          hint: `wxhooks accepts it only when pinned: --scheme ${row.name}.`,
        });
      }
    }
    return undefined;
  };
  const malformed = () =>
    fail('malformed_signature', `The Webhook-Signature header is malformed: ${problems[0] ?? `it is not in the ${rows.map((r) => r.name).join(', ')} layout${rows.length > 1 ? 's' : ''}`}.`, {
      header: 'Webhook-Signature',
      hint: 'The service writes it as "v1,<base64>" (several separated by spaces during a key rotation).',
    });
  const whitespace = secrets.some((s) => s !== s.trim());
  const noMatch = () =>
    fail('no_match', `No signature matched with ${secrets.length > 1 ? 'these secrets' : 'this secret'} (tried ${parsedRows.map((p) => p.row.name).join(', ')}).`, {
      header: 'Webhook-Signature',
      hint: whitespace
        ? 'The secret has leading or trailing whitespace; remove it.'
        : "Is it the secret of the webhook that sent this (wxhooks secret show ID)? A re-created webhook has a new secret. Or the body, the timestamp or the Trigger-Id was changed on the way.",
    });
  // The further look for why costs several verifications (a parse, three serialisations, their HMACs):
  // taken only when asked, so that a refused request costs no more than a verified one.
  if (!diagnose()) {
    const f = parsedRows.length ? noMatch() : malformed();
    f.diagnosisSkipped = true;
    return f;
  }
  if (!parsedRows.length) return unsigned() ?? malformed();
  for (const candidate of reformattings(body)) {
    for (const { row, signatures } of parsedRows) {
      if (matches(row, keysFor, signatures, id, ts, candidate) !== -1) {
        return fail('body_reformatted', 'The signature matches the same JSON written differently: something between the service and here parsed the body and re-serialised it.', {
          hint: 'Verify the raw bytes as received: a framework\'s JSON body parser (or a forwarder) must not touch the body before verification.',
        });
      }
    }
  }
  return unsigned() ?? noMatch();
}

function accept(row: Layout, triggerId: string, timestamp: number, body: Buffer, secretIndex: number, shallowAbove: number): VerifyResult {
  const payload = parseBodyObject(body, shallowAbove);
  if (!payload) return fail('not_json_object', 'The signature is valid, but the body is not a JSON object.');
  const result: VerifySuccess = {
    ok: true,
    layout: row.name,
    signs: { timestamp: row.signsTimestamp, triggerId: row.signsTriggerId },
    triggerId,
    timestamp,
    payload,
    secretIndex,
  };
  if (!row.signsTimestamp) result.warning = `layout ${row.name} does not sign the timestamp or Trigger-Id: a captured delivery can be replayed.`;
  return result;
}

/**
 * Verification for a session (`listen`): with `auto`, the first layout that
 * matches is pinned for every later delivery.
 */
export class Verifier {
  pinned?: string;
  readonly scheme: Scheme | string;
  /** What every verification of the session runs with (its rows change once, when a layout is pinned). */
  private readonly rules: Rules;
  /** Further looks for why a request failed still allowed now (a bucket that fills at `diagnosePerMinute` a minute), and when last filled. */
  private diagnoses: number;
  private filledAt = 0;
  private readonly perMinute: number;
  /** The time of the verification under way. */
  private now = 0;

  /**
   * `diagnosePerMinute`: how many further looks for why a request failed are taken a minute (default: every
   * time). `shallowAbove`: bodies larger than this are parsed for their small members only (default
   * 1 MiB): a receiver that needs only a delivery's ids keeps the payload of a large forecast small.
   */
  constructor(options: Omit<VerifyOptions, 'headers' | 'body' | 'now' | 'diagnose'> & { diagnosePerMinute?: number; shallowAbove?: number }) {
    const secrets = secretsOf(options.secret, 'Verifier');
    this.perMinute = options.diagnosePerMinute ?? Infinity;
    this.diagnoses = this.perMinute;
    this.scheme = options.scheme ?? 'auto';
    if (this.scheme !== 'auto') this.pinned = this.scheme;
    const table = options.layouts ?? LAYOUTS;
    // derived keys, per layout: a session keeps one list of secrets, so it derives them once
    const keys = new Map<Layout, Buffer[][]>();
    this.rules = {
      keysFor: (row) => {
        let k = keys.get(row);
        if (!k) keys.set(row, (k = secrets.map((secret) => row.keys(secret))));
        return k;
      },
      secrets,
      rows: rowsFor(this.scheme, table),
      table,
      tolerance: options.tolerance ?? 300,
      diagnose: () => this.mayDiagnose(this.now),
      shallowAbove: options.shallowAbove ?? LARGE_BODY,
    };
  }

  /** Whether a further look for why a request failed may be taken now: at most `diagnosePerMinute` a minute. */
  private mayDiagnose(now: number): boolean {
    if (this.perMinute === Infinity) return true;
    this.diagnoses = Math.min(this.perMinute, this.diagnoses + (Math.max(0, now - this.filledAt) / 60_000) * this.perMinute);
    this.filledAt = now;
    if (this.diagnoses < 1) return false;
    this.diagnoses--;
    return true;
  }

  verify(headers: HeaderSource, body: Buffer, now = Date.now()): SessionVerifyResult {
    this.now = now;
    const result = check(this.rules, now, headers, body);
    if (result.ok && !this.pinned) {
      this.pinned = result.layout;
      this.rules.rows = rowsFor(result.layout, this.rules.table);
      return { ...result, pinnedNow: true };
    }
    if (!result.ok && this.pinned && this.scheme === 'auto' && (result.reason === 'malformed_signature' || result.reason === 'no_match')) {
      return { ...result, hint: `${result.hint ? `${result.hint} ` : ''}This session is pinned to the ${this.pinned} layout, which the first verified delivery used.` };
    }
    return result;
  }
}
