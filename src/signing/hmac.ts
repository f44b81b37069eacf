import { createHmac } from 'node:crypto';

/** HMAC-SHA256 over `prefix` (as UTF-8) and then `body`, with Node's crypto (the web entry uses Web Crypto). */
export function hmac(key: Uint8Array, prefix: string, body: Uint8Array): Buffer {
  const h = createHmac('sha256', key);
  if (prefix) h.update(prefix);
  return h.update(body).digest();
}
