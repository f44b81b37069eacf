/**
 * Bytes to and from base64, hex and UTF-8, without Node's Buffer: the layout table and the rules of
 * verification are shared by the Node entry and `wxhooks/web`, which runs where there is no Buffer
 * (Cloudflare Workers without their Node compatibility). What is decoded here is short: signatures
 * (32 bytes) and secrets.
 */

const B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';
const B64_VALUE = new Int16Array(128).fill(-1);
for (let i = 0; i < B64.length; i++) B64_VALUE[B64.charCodeAt(i)] = i;

const encoder = new TextEncoder();

/** The UTF-8 bytes of a text. */
export const utf8 = (text: string): Uint8Array => encoder.encode(text);

/** The UTF-8 of `prefix`, then `bytes`, in one buffer: what a layout signs, for a crypto that takes one buffer (Web Crypto). */
export function prefixed(prefix: string, bytes: Uint8Array): Uint8Array {
  if (!prefix) return bytes;
  const p = utf8(prefix);
  const all = new Uint8Array(p.length + bytes.length);
  all.set(p);
  all.set(bytes, p.length);
  return all;
}

/**
 * Small byte strings (a signature, a key) are cut from a shared 8 KiB block, as Node's Buffer does: a
 * `new Uint8Array` of its own allocates a backing store outside V8's heap each time, which made
 * `verifyDelivery` (a key and a signature decoded per call) 6.0-6.3 µs a 1 KB delivery, against 5.3-5.5
 * µs when both were Buffers; from the block, 5.1-5.2 µs (and a session's `Verifier.verify`, one
 * signature a call, 4.5-4.8 µs against 4.9 µs), in alternating runs of 200,000 calls each.
 */
let block = new Uint8Array(8192);
let used = 0;
function small(size: number): Uint8Array {
  if (size > 256) return new Uint8Array(size);
  if (used + size > block.length) {
    block = new Uint8Array(8192);
    used = 0;
  }
  const out = block.subarray(used, used + size);
  used += size;
  return out;
}

/** Standard base64 (padding optional) to bytes; the caller has checked the alphabet (isBase64). */
export function fromBase64(text: string): Uint8Array {
  let end = text.length;
  while (end > 0 && text.charCodeAt(end - 1) === 61 /* = */) end--;
  const out = small(Math.floor((end * 3) / 4));
  let bits = 0;
  let value = 0;
  let o = 0;
  for (let i = 0; i < end; i++) {
    value = (value << 6) | (B64_VALUE[text.charCodeAt(i) & 127]! & 63);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out[o++] = (value >> bits) & 255;
    }
  }
  return out;
}

/** Bytes to standard base64, padded. */
export function toBase64(bytes: Uint8Array): string {
  let out = '';
  let i = 0;
  for (; i + 2 < bytes.length; i += 3) {
    const n = (bytes[i]! << 16) | (bytes[i + 1]! << 8) | bytes[i + 2]!;
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + B64[(n >> 6) & 63]! + B64[n & 63]!;
  }
  if (i < bytes.length) {
    const n = (bytes[i]! << 16) | ((bytes[i + 1] ?? 0) << 8);
    out += B64[n >> 18]! + B64[(n >> 12) & 63]! + (i + 1 < bytes.length ? B64[(n >> 6) & 63]! : '=') + '=';
  }
  return out;
}

/** Hex digits (an even number of them; the caller has checked) to bytes. */
export function fromHex(text: string): Uint8Array {
  const out = small(text.length >> 1);
  for (let i = 0; i < out.length; i++) out[i] = parseInt(text.slice(i * 2, i * 2 + 2), 16);
  return out;
}

/** Bytes to lower-case hex. */
export function toHex(bytes: Uint8Array): string {
  let out = '';
  for (const b of bytes) out += (b < 16 ? '0' : '') + b.toString(16);
  return out;
}

/** Bytes to base64url without padding (a hash in a dedupe key). */
export const toBase64Url = (bytes: Uint8Array): string => toBase64(bytes).replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');

/** Whether two byte strings are equal, in time that depends only on their length. */
export function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a[i]! ^ b[i]!;
  return diff === 0;
}
