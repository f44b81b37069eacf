import * as ANSWERS from '../delivery/answers.js';
import { type Layout, LAYOUTS } from '../signing/layouts.js';
import { examine, failures, rowsFor, type HeaderSource } from '../signing/rules.js';
import { equalBytes, utf8 } from '../signing/encoding.js';
import { answers, type Answer } from './answers.js';
import { bearer, keysOf } from './channel-key.js';
import { CHANNEL_NAME, CHANNELS_PREFIX, CONNECT_PREFIX, HEALTH_PATH, INBOUND_PREFIX, STATUS_PATH } from './protocol.js';

/**
 * The relay's edge: what a request's method, path and headers alone decide, with no storage and no
 * channel's secret. The Worker runs it before it wakes its Durable Object, so that a flood of what it
 * refuses costs the object nothing; the relay's logic (relay.ts) runs it again in either host.
 */

/** Where a request goes. */
export type Route =
  | { to: 'inbound'; channel: string }
  | { to: 'connect'; channel: string }
  | { to: 'status' }
  | { to: 'health' }
  /** A channel's own API: its status, its refused deliveries (listed, or dropped: some by seq, or all). */
  | { to: 'channel'; channel: string; what: 'status' | 'refused' | 'drop'; seqs?: number[] }
  | { to: 'answer'; answer: Answer };

/** The route of a method, a path and its query (without the `?`). */
export function route(method: string, path: string, query = ''): Route {
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
  if (path.startsWith(CHANNELS_PREFIX)) {
    const [name, part, ...rest] = path.slice(CHANNELS_PREFIX.length).split('/');
    if (name === undefined || !CHANNEL_NAME.test(name) || rest.length || (part !== undefined && part !== 'refused')) return { to: 'answer', answer: answers.notFound() };
    if (part === undefined) return method === 'GET' ? { to: 'channel', channel: name, what: 'status' } : { to: 'answer', answer: answers.method('GET') };
    if (method === 'GET') return { to: 'channel', channel: name, what: 'refused' };
    if (method !== 'DELETE') return { to: 'answer', answer: answers.method('GET, DELETE') };
    const params = new URLSearchParams(query);
    // dropping is explicit: the seqs named, or all of them said in so many words
    if (params.get('all') === 'true') return { to: 'channel', channel: name, what: 'drop' };
    const seqs = (params.get('seq') ?? '').split(',').filter(Boolean).map(Number);
    if (!seqs.length || seqs.length > 1000 || seqs.some((n) => !Number.isSafeInteger(n) || n < 1)) return { to: 'answer', answer: answers.badDrop() };
    return { to: 'channel', channel: name, what: 'drop', seqs };
  }
  if (path === STATUS_PATH) return method === 'GET' ? { to: 'status' } : { to: 'answer', answer: answers.method('GET') };
  if (path === HEALTH_PATH) return method === 'GET' ? { to: 'health' } : { to: 'answer', answer: answers.method('GET') };
  return { to: 'answer', answer: answers.notFound() };
}

/** The layouts the relay checks at its edge: those that sign the timestamp (a `--scheme auto` listen's). */
export const AUTO_ROWS: Layout[] = rowsFor('auto', LAYOUTS);
type Digestible = Parameters<typeof crypto.subtle.digest>[1];
const sha256 = async (text: string) => new Uint8Array(await crypto.subtle.digest('SHA-256', utf8(text) as Digestible));

/**
 * Whether `given` is the relay token. The comparison is of the two SHA-256 digests, in constant time:
 * neither the token's length nor its first differing byte shows in the time taken.
 */
export async function isToken(given: string, token: string): Promise<boolean> {
  const [a, b] = await Promise.all([sha256(given), sha256(token)]);
  return equalBytes(a, b);
}

/** Whether the request carries the relay token (`Authorization: Bearer <token>`): undefined when it does, else what to answer. */
export async function authorize(headers: HeaderSource, token: string | undefined): Promise<Answer | undefined> {
  if (!token) return answers.tokenUnset();
  const given = bearer(headers);
  if (!given) return answers.noToken();
  return (await isToken(given, token)) ? undefined : answers.wrongToken();
}

/**
 * What the edge decides of a request for one channel (a connection, its API): the relay token, or what
 * may be that channel's keys (checked later, with its secrets) pass; no credential, or a wrong token, is
 * answered here.
 */
export async function authorizeChannel(headers: HeaderSource, token: string | undefined): Promise<Answer | undefined> {
  if (!token) return answers.tokenUnset();
  const given = bearer(headers);
  if (!given) return answers.noToken();
  if (keysOf(given)) return undefined;
  return (await isToken(given, token)) ? undefined : answers.wrongToken();
}

/**
 * What a delivery's headers alone decide, before its body is read: the three headers present, the
 * timestamp within the relay's window, a signature in a layout the relay checks, a declared length
 * within the limit. Undefined when the body is worth reading. It is the same whether the channel exists
 * or not, and whatever the channel's own settings: what it answers tells no one which channels there are.
 */
export function checkHeaders(headers: HeaderSource, now: number, tolerance: number, maxBody: number, declaredLength: number | undefined): Answer | undefined {
  const found = examine(headers, now, tolerance, AUTO_ROWS);
  if (!found.ok) return answers.refused(found);
  if (!found.candidates.length) return answers.refused(failures.malformed(found.problems, AUTO_ROWS));
  if (declaredLength !== undefined && declaredLength > maxBody) return ANSWERS.tooLarge(maxBody);
  return undefined;
}

/**
 * What a delivery whose headers passed is answered when it does not verify, whatever the reason: the
 * answer an unknown channel gives too (no layout matched), so that it tells nothing of the channel.
 */
export function notVerified(headers: HeaderSource, now: number, tolerance: number): Answer {
  const found = examine(headers, now, tolerance, AUTO_ROWS);
  return answers.refused(found.ok ? failures.noMatch([''], found.candidates) : found);
}
