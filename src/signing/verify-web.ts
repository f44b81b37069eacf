import { equalBytes, prefixed, utf8 } from './encoding.js';
import type { VerifyOptions } from './verify.js';
import { DEFAULT_SCHEME, LAYOUTS, type Layout } from './layouts.js';
import {
  DEFAULT_TOLERANCE,
  DIAGNOSES_PER_MINUTE,
  DiagnosisBudget,
  REFORMAT_DIAGNOSIS_MAX,
  examine,
  failures,
  reformattings,
  rowsFor,
  secretsOf,
  success,
  undiagnosed,
  unsignedCandidates,
  type HeaderSource,
  type VerifyResult,
} from './rules.js';

/**
 * Verification with Web Crypto (`crypto.subtle`), for any runtime that has it: Node 20, Deno, Bun,
 * Cloudflare Workers, browsers. No Node module. The rules and their words are those of `verifyDelivery`
 * (src/signing/rules.ts); only the HMAC differs, and it is asynchronous.
 */
export interface WebVerifierOptions extends Pick<VerifyOptions, 'secret' | 'scheme' | 'tolerance' | 'layouts'> {
  /** How many further looks for why a request failed are taken a minute (default 5): each costs several verifications. */
  diagnosePerMinute?: number;
}

const decoder = new TextDecoder();
/** Web Crypto's own types, as this runtime declares them (no DOM library in this build). */
type Key = Awaited<ReturnType<typeof crypto.subtle.importKey>>;
type Bytes = Parameters<typeof crypto.subtle.sign>[2];

/** The body as a JSON object, or undefined: what is parsed is what was signed. */
function parseObject(body: Uint8Array): Record<string, unknown> | undefined {
  try {
    const value = JSON.parse(decoder.decode(body)) as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
  } catch {
    return undefined;
  }
}

export class WebVerifier {
  private readonly secrets: string[];
  private readonly table: readonly Layout[];
  private readonly rows: Layout[];
  private readonly tolerance: number;
  /** The imported keys, per layout and secret: importing costs more than an HMAC, so it is done once. */
  private readonly keys = new Map<Layout, Promise<Key[][]>>();
  private readonly diagnoses: DiagnosisBudget;

  constructor(options: WebVerifierOptions) {
    this.secrets = secretsOf(options.secret, 'WebVerifier');
    this.table = options.layouts ?? LAYOUTS;
    this.rows = rowsFor(options.scheme ?? DEFAULT_SCHEME, this.table);
    this.tolerance = options.tolerance ?? DEFAULT_TOLERANCE;
    this.diagnoses = new DiagnosisBudget(options.diagnosePerMinute ?? DIAGNOSES_PER_MINUTE);
  }

  private keysFor(row: Layout): Promise<Key[][]> {
    let k = this.keys.get(row);
    if (!k) {
      k = Promise.all(this.secrets.map((secret) => Promise.all(row.keys(secret).map((raw) => crypto.subtle.importKey('raw', raw as Bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign'])))));
      this.keys.set(row, k);
    }
    return k;
  }

  /** Which secret's key signs `signed` as one of `signatures`, or -1. */
  private async matches(row: Layout, signatures: Uint8Array[], signed: Uint8Array): Promise<number> {
    const keys = await this.keysFor(row);
    for (let i = 0; i < keys.length; i++) {
      for (const key of keys[i]!) {
        const expected = new Uint8Array(await crypto.subtle.sign('HMAC', key, signed as Bytes));
        for (const s of signatures) if (equalBytes(s, expected)) return i;
      }
    }
    return -1;
  }

  /** Verifies one delivery: its headers, and its body's raw bytes (a string is taken as its UTF-8). */
  async verify(headers: HeaderSource, body: Uint8Array | string, now: number = Date.now()): Promise<VerifyResult> {
    const bytes = typeof body === 'string' ? utf8(body) : body;
    const found = examine(headers, now, this.tolerance, this.rows);
    if (!found.ok) return found;
    const { id, ts, candidates } = found;
    const signedBy = (row: Layout, what: Uint8Array) => prefixed(row.prefix(id, ts), what);
    for (const { row, signatures } of candidates) {
      const index = await this.matches(row, signatures, signedBy(row, bytes));
      if (index === -1) continue;
      const payload = parseObject(bytes);
      return payload ? success(row, id, found.seconds, payload, index) : failures.notJsonObject();
    }
    if (!this.diagnoses.take(now)) return undiagnosed(found, this.secrets, this.rows);
    const unsigned = async () => {
      for (const c of unsignedCandidates(this.table, this.rows, found.sigHeader)) {
        if ((await this.matches(c.row, c.signatures, signedBy(c.row, bytes))) !== -1) return failures.unsignedLayout(c.row);
      }
      return undefined;
    };
    if (!candidates.length) return (await unsigned()) ?? failures.malformed(found.problems, this.rows);
    if (bytes.length <= REFORMAT_DIAGNOSIS_MAX) {
      for (const text of reformattings(decoder.decode(bytes))) {
        for (const { row, signatures } of candidates) if ((await this.matches(row, signatures, signedBy(row, utf8(text)))) !== -1) return failures.reformatted();
      }
    }
    return (await unsigned()) ?? failures.noMatch(this.secrets, candidates);
  }
}

/**
 * Verifies one delivery with Web Crypto, by the rules and in the words of the Node entry's
 * `verifyDelivery`, with its options (it resolves to the same result; it is asynchronous because Web Crypto
 * is). Its types are the Node entry's, imported as types only.
 */
export function verifyDelivery(options: VerifyOptions): Promise<VerifyResult> {
  const verifier = new WebVerifier({ ...options, diagnosePerMinute: options.diagnose === false ? 0 : Infinity });
  return verifier.verify(options.headers, options.body, options.now === undefined ? Date.now() : +options.now);
}
