import { createHmac } from 'node:crypto';

export type LayoutName = 'standard' | 'stripe' | 'hex-timestamp' | 'hex-body';

export const LAYOUT_NAMES: readonly LayoutName[] = ['standard', 'stripe', 'hex-timestamp', 'hex-body'];

/** What a signature header holds for one layout: the signatures, and for `stripe` its own `t=`. */
export interface ParsedHeader {
  signatures: Buffer[];
  timestamp?: string;
  /** Entries that looked like this layout but were broken (`v1,` with no value, bad base64...). */
  problems: string[];
}

/**
 * One row of the verifier's table: how the key is derived, what is signed,
 * and how the header is written. Adding a layout is adding a row.
 */
export interface Layout {
  name: LayoutName;
  /** Whether the timestamp (and so the replay window) is covered by the signature. */
  signsTimestamp: boolean;
  /** The candidate keys a secret gives for this layout. */
  keys(secret: string): Buffer[];
  /** What is signed before the body (the signed bytes are this text's UTF-8, then the body's bytes). */
  prefix(triggerId: string, timestamp: string): string;
  /** The header's signatures for this layout; none when the header is not of this layout. */
  parse(header: string): ParsedHeader;
  /** The header value for one signature. */
  format(signature: Buffer, timestamp: string): string;
}

const SHA256_BYTES = 32;
const HEX = /^[0-9a-fA-F]+$/;

const BASE64_CHARS = new Uint8Array(128);
for (const c of 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/') BASE64_CHARS[c.charCodeAt(0)] = 1;

/**
 * Whether `text` is base64 in the standard alphabet, with at most two `=` at the end and something before
 * them (/^[A-Za-z0-9+\/]+={0,2}$/, at a third of the regular expression's cost on a signature).
 */
export function isBase64(text: string): boolean {
  let end = text.length;
  if (end > 0 && text.charCodeAt(end - 1) === 0x3d) {
    end--;
    if (end > 0 && text.charCodeAt(end - 1) === 0x3d) end--;
  }
  if (end === 0) return false;
  for (let i = 0; i < end; i++) {
    const c = text.charCodeAt(i);
    if (c > 127 || BASE64_CHARS[c] === 0) return false;
  }
  return true;
}

/** `whsec_` + base64 is decoded; any other secret is used as its UTF-8 bytes. */
export function standardKey(secret: string): Buffer {
  if (secret.startsWith('whsec_')) {
    const b64 = secret.slice(6);
    if (isBase64(b64)) return Buffer.from(b64, 'base64');
  }
  return Buffer.from(secret, 'utf8');
}

const utf8Key = (secret: string) => Buffer.from(secret, 'utf8');

function hexSignatures(header: string): ParsedHeader {
  const out: ParsedHeader = { signatures: [], problems: [] };
  for (const raw of header.split(/[\s,]+/)) {
    if (!raw) continue;
    const value = raw.startsWith('sha256=') ? raw.slice(7) : raw;
    if (!HEX.test(value)) return { signatures: [], problems: [] }; // not this layout
    if (value.length !== SHA256_BYTES * 2) out.problems.push(`a hex signature of ${value.length / 2} bytes, not ${SHA256_BYTES} (truncated?)`);
    else out.signatures.push(Buffer.from(value, 'hex'));
  }
  return out;
}

export const LAYOUTS: Record<LayoutName, Layout> = {
  standard: {
    name: 'standard',
    signsTimestamp: true,
    keys: (secret) => [standardKey(secret)],
    prefix: (id, ts) => `${id}.${ts}.`,
    parse(header) {
      const out: ParsedHeader = { signatures: [], problems: [] };
      // one signature (no space) is the common case: no array for it
      for (const entry of header.includes(' ') ? header.split(' ') : [header]) {
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
          const sig = Buffer.from(value, 'base64');
          if (sig.length !== SHA256_BYTES) out.problems.push(`a v1 signature of ${sig.length} bytes, not ${SHA256_BYTES} (truncated?)`);
          else out.signatures.push(sig);
        }
      }
      return out;
    },
    format: (sig) => `v1,${sig.toString('base64')}`,
  },
  stripe: {
    name: 'stripe',
    signsTimestamp: true,
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
          else out.signatures.push(Buffer.from(value, 'hex'));
        }
      }
      return out;
    },
    format: (sig, ts) => `t=${ts},v1=${sig.toString('hex')}`,
  },
  'hex-timestamp': {
    name: 'hex-timestamp',
    signsTimestamp: true,
    keys: (secret) => (secret.startsWith('whsec_') ? [standardKey(secret), utf8Key(secret)] : [utf8Key(secret)]),
    prefix: (_id, ts) => `${ts}.`,
    parse: hexSignatures,
    format: (sig) => `sha256=${sig.toString('hex')}`,
  },
  'hex-body': {
    name: 'hex-body',
    signsTimestamp: false,
    keys: (secret) => (secret.startsWith('whsec_') ? [standardKey(secret), utf8Key(secret)] : [utf8Key(secret)]),
    prefix: () => '',
    parse: hexSignatures,
    format: (sig) => `sha256=${sig.toString('hex')}`,
  },
};

/** HMAC-SHA256 over `prefix` (as UTF-8) and then `body`. */
export function hmac(key: Buffer, prefix: string, body: Buffer): Buffer {
  const h = createHmac('sha256', key);
  if (prefix) h.update(prefix);
  return h.update(body).digest();
}
