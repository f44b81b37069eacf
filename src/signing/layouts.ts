import { fromBase64, fromHex, toBase64, toHex, utf8 } from './encoding.js';

/**
 * The table of layouts: runtime-neutral (no Node module, no Node Buffer), shared by the Node entry and
 * `wxhooks/web`; each entry computes the HMAC with its own crypto (src/signing/hmac.ts, Web Crypto).
 */

/** What a signature header holds for one layout: the signatures, and for `stripe` its own `t=`. */
export interface ParsedHeader {
  signatures: Uint8Array[];
  timestamp?: string;
  /** Entries that looked like this layout but were broken (`v1,` with no value, bad base64...). */
  problems: string[];
}

/**
 * One row of the verifier's table: how the key is derived, what is signed, and how the header is
 * written. Everything else (the layout names, `--scheme`'s choices, which rows `auto` tries) is
 * derived from the table: adding a layout is adding a row.
 */
export interface Layout {
  name: string;
  /** Whether the timestamp (and so the replay window) is covered by the signature. `auto` tries only rows that sign it. */
  signsTimestamp: boolean;
  /** Whether the Trigger-Id is covered: if not, `listen` does not trust the header as a dedupe key. */
  signsTriggerId: boolean;
  /** The candidate keys a secret gives for this layout. */
  keys(secret: string): Uint8Array[];
  /** What is signed before the body (the signed bytes are this text's UTF-8, then the body's bytes). */
  prefix(triggerId: string, timestamp: string): string;
  /** The header's signatures for this layout; none when the header is not of this layout. */
  parse(header: string): ParsedHeader;
  /** The header value for one signature. */
  format(signature: Uint8Array, timestamp: string): string;
}

const SHA256_BYTES = 32;
const HEX = /^[0-9a-fA-F]+$/;
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/;

/** Whether `text` is base64 in the standard alphabet, with at most two `=` at the end. */
export const isBase64 = (text: string): boolean => BASE64.test(text);

/** `whsec_` + base64 is decoded; any other secret is used as its UTF-8 bytes. */
export function standardKey(secret: string): Uint8Array {
  if (secret.startsWith('whsec_')) {
    const b64 = secret.slice(6);
    if (isBase64(b64)) return fromBase64(b64);
  }
  return utf8(secret);
}

const utf8Key = (secret: string) => utf8(secret);
/** A `whsec_` secret may have been used decoded or whole by a sender that writes hex: both are tried. */
const bothKeys = (secret: string) => (secret.startsWith('whsec_') ? [standardKey(secret), utf8Key(secret)] : [utf8Key(secret)]);

function hexSignatures(header: string): ParsedHeader {
  const out: ParsedHeader = { signatures: [], problems: [] };
  for (const raw of header.split(/[\s,]+/)) {
    if (!raw) continue;
    const value = raw.startsWith('sha256=') ? raw.slice(7) : raw;
    if (!HEX.test(value)) return { signatures: [], problems: [] }; // not this layout
    if (value.length !== SHA256_BYTES * 2) out.problems.push(`a hex signature of ${value.length / 2} bytes, not ${SHA256_BYTES} (truncated?)`);
    else out.signatures.push(fromHex(value));
  }
  return out;
}

/** A row, with its name kept as a literal type so that LayoutName can be derived from the table. */
const row = <const N extends string>(layout: Layout & { name: N }) => layout;

/** The table. */
export const LAYOUTS: readonly [Layout & { name: 'standard' }, Layout & { name: 'stripe' }, Layout & { name: 'hex-timestamp' }, Layout & { name: 'hex-body' }] = [
  row({
    name: 'standard',
    signsTimestamp: true,
    signsTriggerId: true,
    keys: (secret) => [standardKey(secret)],
    prefix: (id, ts) => `${id}.${ts}.`,
    parse(header) {
      const out: ParsedHeader = { signatures: [], problems: [] };
      for (const entry of header.split(' ')) {
        if (!entry) continue;
        const comma = entry.indexOf(',');
        if (comma === -1) {
          out.problems.push(`"${entry.slice(0, 20)}${entry.length > 20 ? '…' : ''}" has no "v1," prefix`);
          continue;
        }
        const version = entry.slice(0, comma);
        const value = entry.slice(comma + 1);
        if (version !== 'v1') {
          if (/^v1$/i.test(version)) out.problems.push(`"${version}," is not "v1," (versions are lower case)`);
          continue; // other versions (v1a, v2) are not ours
        }
        if (!value) out.problems.push('"v1," has no signature after it');
        else if (!isBase64(value)) out.problems.push('a v1 signature that is not base64');
        else {
          const sig = fromBase64(value);
          if (sig.length !== SHA256_BYTES) out.problems.push(`a v1 signature of ${sig.length} bytes, not ${SHA256_BYTES} (truncated?)`);
          else out.signatures.push(sig);
        }
      }
      return out;
    },
    format: (sig) => `v1,${toBase64(sig)}`,
  }),
  row({
    name: 'stripe',
    signsTimestamp: true,
    signsTriggerId: false,
    keys: (secret) => [utf8Key(secret)],
    prefix: (_id, ts) => `${ts}.`,
    parse(header) {
      const out: ParsedHeader = { signatures: [], problems: [] };
      const pairs = header.split(',');
      if (!pairs.every((p) => /^[a-z0-9]+=/.test(p.trim()))) return out; // not this layout
      for (const pair of pairs) {
        const eq = pair.indexOf('=');
        const key = pair.slice(0, eq).trim();
        const value = pair.slice(eq + 1).trim();
        if (key === 't') out.timestamp = value;
        else if (key === 'v1') {
          if (!HEX.test(value) || value.length !== SHA256_BYTES * 2) out.problems.push('a v1= signature that is not 64 hex digits (truncated?)');
          else out.signatures.push(fromHex(value));
        }
      }
      return out;
    },
    format: (sig, ts) => `t=${ts},v1=${toHex(sig)}`,
  }),
  row({
    name: 'hex-timestamp',
    signsTimestamp: true,
    signsTriggerId: false,
    keys: bothKeys,
    prefix: (_id, ts) => `${ts}.`,
    parse: hexSignatures,
    format: (sig) => `sha256=${toHex(sig)}`,
  }),
  row({
    name: 'hex-body',
    signsTimestamp: false,
    signsTriggerId: false,
    keys: bothKeys,
    prefix: () => '',
    parse: hexSignatures,
    format: (sig) => `sha256=${toHex(sig)}`,
  }),
] as const;

export type LayoutName = (typeof LAYOUTS)[number]['name'];

export const LAYOUT_NAMES: readonly LayoutName[] = LAYOUTS.map((l) => l.name);

/** `--scheme`: `auto`, or one layout pinned. */
export type Scheme = 'auto' | LayoutName;
export const SCHEMES: readonly Scheme[] = ['auto', ...LAYOUT_NAMES];
/** The scheme a verifier uses unless told: each layout that signs the timestamp is tried (then pinned, by `listen`). */
export const DEFAULT_SCHEME: Scheme = 'auto';

/** The row of that name in a table (the built-in one unless told), or undefined. */
export function layoutNamed(name: string, table: readonly Layout[] = LAYOUTS): Layout | undefined {
  return table.find((l) => l.name === name);
}
