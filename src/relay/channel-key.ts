import { equalBytes, toBase64Url, utf8 } from '../signing/encoding.js';
import { lookup, type HeaderSource } from '../signing/rules.js';

/**
 * A channel's key: what reaches one channel of a relay, and no other. It is derived from the webhook's
 * secret (HMAC-SHA256 keyed by the secret, over the channel's name), so that whoever can verify the
 * webhook's deliveries, and no one else, can take them from the relay without its operator's token, and
 * the relay, which keeps the secret to verify at its edge, can check it with nothing more. The key is
 * not the secret: a key seen (a proxy's log) does not sign a delivery, and reaches that channel only
 * until the secret is replaced. Runtime-neutral (Web Crypto).
 */

/** What a channel key starts with, so that the relay tells it from its token before it looks any channel up. */
export const CHANNEL_KEY_PREFIX = 'wxrc1.';
/** The most keys one request may carry (one per secret: the secrets of a rotation). */
export const MAX_KEYS = 4;

type Bytes = Parameters<typeof crypto.subtle.sign>[2];

/** The key of `channel` for a webhook whose secret is `secret`. */
export async function channelKey(secret: string, channel: string): Promise<string> {
  const key = await crypto.subtle.importKey('raw', utf8(secret) as Bytes, { name: 'HMAC', hash: 'SHA-256' }, false, ['sign']);
  const mac = new Uint8Array(await crypto.subtle.sign('HMAC', key, utf8(`wxhooks relay channel\n${channel}`) as Bytes));
  return CHANNEL_KEY_PREFIX + toBase64Url(mac);
}

/** The bearer value of a request: the relay token, or channel keys separated by commas. */
export function bearer(headers: HeaderSource): string | undefined {
  const auth = lookup(headers, 'authorization', 'Authorization');
  if (!auth || !/^bearer\s+/i.test(auth)) return undefined;
  return auth.replace(/^bearer\s+/i, '').trim() || undefined;
}

/** The channel keys a bearer value holds, or undefined when it is not keys (the relay token, or nothing a relay gives). */
export function keysOf(given: string): string[] | undefined {
  const keys = given.split(',').map((k) => k.trim());
  return keys.length <= MAX_KEYS && keys.every((k) => k.startsWith(CHANNEL_KEY_PREFIX) && k.length < 100) ? keys : undefined;
}

/** Whether one of the keys given is one of those expected, each compared in constant time. */
export function anyKeyMatches(given: readonly string[], expected: readonly string[]): boolean {
  let found = false;
  for (const g of given) for (const e of expected) if (equalBytes(utf8(g), utf8(e))) found = true;
  return found;
}
