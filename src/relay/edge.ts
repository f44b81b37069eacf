import { LAYOUTS } from '../signing/layouts.js';
import { examine, failures, lookup, rowsFor, type HeaderSource } from '../signing/rules.js';
import { equalBytes, utf8 } from '../signing/encoding.js';
import { answers, type Answer } from './answers.js';
import { CHANNEL_NAME, CONNECT_PREFIX, HEALTH_PATH, INBOUND_PREFIX, STATUS_PATH } from './protocol.js';

/**
 * The relay's edge: what a request's method, path and headers alone decide, with no storage and no
 * channel's secret. The Worker runs it before it wakes its Durable Object, so that a flood of what it
 * refuses costs the object nothing; the relay's logic (relay.ts) runs it again in either host.
 */

/** Where a request goes. */
export type Route = { to: 'inbound'; channel: string } | { to: 'connect'; channel: string } | { to: 'status' } | { to: 'health' } | { to: 'answer'; answer: Answer };

/** The route of a method and path. */
export function route(method: string, path: string): Route {
  const named = (prefix: string) => {
    const name = path.slice(prefix.length);
    return CHANNEL_NAME.test(name) ? name : undefined;
  };
  if (path.startsWith(INBOUND_PREFIX)) {
    const channel = named(INBOUND_PREFIX);
    if (channel === undefined) return { to: 'answer', answer: answers.noChannel() };
    return method === 'POST' ? { to: 'inbound', channel } : { to: 'answer', answer: answers.method('POST') };
  }
  if (path.startsWith(CONNECT_PREFIX)) {
    const channel = named(CONNECT_PREFIX);
    if (channel === undefined) return { to: 'answer', answer: answers.noChannel() };
    return method === 'GET' ? { to: 'connect', channel } : { to: 'answer', answer: answers.method('GET') };
  }
  if (path === STATUS_PATH) return method === 'GET' ? { to: 'status' } : { to: 'answer', answer: answers.method('GET') };
  if (path === HEALTH_PATH) return method === 'GET' ? { to: 'health' } : { to: 'answer', answer: answers.method('GET') };
  return { to: 'answer', answer: answers.notFound() };
}

/** The layouts the relay checks: those that sign the timestamp (a `--scheme auto` listen's). */
export const AUTO_ROWS = rowsFor('auto', LAYOUTS);
type Digestible = Parameters<typeof crypto.subtle.digest>[1];
const sha256 = async (text: string) => new Uint8Array(await crypto.subtle.digest('SHA-256', utf8(text) as Digestible));

/**
 * Whether the request carries the relay token (`Authorization: Bearer <token>`): undefined when it does,
 * else what to answer. The comparison is of the two SHA-256 digests, in constant time: neither the
 * token's length nor its first differing byte shows in the time taken.
 */
export async function authorize(headers: HeaderSource, token: string | undefined): Promise<Answer | undefined> {
  if (!token) return answers.tokenUnset();
  const auth = lookup(headers, 'authorization', 'Authorization');
  const given = auth && /^bearer\s+/i.test(auth) ? auth.replace(/^bearer\s+/i, '').trim() : undefined;
  if (!given) return answers.noToken();
  const [a, b] = await Promise.all([sha256(given), sha256(token)]);
  return equalBytes(a, b) ? undefined : answers.wrongToken();
}

/**
 * What a delivery's headers alone decide, before its body is read: the three headers present, the
 * timestamp within the window, a signature in a layout the relay checks, a declared length within the
 * limit. Undefined when the body is worth reading.
 */
export function checkHeaders(headers: HeaderSource, now: number, tolerance: number, maxBody: number, declaredLength: number | undefined): Answer | undefined {
  const found = examine(headers, now, tolerance, AUTO_ROWS);
  if (!found.ok) return answers.refused(found);
  if (!found.candidates.length) return answers.refused(failures.malformed(found.problems, AUTO_ROWS));
  if (declaredLength !== undefined && declaredLength > maxBody) return answers.tooLarge(maxBody);
  return undefined;
}
