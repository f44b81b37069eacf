import { prefixed, utf8 } from './encoding.js';
import { layoutNamed } from './layouts.js';
import type { SignedHeaders, SignOptions } from './sign.js';

type Bytes = Parameters<typeof crypto.subtle.sign>[2];

export type { SignOptions, SignedHeaders };

/**
 * Signs a delivery as the service does, with Web Crypto: the same headers as the Node entry's
 * `signDelivery`, with its options (asynchronous, as Web Crypto is), for the tests of a Worker or a Deno app.
 * (Its types are the Node entry's, imported as types only: nothing of Node's crypto comes with them.)
 */
export async function signDelivery(options: SignOptions): Promise<SignedHeaders> {
  const row = typeof options.layout === 'object' ? options.layout : layoutNamed(options.layout ?? 'standard');
  if (!row) throw new TypeError(`unknown layout "${String(options.layout)}"`);
  const ts = String(options.timestamp ?? Math.floor(Date.now() / 1000));
  const body = typeof options.body === 'string' ? utf8(options.body) : options.body;
  const signed = prefixed(row.prefix(options.triggerId, ts), body);
  const key = await crypto.subtle.importKey('raw', row.keys(options.secret)[0]! as Bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const signature = new Uint8Array(await crypto.subtle.sign('HMAC', key, signed as Bytes));
  return { 'Trigger-Id': options.triggerId, 'Webhook-Timestamp': ts, 'Webhook-Signature': row.format(signature, ts) };
}
