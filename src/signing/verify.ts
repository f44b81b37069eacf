import { timingSafeEqual } from 'node:crypto';
import { hmac } from './hmac.js';
import { DEFAULT_SCHEME, LAYOUTS, type Layout, type Scheme } from './layouts.js';
import { LARGE_BODY, parseBodyObject } from './json-body.js';
import {
  DEFAULT_TOLERANCE,
  DIAGNOSES_PER_MINUTE,
  DiagnosisBudget,
  REFORMAT_DIAGNOSIS_MAX,
  examine,
  failures,
  pinnedHint,
  reformattings,
  rowsFor,
  secretsOf,
  success,
  undiagnosed,
  unsignedCandidates,
  type HeaderSource,
  type VerifyFailure,
  type VerifyResult,
  type VerifySuccess,
} from './rules.js';

// The rules and their words live in rules.ts (shared with the web entry); this is their Node driver.
export { MAX_SIGNATURE_HEADER, REFORMAT_DIAGNOSIS_MAX } from './rules.js';
export type { HeaderSource, VerifyFailure, VerifyFailureReason, VerifyResult, VerifySuccess } from './rules.js';
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

/** A session's result (`Verifier`): on the first match in auto mode, `pinnedNow` says its layout is now pinned. */
export type SessionVerifyResult = (VerifySuccess & { pinnedNow?: true }) | VerifyFailure;

/** The keys a layout derives from each secret (Verifier keeps them; verifyDelivery derives them per call). */
type KeysFor = (row: Layout) => Uint8Array[][];

function matches(row: Layout, keysFor: KeysFor, signatures: Uint8Array[], id: string, ts: string, body: Buffer): number {
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

/**
 * Verifies one delivery, in a fixed order: headers present, timestamp
 * well-formed and within the window (past or future), an HMAC over the raw
 * bytes compared in constant time, then the body a JSON object.
 */
export function verifyDelivery(options: VerifyOptions): VerifyResult {
  const secrets = secretsOf(options.secret, 'verifyDelivery');
  const table = options.layouts ?? LAYOUTS;
  const rows = rowsFor(options.scheme ?? DEFAULT_SCHEME, table);
  const nowMs = options.now === undefined ? Date.now() : +options.now;
  const body = typeof options.body === 'string' ? Buffer.from(options.body, 'utf8') : Buffer.from(options.body.buffer, options.body.byteOffset, options.body.byteLength);
  const keysFor: KeysFor = (row) => secrets.map((secret) => row.keys(secret));
  const rules: Rules = { keysFor, secrets, rows, table, tolerance: options.tolerance ?? DEFAULT_TOLERANCE, diagnose: () => options.diagnose !== false, shallowAbove: LARGE_BODY };
  return check(rules, nowMs, options.headers, body);
}

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
  const { keysFor, secrets, rows, table } = rules;
  const found = examine(headers, nowMs, rules.tolerance, rows);
  if (!found.ok) return found;
  const { id, ts, candidates } = found;
  for (const { row, signatures } of candidates) {
    const index = matches(row, keysFor, signatures, id, ts, body);
    if (index === -1) continue;
    const payload = parseBodyObject(body, rules.shallowAbove);
    return payload ? success(row, id, found.seconds, payload, index) : failures.notJsonObject();
  }
  // The further look for why costs several verifications (a parse, three serialisations, their HMACs):
  // taken only when asked, so that a refused request costs no more than a verified one.
  if (!rules.diagnose()) return undiagnosed(found, secrets, rows);
  // A row that was not tried because it does not sign the timestamp (hex-body) may match: say so, rather than "wrong secret".
  const unsigned = () => {
    for (const c of unsignedCandidates(table, rows, found.sigHeader)) if (matches(c.row, keysFor, c.signatures, id, ts, body) !== -1) return failures.unsignedLayout(c.row);
    return undefined;
  };
  if (!candidates.length) return unsigned() ?? failures.malformed(found.problems, rows);
  if (body.length <= REFORMAT_DIAGNOSIS_MAX) {
    // an unauthenticated request must not buy much CPU with a large body
    for (const text of reformattings(body.toString('utf8'))) {
      const candidate = Buffer.from(text, 'utf8');
      for (const { row, signatures } of candidates) if (matches(row, keysFor, signatures, id, ts, candidate) !== -1) return failures.reformatted();
    }
  }
  return unsigned() ?? failures.noMatch(secrets, candidates);
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
  /** Further looks for why a request failed still allowed now. */
  private readonly diagnoses: DiagnosisBudget;
  /** The time of the verification under way. */
  private now = 0;
  /** Whether the first layout that matches is pinned (`listen`: yes; a handler in an app: `pin: false`, every call like verifyDelivery). */
  private readonly pins: boolean;

  /**
   * `diagnosePerMinute`: how many further looks for why a request failed are taken a minute (default 5,
   * as `listen` and the handlers take them: each costs several verifications, and a session faces
   * whoever sends; Infinity takes every one). `shallowAbove`: bodies larger than this are parsed for their small members only (default
   * 1 MiB): a receiver that needs only a delivery's ids keeps the payload of a large forecast small.
   */
  constructor(options: Omit<VerifyOptions, 'headers' | 'body' | 'now' | 'diagnose'> & { diagnosePerMinute?: number; shallowAbove?: number; pin?: boolean }) {
    const secrets = secretsOf(options.secret, 'Verifier');
    this.pins = options.pin !== false;
    this.diagnoses = new DiagnosisBudget(options.diagnosePerMinute ?? DIAGNOSES_PER_MINUTE);
    this.scheme = options.scheme ?? DEFAULT_SCHEME;
    if (this.scheme !== 'auto') this.pinned = this.scheme;
    const table = options.layouts ?? LAYOUTS;
    // derived keys, per layout: a session keeps one list of secrets, so it derives them once
    const keys = new Map<Layout, Uint8Array[][]>();
    this.rules = {
      keysFor: (row) => {
        let k = keys.get(row);
        if (!k) keys.set(row, (k = secrets.map((secret) => row.keys(secret))));
        return k;
      },
      secrets,
      rows: rowsFor(this.scheme, table),
      table,
      tolerance: options.tolerance ?? DEFAULT_TOLERANCE,
      diagnose: () => this.diagnoses.take(this.now),
      shallowAbove: options.shallowAbove ?? LARGE_BODY,
    };
  }

  verify(headers: HeaderSource, body: Buffer, now: number = Date.now()): SessionVerifyResult {
    this.now = now;
    const result = check(this.rules, now, headers, body);
    if (result.ok && !this.pinned && this.pins) {
      this.pinned = result.layout;
      this.rules.rows = rowsFor(result.layout, this.rules.table);
      return { ...result, pinnedNow: true };
    }
    if (!result.ok && this.pinned && this.scheme === 'auto' && (result.reason === 'malformed_signature' || result.reason === 'no_match')) {
      return { ...result, hint: pinnedHint(result.hint, this.pinned) };
    }
    return result;
  }
}
