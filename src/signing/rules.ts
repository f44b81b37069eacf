import { layoutNamed, type Layout, type Scheme } from './layouts.js';
import { parseTimestamp } from './timestamp.js';

/**
 * The rules of verification, runtime-neutral: the order of the checks, what each failure says and what
 * to do about it. Two drivers run them, each with its own HMAC: `verifyDelivery` and `Verifier`
 * (src/signing/verify.ts, Node's crypto, synchronous) and `WebVerifier` (src/signing/verify-web.ts, Web
 * Crypto, asynchronous). test/verify-entries.test.ts holds both to the same results over the same vectors.
 */

export type HeaderSource = Record<string, string | string[] | undefined> | { get(name: string): string | null };

export type VerifyFailureReason = 'missing_header' | 'invalid_timestamp' | 'timestamp_out_of_window' | 'malformed_signature' | 'no_match' | 'body_reformatted' | 'not_json_object';

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
   * The body, parsed: always a JSON object. Above 1 MiB (the Node entry) it holds only the
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

export const MAX_SIGNATURE_HEADER = 4096;
/** Bodies up to this size are re-serialised, after a failure, to tell "re-formatted on the way" from "wrong secret". */
export const REFORMAT_DIAGNOSIS_MAX: number = 64 * 1024;
/** Seconds a timestamp may be off the clock, either way, unless told. */
export const DEFAULT_TOLERANCE = 300;
/** How many further looks for why a request failed a receiver facing anonymous senders takes a minute (`listen`, the handlers). */
export const DIAGNOSES_PER_MINUTE = 5;

/**
 * The further looks for why a request failed still allowed: a bucket that fills at `perMinute` a minute
 * (Infinity: every time). Each look costs several verifications, so a receiver facing anonymous senders
 * rations them.
 */
export class DiagnosisBudget {
  private left: number;
  private filledAt = 0;

  constructor(private readonly perMinute: number) {
    this.left = perMinute;
  }

  /** Whether a look may be taken at `now` (ms); takes it if so. */
  take(now: number): boolean {
    if (this.perMinute === Infinity) return true;
    this.left = Math.min(this.perMinute, this.left + (Math.max(0, now - this.filledAt) / 60_000) * this.perMinute);
    this.filledAt = now;
    if (this.left < 1) return false;
    this.left--;
    return true;
  }
}

/**
 * A header by its lower-case name first (as Node gives them), then by any casing. Several values are
 * joined with `join` (`, ` as HTTP does; a space for Webhook-Signature, whose entries are space-separated,
 * so that two signature headers are one list whatever their order). Values a runtime already joined with
 * `, ` (Node's `req.headers`, a `Headers` object) are split there again: no layout's signature holds `, `.
 */
export function lookup(headers: HeaderSource, lower: string, name: string, join = ', '): string | undefined {
  if (typeof (headers as { get?: unknown }).get === 'function') {
    // a Headers object joins repeated headers with ", " itself: for Webhook-Signature, make that the space its entries are separated by
    const v = (headers as { get(n: string): string | null }).get(name);
    return v === null ? undefined : join === ', ' ? v : v.split(', ').join(join);
  }
  const record = headers as Record<string, string | string[] | undefined>;
  let v = record[lower] ?? record[name];
  if (v === undefined) {
    for (const k in record) if (k.toLowerCase() === lower) v = record[k];
  }
  if (v === undefined) return undefined;
  if (typeof v !== 'string') return v.join(join);
  return join === ', ' || !v.includes(', ') ? v : v.split(', ').join(join);
}

function fail(reason: VerifyFailureReason, message: string, extra: Partial<VerifyFailure> = {}): VerifyFailure {
  return { ok: false, reason, message, ...extra };
}

function missing(name: string, value: string | undefined): VerifyFailure {
  return fail('missing_header', `The ${name} header is ${value === undefined ? 'missing' : 'empty'}.`, {
    header: name,
    hint: 'Every delivery of the service carries Trigger-Id, Webhook-Timestamp and Webhook-Signature; a proxy in between may have dropped it.',
  });
}

/** The rows a scheme tries: `auto`, every row that signs the timestamp; a name, that row alone. */
export function rowsFor(scheme: Scheme | string, table: readonly Layout[]): Layout[] {
  if (scheme === 'auto') return table.filter((l) => l.signsTimestamp);
  const row = layoutNamed(scheme, table);
  if (!row) throw new TypeError(`unknown signature scheme "${scheme}"`);
  return [row];
}

export function secretsOf(secret: string | readonly string[], who: string): string[] {
  const secrets = (typeof secret === 'string' ? [secret] : [...secret]).filter((s) => s.length > 0);
  if (!secrets.length) throw new TypeError(`${who} needs a non-empty secret`);
  return secrets;
}

/** A layout's signatures found in the header: to be compared with that layout's HMAC. */
export interface Candidate {
  row: Layout;
  signatures: Uint8Array[];
}

/** What the headers hold, once they passed the checks that need no key. */
export interface Found {
  ok: true;
  id: string;
  ts: string;
  seconds: number;
  sigHeader: string;
  /** The signatures of each row tried, in the table's order. */
  candidates: Candidate[];
  /** What was wrong with entries of the header (said when nothing matched). */
  problems: string[];
}

/** What the headers hold, once they passed the checks that need neither the body nor a key. */
export interface Headed {
  ok: true;
  id: string;
  ts: string;
  seconds: number;
  sigHeader: string;
}

/**
 * The checks that need neither the body nor a key, first in the fixed order: the three headers present,
 * the timestamp well-formed and within the window (past or future), the signature header of a sane
 * length. A door that keeps nothing of a refused request answers these before it reads the body.
 */
export function examineHeaders(headers: HeaderSource, nowMs: number, tolerance: number): Headed | VerifyFailure {
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
  return { ok: true, id, ts, seconds, sigHeader };
}

/** The checks before any HMAC (`examineHeaders`), then the header's signatures per row. */
export function examine(headers: HeaderSource, nowMs: number, tolerance: number, rows: readonly Layout[]): Found | VerifyFailure {
  const h = examineHeaders(headers, nowMs, tolerance);
  if (!h.ok) return h;
  const { id, ts, seconds, sigHeader } = h;
  const problems: string[] = [];
  const candidates: Candidate[] = [];
  for (const row of rows) {
    const parsed = row.parse(sigHeader);
    if (parsed.problems.length) problems.push(...parsed.problems);
    if (!parsed.signatures.length) continue;
    if (parsed.timestamp !== undefined && parsed.timestamp !== ts) {
      problems.push(`its t=${parsed.timestamp.slice(0, 20)} is not the Webhook-Timestamp`);
      continue;
    }
    candidates.push({ row, signatures: parsed.signatures });
  }
  return { ok: true, id, ts, seconds, sigHeader, candidates, problems };
}

/** The rows not tried because they do not sign the timestamp (hex-body), whose signatures the header holds: one may match. */
export function unsignedCandidates(table: readonly Layout[], rows: readonly Layout[], sigHeader: string): Candidate[] {
  const out: Candidate[] = [];
  for (const row of table) {
    if (rows.includes(row) || row.signsTimestamp) continue;
    const parsed = row.parse(sigHeader);
    if (parsed.signatures.length) out.push({ row, signatures: parsed.signatures });
  }
  return out;
}

/** Other ways the same JSON might have been written before something re-serialised it (bodies up to REFORMAT_DIAGNOSIS_MAX). */
export function reformattings(text: string): string[] {
  try {
    const parsed = JSON.parse(text) as unknown;
    return [JSON.stringify(parsed), JSON.stringify(parsed, null, 2), JSON.stringify(parsed, null, 4)].filter((t) => t !== text);
  } catch {
    return [];
  }
}

/** What is said when a verification fails after the header was read: one home for the words, whichever crypto ran. */
export const failures = {
  /** The header held no signature of the rows tried. */
  malformed: (problems: readonly string[], rows: readonly Layout[]): VerifyFailure =>
    fail('malformed_signature', `The Webhook-Signature header is malformed: ${problems[0] ?? `it is not in the ${rows.map((r) => r.name).join(', ')} layout${rows.length > 1 ? 's' : ''}`}.`, {
      header: 'Webhook-Signature',
      hint: 'The service writes it as "v1,<base64>" (several separated by spaces during a key rotation).',
    }),
  /** Signatures were there, and none matched. */
  noMatch: (secrets: readonly string[], tried: readonly Candidate[]): VerifyFailure =>
    fail('no_match', `No signature matched with ${secrets.length > 1 ? 'these secrets' : 'this secret'} (tried ${tried.map((p) => p.row.name).join(', ')}).`, {
      header: 'Webhook-Signature',
      hint: secrets.some((s) => s !== s.trim())
        ? 'The secret has leading or trailing whitespace; remove it.'
        : 'Is it the secret of the webhook that sent this (wxhooks secret show ID)? A re-created webhook has a new secret. Or the body, the timestamp or the Trigger-Id was changed on the way.',
    }),
  /** A row that does not sign the timestamp matched: not accepted unless pinned. */
  unsignedLayout: (row: Layout): VerifyFailure =>
    fail('no_match', `The signature is in the ${row.name} layout, which does not sign the timestamp or Trigger-Id, so a captured delivery could be replayed.`, {
      hint: `wxhooks accepts it only when pinned: --scheme ${row.name}.`,
    }),
  reformatted: (): VerifyFailure =>
    fail('body_reformatted', 'The signature matches the same JSON written differently: something between the service and here parsed the body and re-serialised it.', {
      hint: "Verify the raw bytes as received: a framework's JSON body parser (or a forwarder) must not touch the body before verification.",
    }),
  notJsonObject: (): VerifyFailure => fail('not_json_object', 'The signature is valid, but the body is not a JSON object.'),
};

/** A failure whose further look for why was not taken (`diagnose` off, or its budget spent). */
export function undiagnosed(found: Found, secrets: readonly string[], rows: readonly Layout[]): VerifyFailure {
  const f = found.candidates.length ? failures.noMatch(secrets, found.candidates) : failures.malformed(found.problems, rows);
  f.diagnosisSkipped = true;
  return f;
}

/** The success of a row's signature over a body that parsed to `payload`. */
export function success(row: Layout, triggerId: string, timestamp: number, payload: Record<string, unknown>, secretIndex: number): VerifySuccess {
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

/** The hint added to a failure of a session pinned to one layout. */
export const pinnedHint = (hint: string | undefined, pinned: string) => `${hint ? `${hint} ` : ''}This session is pinned to the ${pinned} layout, which the first verified delivery used.`;
