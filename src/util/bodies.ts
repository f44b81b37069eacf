import { systemTimers, type Timers } from './clock.js';

/**
 * The body bytes held in memory across every request at once, against `maxInflight` (`--max-inflight`):
 * what senders' stalled uploads can make a door hold is bounded by it, not by how many connections they
 * open. Runtime-neutral: listen's server, the Node middleware and the web handler each keep one.
 */
export class InflightBudget {
  used = 0;
  /** The most that was held at once (a relay's status says it). */
  peak = 0;
  /** Requests answered 503 because they would have gone over it. */
  refused = 0;
  /**
   * `oneAlwaysGoes`: a body larger than the whole budget is still taken when nothing else is held (listen's
   * relay door: the relay sends what it has, and one at a time it must go through, or it waits for ever).
   */
  constructor(
    readonly max: number,
    private readonly oneAlwaysGoes = false,
  ) {}

  /** Whether this many bytes more fit now. */
  fits(bytes: number): boolean {
    return this.used + bytes <= this.max || (this.oneAlwaysGoes && this.used === 0);
  }

  take(bytes: number): boolean {
    if (!this.fits(bytes)) return false;
    this.used += bytes;
    if (this.used > this.peak) this.peak = this.used;
    return true;
  }

  give(bytes: number): void {
    this.used -= bytes;
  }
}

/**
 * Whether a body of the declared length could fit in the budget now; counted as refused if not. (Nothing
 * is taken: a body that cannot fit is refused before it is read, one that can is charged as it arrives.)
 */
export function declaredFits(budget: InflightBudget, declared: number | undefined, copies = 1): boolean {
  if (declared === undefined || budget.fits(declared * copies)) return true;
  budget.refused++;
  return false;
}

export type Took = 'ok' | 'too_large' | 'over_budget';

/**
 * One body, gathered as its chunks arrive, within `max` bytes and the budget. The budget is charged for
 * what has arrived: never for a length the sender only declared (eleven connections that declared
 * 256 MiB and sent two bytes each locked a receiver out when it was). The chunks are kept as they came
 * (one chunk, the usual delivery, is the body); once half of a declared length has arrived, a buffer of
 * that length is taken (charged then: at most twice what arrived) and the chunks copied into it, so that a
 * large body is not held twice over at its end. (A buffer grown step by step instead left each step's
 * buffer to the garbage collector: 150 stalled 1 MiB bodies peaked 20 MiB higher.) A body of no declared
 * length is joined at its end, as before. Each byte costs `copies` bytes of the budget: the copies the
 * door holds while the delivery is handled (its text too, when `listen --save-dir` writes it).
 */
export class BodyGatherer<B extends Uint8Array> {
  /** Bytes received. */
  size = 0;
  /** Bytes of the budget taken: given back by `release`. */
  held = 0;
  private chunks: B[] = [];
  private whole: B | undefined;

  constructor(
    private readonly max: number,
    private readonly budget: InflightBudget,
    private readonly alloc: (bytes: number) => B,
    private readonly declared?: number,
    private readonly copies = 1,
  ) {}

  /** Adds a chunk; says whether the body is still within its limits (once not, the request is answered, and `release` called). */
  add(chunk: B): Took {
    const size = this.size + chunk.length;
    // more than it declared: a runtime would not pass that on, but a buffer must never be written past its end
    if (size > this.max || (this.declared !== undefined && size > this.declared)) return 'too_large';
    const whole = this.whole;
    if (whole) {
      if (!this.charge(chunk.length * (this.copies - 1))) return 'over_budget';
      whole.set(chunk, this.size);
    } else if (this.declared !== undefined && size < this.declared && 2 * size >= this.declared) {
      // half of it is here: the rest of its length is set aside now, and what came is copied in
      if (!this.charge(this.declared - this.size + chunk.length * (this.copies - 1))) return 'over_budget';
      const all = this.alloc(this.declared);
      let at = 0;
      for (const c of this.chunks) all.set(c, (at += c.length) - c.length);
      all.set(chunk, at);
      this.whole = all;
      this.chunks = [];
    } else {
      if (!this.charge(chunk.length * this.copies)) return 'over_budget';
      this.chunks.push(chunk);
    }
    this.size = size;
    return 'ok';
  }

  /** The body, whole. */
  body(): B {
    if (this.whole) return this.whole.subarray(0, this.size) as B;
    if (this.chunks.length === 1) return this.chunks[0]!;
    const all = this.alloc(this.size);
    let at = 0;
    for (const c of this.chunks) all.set(c, (at += c.length) - c.length);
    this.chunks = [all];
    return all;
  }

  /** Gives back what the body held of the budget. */
  release(): void {
    this.budget.give(this.held);
    this.held = 0;
  }

  private charge(bytes: number): boolean {
    if (!bytes) return true;
    if (!this.budget.take(bytes)) {
      this.budget.refused++;
      return false;
    }
    this.held += bytes;
    return true;
  }
}

// ---- the one reader of a body, for every door (src/delivery/door.ts) and for the emulator's API

/** The length a request declares (its `Content-Length`): a whole number, else none. The one reader of it, for every door. */
export function declaredLength(text: string | null | undefined): number | undefined {
  return text != null && /^\d+$/.test(text) ? Number(text) : undefined;
}

/** A body's limits: the largest one read, the bytes every request together may hold, and what each byte costs of them. */
export interface BodyLimits {
  maxBody: number;
  budget: InflightBudget;
  /** The copies of its body a request holds while it is handled (listen's text for --save-dir, Web Crypto's signed bytes): each byte costs this many of the budget. */
  copies?: number;
}

/** Why a body was not read whole. */
export type BodyRefused = { kind: 'too_large' | 'over_budget' | 'timed_out'; size: number } | { kind: 'aborted' };

/** A body refused on the length it declares, before a byte of it is read: over the limit, or it cannot fit in the budget now. */
export function lengthRefused(declared: number | undefined, limits: BodyLimits): BodyRefused | undefined {
  if (declared === undefined) return undefined;
  if (declared > limits.maxBody) return { kind: 'too_large', size: declared };
  return declaredFits(limits.budget, declared, limits.copies) ? undefined : { kind: 'over_budget', size: declared };
}

/** Where a runtime gives a body's chunks as they arrive. */
export interface ChunkSink<B extends Uint8Array> {
  /** A chunk arrived; false: the body is refused, and the runtime reads no more of it. */
  chunk(chunk: B): boolean;
  /** The body ended. */
  end(): void;
  /** The request ended before its body did (the client went away, or the server cut it off). */
  gone(): void;
}

/** How a runtime gives a request's body: the length it declares, its chunks as they arrive, and buffers of its kind. */
export interface BodySource<Req, Res, B extends Uint8Array> {
  /** The text of its `Content-Length`. */
  length(req: Req): string | null | undefined;
  /** Gives the body's chunks to `sink` as they arrive; returns how to stop reading (the body took too long). */
  stream(req: Req, res: Res, sink: ChunkSink<B>): (() => void) | undefined;
  /** A buffer of this many bytes, of the runtime's kind (Node's Buffer). */
  alloc(bytes: number): B;
}

/**
 * Reads a body as it arrives, within the limits and the time allowed: refused on its declared length
 * before a byte is read, else gathered (BodyGatherer: the budget is charged for what has arrived),
 * and stopped at the limit or the budget. A callback, not a promise: the answer is then written in the
 * same turn as the last chunk arrives (with a promise, `listen`'s answer lost its batching with the
 * request's own I/O: 189,356 instructions a delivery against 158,751-179,109, callgrind, three runs).
 */
export function readWithin<Req, Res, B extends Uint8Array>(
  io: BodySource<Req, Res, B>,
  req: Req,
  res: Res,
  rules: BodyLimits & { timeoutMs?: number; timers?: Timers },
  done: (read: { body: B; gathered: BodyGatherer<B> } | BodyRefused) => void,
): void {
  const declared = declaredLength(io.length(req));
  const early = lengthRefused(declared, rules);
  if (early) return done(early);
  const gathered = new BodyGatherer<B>(rules.maxBody, rules.budget, io.alloc, declared, rules.copies);
  let finished = false;
  let timer: unknown;
  const timers = rules.timers ?? systemTimers;
  const finish = (read: { body: B; gathered: BodyGatherer<B> } | BodyRefused) => {
    if (finished) return;
    finished = true;
    if (timer !== undefined) timers.clear(timer);
    if ('kind' in read) gathered.release();
    done(read);
  };
  const stop = io.stream(req, res, {
    chunk(chunk) {
      if (finished) return false;
      const took = gathered.add(chunk);
      if (took === 'ok') return true;
      finish({ kind: took, size: gathered.size + chunk.length });
      return false;
    },
    // the usual small delivery arrives as one chunk, and is kept as it is
    end: () => finish({ body: gathered.body(), gathered }),
    gone: () => finish({ kind: 'aborted' }),
  });
  if (rules.timeoutMs !== undefined && !finished) {
    timer = timers.set(() => {
      finish({ kind: 'timed_out', size: gathered.size });
      stop?.();
    }, rules.timeoutMs);
  }
}

/** How a fetch runtime gives a body (a Request's, a Worker's): its chunks as its stream yields them. The web doors' reading. */
export const webBody = {
  stream(request: { body: ReadableStream<Uint8Array> | null }, sink: ChunkSink<Uint8Array>): (() => void) | undefined {
    const body = request.body;
    if (!body) {
      sink.end();
      return undefined;
    }
    const reader = body.getReader();
    const stop = () => void reader.cancel().catch(() => undefined);
    void (async () => {
      try {
        for (;;) {
          const next = await reader.read();
          if (next.done) return sink.end();
          if (!sink.chunk(next.value)) return stop();
        }
      } catch {
        sink.gone();
      }
    })();
    return stop;
  },
  alloc: (bytes: number): Uint8Array => new Uint8Array(bytes),
};
