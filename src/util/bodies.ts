/**
 * The body bytes held in memory across every request at once, against `maxInflight` (`--max-inflight`):
 * what senders' stalled uploads can make a door hold is bounded by it, not by how many connections they
 * open. Runtime-neutral: listen's server, the Node middleware and the web handler each keep one.
 */
export class InflightBudget {
  used = 0;
  /** Requests answered 503 because they would have gone over it. */
  refused = 0;
  constructor(readonly max: number) {}

  take(bytes: number): boolean {
    if (this.used + bytes > this.max) return false;
    this.used += bytes;
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
  if (declared === undefined || budget.used + declared * copies <= budget.max) return true;
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
