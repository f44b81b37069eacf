import type { IncomingMessage } from 'node:http';
import { declaredLength as lengthOf, InflightBudget, readWithin, type BodySource, type ChunkSink } from './bodies.js';

export { InflightBudget };

/** How node:http gives a body: its chunks as they arrive, into Node Buffers. The Node doors' reading (listen's server, the middleware). */
export const nodeBody = {
  stream(req: IncomingMessage, sink: ChunkSink<Buffer>): () => void {
    req.on('data', (chunk: Buffer) => {
      if (!sink.chunk(chunk)) req.pause();
    });
    req.on('end', () => sink.end());
    // 'close' after 'end' finds it finished; before it, the client went away or the server cut it off.
    // (No 'error' listener: Node emits a request's errors only to listeners, and 'close' follows them.)
    req.on('close', () => sink.gone());
    return () => req.pause();
  },
  alloc: (bytes: number): Buffer => Buffer.allocUnsafe(bytes),
};

export type BodyRead =
  /** The whole body; `held` bytes of the budget stay taken until the caller gives them back. */
  | { kind: 'body'; body: Buffer; held: number }
  | { kind: 'too_large'; size: number }
  | { kind: 'over_budget'; size: number }
  /** The whole body did not arrive within `timeoutMs`. */
  | { kind: 'timed_out'; size: number }
  /** The connection ended before the body did. */
  | { kind: 'aborted' };

/** The length the client declared, or undefined (the one reader of it: src/util/bodies.ts). */
export const declaredLength = (req: IncomingMessage): number | undefined => lengthOf(req.headers['content-length']);

const io: BodySource<IncomingMessage, undefined, Buffer> = {
  length: (req) => req.headers['content-length'],
  stream: (req, _res, sink) => nodeBody.stream(req, sink),
  alloc: nodeBody.alloc,
};

/**
 * Reads a body within `max` bytes and the budget (the doors' reader: src/util/bodies.ts), for a server
 * that is not a door of deliveries (the emulator's API). The caller gives back `held` bytes of the budget.
 */
export function readBody(req: IncomingMessage, max: number, budget: InflightBudget, done: (read: BodyRead) => void): void {
  readWithin(io, req, undefined, { maxBody: max, budget }, (read) => done('kind' in read ? read : { kind: 'body', body: read.body, held: read.gathered.held }));
}
