import type { IncomingMessage } from 'node:http';
import { BodyGatherer, declaredFits, InflightBudget } from './bodies.js';

export { InflightBudget };

export type BodyRead =
  /** The whole body; `held` bytes of the budget stay taken until the caller gives them back. */
  | { kind: 'body'; body: Buffer; held: number }
  | { kind: 'too_large'; size: number }
  | { kind: 'over_budget'; size: number }
  /** The whole body did not arrive within `timeoutMs`: the caller answers 408 and closes the connection. */
  | { kind: 'timed_out'; size: number }
  /** The connection ended before the body did. */
  | { kind: 'aborted' };

export interface ReadBodyOptions {
  /** The copies of its body a request holds while it is processed (its text too, when it is saved): each byte takes this many of the budget. */
  copies?: number;
  /** The whole body must have arrived within this (a door that does not own its server: the Node middleware). */
  timeoutMs?: number;
}

/** The length the client declared, or undefined. */
export function declaredLength(req: IncomingMessage): number | undefined {
  const n = Number(req.headers['content-length']);
  return Number.isFinite(n) && n >= 0 ? n : undefined;
}

const allocate = (bytes: number) => Buffer.allocUnsafe(bytes);

/**
 * Reads a body as it arrives, stopping at `max` bytes or at the budget, which is charged for what has
 * arrived (src/util/bodies.ts): nothing is set aside for a declared Content-Length. A callback rather
 * than a promise: the answer is then written in the same turn as the last chunk arrives. With a promise,
 * the answer's write lost its batching with the request's own I/O: callgrind counted 189,356
 * instructions a delivery against 158,751-179,109 for the callback (`listen`, three runs).
 */
export function readBody(req: IncomingMessage, max: number, budget: InflightBudget, done: (read: BodyRead) => void, options: ReadBodyOptions = {}): void {
  const copies = options.copies ?? 1;
  const declared = declaredLength(req);
  if (declared !== undefined && declared > max) return done({ kind: 'too_large', size: declared });
  if (!declaredFits(budget, declared, copies)) return done({ kind: 'over_budget', size: declared! });
  const body = new BodyGatherer<Buffer>(max, budget, allocate, declared, copies);
  let finished = false;
  let timer: NodeJS.Timeout | undefined;
  const finish = (read: BodyRead) => {
    if (finished) return;
    finished = true;
    if (timer) clearTimeout(timer);
    if (read.kind !== 'body') body.release();
    done(read);
  };
  if (options.timeoutMs !== undefined) timer = setTimeout(() => finish({ kind: 'timed_out', size: body.size }), options.timeoutMs).unref();
  req.on('data', (chunk: Buffer) => {
    if (finished) return;
    const took = body.add(chunk);
    if (took === 'ok') return;
    req.pause();
    finish(took === 'too_large' ? { kind: 'too_large', size: body.size + chunk.length } : { kind: 'over_budget', size: body.size + chunk.length });
  });
  // the usual small delivery arrives as one chunk, and is kept as it is
  req.on('end', () => finish({ kind: 'body', body: body.body(), held: body.held }));
  // 'close' after 'end' finds it finished; before it, the client went away or the server cut it off.
  // (No 'error' listener: Node emits a request's errors only to listeners, and 'close' follows them.)
  req.on('close', () => finish({ kind: 'aborted' }));
}
