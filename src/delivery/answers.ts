import type { VerifyFailure } from '../signing/rules.js';
import * as DEFAULTS from './defaults.js';
import { BODY_READS } from './defaults.js';
import type { Outcome } from './outcomes.js';

/**
 * The one table of request-level answers: every door (`listen`'s server, `createNodeMiddleware`,
 * `createWebHandler`, and the doors to come) answers from it, so a status, its outcome, its body and its
 * headers are the same whichever door a delivery came through. One body shape: `{"ok":true}` (with
 * `"duplicate":true` for a duplicate) for a success, `{"error", "reason"?, "hint"?}` for every refusal.
 *
 * The table is this module, as `DEFAULTS` is defaults.ts: each answer an export of its own, read as
 * `ANSWERS.name` through `import * as ANSWERS from '…/answers.js'`, and each one built at load marked pure,
 * so that a bundle keeps only the answers its doors give (an object's unused keys are never dropped):
 * `wxhooks/web` leaves `listen`'s forward, save, sink and flag answers out.
 */

/** What to answer: the status, the outcome reported, the JSON body (already serialised), and headers besides its content type. */
export interface Answer {
  status: number;
  outcome: Outcome;
  body: string;
  headers?: Readonly<Record<string, string>>;
}

export const OK_BODY = '{"ok":true}';
export const DUPLICATE_BODY = '{"ok":true,"duplicate":true}';

/** A refusal's body: what went wrong in words, a code where the status alone does not say it, and what to do (JSON leaves out what is undefined). */
export const refusalBody = (error: string, reason?: string, hint?: string): string => JSON.stringify({ error, reason, hint });

/** Every 503 says when to try again. */
const RETRY_LATER = { 'retry-after': String(DEFAULTS.retryAfterSeconds) } as const;
const POST_ONLY = { allow: 'POST' } as const;

const refuse = (status: number, outcome: Outcome, error: string, o: { reason?: string; hint?: string; headers?: Record<string, string> } = {}): Answer => ({
  status,
  outcome,
  body: refusalBody(error, o.reason, o.hint),
  ...(o.headers ? { headers: o.headers } : {}),
});

const ACCEPTED: Answer = { status: 200, outcome: 'accepted', body: OK_BODY };

/** Verified, new, handled and stored: 200, or the 2xx your app (or `--respond-status`) gave. */
export const accepted = (status = 200): Answer => (status === 200 ? ACCEPTED : { status, outcome: 'accepted', body: OK_BODY });
/** Processed before: 200, nothing handled again. */
export const duplicate = { status: 200, outcome: 'duplicate', body: DUPLICATE_BODY } as Answer;
/** Being handled right now under a live claim: the sender tries again later. */
export const inProgress: Answer = /* @__PURE__ */ refuse(409, 'in_progress', 'this notification is being processed; try again later');
/** Not a delivery, or not authentic: 400 or 401, with the verifier's reason and hint. */
export const notVerified = (f: VerifyFailure): Answer => {
  const status = statusForFailure(f);
  return refuse(status, status === 400 ? 'bad_request' : 'unverified', f.message, { reason: f.reason, hint: f.hint });
};
/** Another path. `listen` says where deliveries go; a library door does not tell strangers its path. */
export const notFound = (hint?: string): Answer => refuse(404, 'not_found', 'not found', { hint });
export const methodNotAllowed: Answer = /* @__PURE__ */ refuse(405, 'method_not_allowed', 'only POST is accepted here', { headers: POST_ONLY });
export const tooLarge = (max: number): Answer => refuse(413, 'too_large', `the body is over ${max} bytes`);
/** The request (its headers, or its body) did not arrive in time: the connection is closed. */
export const timedOut = (ms: number): Answer => refuse(408, 'timed_out', `the request did not arrive within ${Math.round(ms / 1000)} s`);
/** Not valid HTTP (a broken chunked body, a bad length): the connection is closed. */
export const malformed: Answer = /* @__PURE__ */ refuse(400, 'bad_request', 'the request is not valid HTTP');
/** The body stopped coming (the client went away): `listen` reports it with status 0, as nothing can be answered; a door that must answer says 400. */
export const aborted: Answer = /* @__PURE__ */ refuse(400, 'aborted', 'the body could not be read: the request ended before it did');
export const overloaded: Answer = /* @__PURE__ */ refuse(503, 'overloaded', 'too many bodies in flight; try again later', { reason: 'overloaded', headers: RETRY_LATER });
/** The store cannot say whether the pair was processed (it is away). */
export const storeUnreadable: Answer = /* @__PURE__ */ refuse(503, 'store_failed', 'the processed pairs cannot be read now; try again later', { reason: 'store_failed', headers: RETRY_LATER });
/** Handled, and its pair not stored yet: the store keeps it as processed, so the retry this brings is a duplicate. */
export const storeUnwritten: Answer = /* @__PURE__ */ refuse(503, 'store_failed', 'the delivery could not be recorded as processed; try again later', { reason: 'store_failed', headers: RETRY_LATER });
/** A handler threw: what it threw goes to the app's onError, never to the sender. */
export const handlerFailed: Answer = /* @__PURE__ */ refuse(500, 'handler_failed', 'a handler failed; the delivery will be retried');
export const handlerTimedOut = (ms: number): Answer => refuse(500, 'handler_timed_out', `a handler took longer than ${Math.round(ms / 1000)} s; the delivery will be retried`);
/** `listen --forward-to`: your app was down, slow, or answered otherwise than 2xx. */
export const forwardFailed = (why: string): Answer => refuse(502, 'forward_failed', `forwarding failed: ${why}`);
/**
 * `listen --sink`: a broker is away, or did not acknowledge in time; the claim is let go, so the service's
 * retry is published once it is back. (Which broker, and why, is listen's line: not the sender's business.)
 */
export const sinkUnavailable: Answer = /* @__PURE__ */ refuse(503, 'sink_failed', 'the stream cannot take it now; try again later', { reason: 'sink_unavailable', headers: RETRY_LATER });
/** `listen --sink`: a broker refused it for good (over NATS's max_payload): its retries are refused the same way until the broker is changed. */
export const sinkRefused: Answer = /* @__PURE__ */ refuse(502, 'sink_failed', 'the stream refused it for good (too large for it)', { reason: 'sink_refused' });
/** `listen --respond-status` asked for a status that is not 2xx. */
export const refusedByFlag = (status: number): Answer => refuse(status, 'refused_by_flag', `answered ${status} (--respond-status)`);
export const savingFailed = (why: string): Answer => refuse(500, 'error', `the delivery could not be saved: ${why}`);
/** The app parsed the body before the library could verify its bytes: a mistake of its set-up (the service retries while it is fixed). */
export const bodyParsed = (fix: string): Answer => refuse(500, 'error', `the body was parsed before wxhooks could verify it: ${fix}`);
export const internal: Answer = /* @__PURE__ */ refuse(500, 'error', 'internal error in wxhooks; the delivery will be retried');

/** What each verification failure is answered with: 400 for what is not a delivery, 401 for what is not authentic. */
export function statusForFailure(f: VerifyFailure): 400 | 401 {
  if (f.reason === 'not_json_object') return 400;
  if (f.reason === 'missing_header') return f.header === 'Webhook-Signature' ? 401 : 400;
  return 401;
}

/** How long a whole request may take to arrive, for a door given its read timeout. */
export const bodyTimeoutMs = (readTimeoutMs: number): number => readTimeoutMs * BODY_READS;
