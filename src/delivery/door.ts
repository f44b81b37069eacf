import type { HeaderSource } from '../signing/rules.js';
import { readWithin, type BodyGatherer, type BodyLimits, type BodyRefused, type BodySource } from '../util/bodies.js';
import type { Timers } from '../util/clock.js';
import { isPromise } from '../util/then.js';
import * as ANSWERS from './answers.js';
import type { Answer } from './answers.js';

export { declaredLength, lengthRefused, readWithin, type BodyLimits, type BodyRefused, type ChunkSink } from '../util/bodies.js';

/**
 * The door, written once: every way a delivery comes in over HTTP (`listen`'s server, the Node middleware,
 * the web handler and the Worker) runs this sequence, and supplies only how its runtime reads a request
 * and writes an answer (`DoorIO`). A reader follows a request by name, from the socket to `settle`:
 *
 *   door(io, rules)(req, res)                 the request arrives
 *     → routed                                another path is 404, another method 405
 *     → given                                 a body the runtime already read (taken as it is), or parsed (a set-up mistake)
 *     → refusedOnHeaders                      a door that keeps nothing of a refused request refuses on its headers alone
 *     → readWithin (src/util/bodies.ts)       the body, within the body limit, the bytes in flight and the time allowed
 *         → lengthRefused                     first, on the length it declares (parsed once, by declaredLength)
 *     → rules.deliver                         listen's `receive`, the library's `verifyAndReceive`: both call
 *         → verifyAndSettle                   (src/delivery/receive.ts) verified → keyed → settle (runner.ts): claimed,
 *                                             handled, completed or released
 *     → answered                              the answer written (io.write), and the door told what became of it
 *
 * Every status, body and header written is the table's (src/delivery/answers.ts), every default the
 * table's (src/delivery/defaults.ts): an adapter restates none of them.
 */

/** A request's path, without its query. */
export function pathOf(url: string): string {
  const q = url.indexOf('?');
  return q === -1 ? url : url.slice(0, q);
}

/** What a request is answered at once for where it was sent: another path (when the door has one), another method. */
export function routed(method: string | undefined, path: string, expected: string | undefined, notFoundHint?: string): Answer | undefined {
  if (expected !== undefined && path !== expected) return ANSWERS.notFound(notFoundHint);
  if (method !== 'POST') return ANSWERS.methodNotAllowed;
  return undefined;
}

/**
 * What became of the body when the answer is written, so that the runtime knows what to do with the
 * connection: `read` (kept for the next request), `skipped` (another path or method: what is sent is
 * drained), `refused` (refused on its headers, its body never read: the connection closes after the
 * answer), `stopped` (refused part-way: closes), `cut` (it did not arrive in time: closes, whatever the
 * client does), `gone` (the client went away: there is nobody to answer, unless the runtime must return a
 * response anyway).
 */
export type Written = 'read' | 'skipped' | 'refused' | 'stopped' | 'cut' | 'gone';

/** Whether an answer reached a connection still open: false when it closed first; a promise when it is known later. */
export type Sent = boolean | Promise<boolean>;

/** How one runtime reads a request and writes an answer: all a door supplies of its own. */
export interface DoorIO<Req, Res, B extends Uint8Array> extends BodySource<Req, Res, B> {
  method(req: Req): string | undefined;
  /** The request's path, without its query. */
  path(req: Req): string;
  headers(req: Req): HeaderSource;
  /**
   * A body the runtime (or a framework) has already read: its bytes, taken as they are; or the answer to a
   * body already parsed, whose signed bytes are gone (a set-up mistake, which the adapter reports).
   */
  given?(req: Req): B | Answer | undefined;
  write(req: Req, res: Res, answer: Answer, how: Written): Sent;
}

/** What became of one request: each door reports it in its own way (listen's lines and history), or not at all. */
export type DoorEnd<R> =
  | { step: 'routed' | 'given' | 'headers'; answer: Answer }
  | { step: 'body'; refused: BodyRefused; answer: Answer }
  | { step: 'delivered'; delivered: R }
  | { step: 'failed'; error: unknown };

/** What a door does with a request, besides reading and writing it. */
export interface DoorRules<Req, Res, B extends Uint8Array, R> extends BodyLimits {
  /** The path deliveries go to (another is answered 404, with `notFoundHint`); every path when not set. */
  path?: string;
  notFoundHint?: string;
  /** The time a request arrived at (the clock its timestamp is checked against), given to `deliver` and `ended`. */
  now?: () => number;
  /**
   * Refuses a request on its headers alone (a header missing, a stale timestamp; for a relay, a channel
   * that does not exist), before its body is read: a door that keeps nothing of refused requests.
   */
  refuseEarly?(headers: HeaderSource, req: Req): Answer | undefined;
  /** The whole body must have arrived within this (a door that does not own its server): past it, 408 and the connection cut. */
  timeoutMs?: number;
  timers?: Timers;
  /** Verifies a delivery whose body is in and settles it (src/delivery/receive.ts): listen's `receive`, the library's `verifyAndReceive`. */
  deliver(req: Req, body: B, at: number): R | Promise<R>;
  answerOf(delivered: R): Answer;
  /** Told once per request, once its answer is written (or could not be). */
  ended?(req: Req, end: DoorEnd<R>, sent: Sent, at: number): void;
  /** A delivery that failed inside wxhooks (a bug): true when the door answered it itself (Express's `next(error)`); else it is answered 500. */
  failed?(req: Req, res: Res, error: unknown): boolean;
}

/** What a body refused is answered, and what then becomes of its connection. */
function refusedBody(refused: BodyRefused, rules: BodyLimits & { timeoutMs?: number }): { answer: Answer; how: Written } {
  switch (refused.kind) {
    case 'too_large':
      return { answer: ANSWERS.tooLarge(rules.maxBody), how: 'stopped' };
    case 'over_budget':
      return { answer: ANSWERS.overloaded, how: 'stopped' };
    case 'timed_out':
      return { answer: ANSWERS.timedOut(rules.timeoutMs ?? 0), how: 'cut' };
    case 'aborted':
      return { answer: ANSWERS.aborted, how: 'gone' };
  }
}

/** A door: `(req, res) => void`, the whole sequence for one request. */
export function door<Req, Res, B extends Uint8Array, R>(io: DoorIO<Req, Res, B>, rules: DoorRules<Req, Res, B, R>): (req: Req, res: Res) => void {
  function answered(req: Req, res: Res, end: DoorEnd<R>, answer: Answer, how: Written, at: number): void {
    const sent = io.write(req, res, answer, how);
    rules.ended?.(req, end, sent, at);
  }

  function failed(req: Req, res: Res, error: unknown, at: number): void {
    if (rules.failed?.(req, res, error)) return;
    answered(req, res, { step: 'failed', error }, ANSWERS.internal, 'read', at);
  }

  function delivered(req: Req, res: Res, body: B, at: number, gathered?: BodyGatherer<B>): void {
    let d: R | Promise<R>;
    try {
      d = rules.deliver(req, body, at);
    } catch (error) {
      gathered?.release();
      return failed(req, res, error, at);
    }
    if (!isPromise(d)) {
      gathered?.release();
      return answered(req, res, { step: 'delivered', delivered: d }, rules.answerOf(d), 'read', at);
    }
    d.then(
      (r) => {
        gathered?.release();
        answered(req, res, { step: 'delivered', delivered: r }, rules.answerOf(r), 'read', at);
      },
      (error: unknown) => {
        gathered?.release();
        failed(req, res, error, at);
      },
    );
  }

  function refusedOnHeaders(req: Req): Answer | undefined {
    return rules.refuseEarly?.(io.headers(req), req);
  }

  return function request(req: Req, res: Res): void {
    const at = rules.now ? rules.now() : 0;
    const wrong = routed(io.method(req), io.path(req), rules.path, rules.notFoundHint);
    if (wrong) return answered(req, res, { step: 'routed', answer: wrong }, wrong, 'skipped', at);
    const given = io.given?.(req);
    if (given instanceof Uint8Array) return delivered(req, res, given, at);
    if (given !== undefined) return answered(req, res, { step: 'given', answer: given }, given, 'read', at);
    const early = refusedOnHeaders(req);
    if (early) return answered(req, res, { step: 'headers', answer: early }, early, 'refused', at);
    readWithin(io, req, res, rules, (read) => {
      if (!('kind' in read)) return delivered(req, res, read.body, at, read.gathered);
      const { answer, how } = refusedBody(read, rules);
      answered(req, res, { step: 'body', refused: read, answer }, answer, how, at);
    });
  };
}
