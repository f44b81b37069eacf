import * as DEFAULTS from '../delivery/defaults.js';
import * as ANSWERS from '../delivery/answers.js';
import { refusalBody, type Answer as CoreAnswer } from '../delivery/answers.js';
import type { Outcome } from '../delivery/outcomes.js';
import type { VerifyFailure } from '../signing/rules.js';

/**
 * What the relay answers, each in one place. The answers a delivery gets at any door (refused, stored,
 * too large, too many in flight) are the core's table (src/delivery/answers.ts: the door answers a body
 * too large or past the bytes in flight itself); what is the relay's own (its byte budget is full, no
 * such channel, the relay token) is here, in the same body shape.
 */

export interface Answer extends CoreAnswer {
  /** The request's body was not read to its end: close the connection after answering. */
  close?: boolean;
}

/** What an answer says, in words (its body's `error`), for the relay's log. */
export const said = (a: Answer): string => (JSON.parse(a.body) as { error?: string }).error ?? '';

const json = (status: number, outcome: Outcome, body: string, extra: Partial<Answer> = {}): Answer => ({ status, outcome, body, ...extra });
const errorBody = (error: string) => refusalBody(error);
/** A core answer, its connection closed after it (its body was not read to the end). */
const closing = (a: CoreAnswer): Answer => ({ ...a, ...(a.headers ? { headers: { ...a.headers } } : {}), close: true });

export const answers = {
  /** Verified and stored: the service may forget it. */
  stored: (): Answer => ({ ...ANSWERS.accepted() }),
  /** Not verified, in the words of every other door (`listen`, the handler library). */
  refused: (f: VerifyFailure): Answer => closing(ANSWERS.notVerified(f)),
  /** The relay's byte budget is spent: the service keeps the delivery and tries again later. */
  full: (): Answer =>
    json(503, 'overloaded', errorBody('the relay keeps no more deliveries for now (its byte budget is spent); try again later'), {
      headers: { 'retry-after': String(DEFAULTS.relayFullRetryAfterSeconds) },
      close: true,
    }),
  /** The delivery could not be stored (a full disk, the database away): not acknowledged, so the service retries. */
  notStored: (): Answer => json(503, 'store_failed', errorBody('the delivery could not be stored; try again later'), { headers: { 'retry-after': String(DEFAULTS.retryAfterSeconds) } }),
  /**
   * Not a channel's name at all (what no channel can be called). A name that could be a channel's is
   * answered as a channel would answer (a delivery that does not verify: 401), whether it is one or not.
   */
  noChannel: (): Answer => json(404, 'not_found', errorBody('no such channel on this relay'), { close: true }),
  notFound: (): Answer => closing(ANSWERS.notFound()),
  method: (allow: string): Answer =>
    allow === 'POST' ? closing(ANSWERS.methodNotAllowed) : json(405, 'method_not_allowed', errorBody(`only ${allow} is accepted here`), { headers: { allow }, close: true }),
  /** The relay token: missing, wrong, or not set on the relay at all. */
  noToken: (): Answer => json(401, 'unverified', errorBody('no relay token was given (Authorization: Bearer <WXHOOKS_RELAY_TOKEN>)'), { headers: { 'www-authenticate': 'Bearer' }, close: true }),
  wrongToken: (): Answer => json(401, 'unverified', errorBody('the relay token is wrong'), { headers: { 'www-authenticate': 'Bearer' }, close: true }),
  /** Channel keys that are not this channel's, or a channel there is not: the same answer, so that it tells no one which channels there are. */
  wrongKey: (): Answer =>
    json(401, 'unverified', errorBody("the channel's key is not accepted: it is derived from the webhook's secret, and this relay keeps another secret for that channel, or has no such channel"), {
      headers: { 'www-authenticate': 'Bearer' },
      close: true,
    }),
  /** Only the relay token may ask this (every channel's status). */
  operatorOnly: (): Answer => json(403, 'unverified', errorBody("only the relay token may ask this; a channel's key reaches its own channel only (/channels/<channel>)"), { close: true }),
  badDrop: (): Answer => json(400, 'bad_request', errorBody('say which refused deliveries to drop: ?seq=1,2 or ?all=true'), { close: true }),
  tokenUnset: (): Answer => json(503, 'error', errorBody('this relay has no token set (WXHOOKS_RELAY_TOKEN): it takes no connection until it has one'), { close: true }),
  notWebSocket: (): Answer => json(426, 'bad_request', errorBody('this path takes a WebSocket (Upgrade: websocket)'), { headers: { upgrade: 'websocket' }, close: true }),
  /** A failure inside the relay (a bug): the service retries. */
  internal: (): Answer => closing(ANSWERS.internal),
  health: (): Answer => json(200, 'accepted', '{"ok":true,"relay":"wxhooks"}'),
  status: (body: unknown): Answer => json(200, 'accepted', JSON.stringify(body)),
  /** What a channel's API gives (its status, its refused deliveries, what was dropped). */
  channel: (body: unknown): Answer => json(200, 'accepted', JSON.stringify(body)),
};
