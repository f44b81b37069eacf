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

/** A body's buffer grows by doubling from at least this much, within what the sender declared. */
const FIRST_GROWTH = 16 * 1024;

export type Took = 'ok' | 'too_large' | 'over_budget';

/**
 * One body, gathered as its chunks arrive, within `max` bytes and the budget. The budget is charged for
 * what is held, as it arrives: never for a length the sender only declared (eleven connections that
 * declared 256 MiB and sent two bytes each locked a receiver out when it was). A body of one chunk (the
 * usual delivery) is kept as it came; a longer one is copied into a buffer that doubles, at most to its
 * declared length, so that it is never held twice over. Each byte costs `copies` bytes of the budget: the
 * copies the door holds while the delivery is handled (its text too, when `listen --save-dir` writes it).
 */
export class BodyGatherer<B extends Uint8Array> {
  /** Bytes received. */
  size = 0;
  /** Bytes of the budget taken: given back by `release`. */
  held = 0;
  private first: B | undefined;
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
    const extra = this.copies - 1;
    if (this.first === undefined && this.whole === undefined) {
      if (!this.charge(chunk.length * this.copies)) return 'over_budget';
      this.first = chunk;
      this.size = size;
      return 'ok';
    }
    let whole = this.whole;
    if (whole === undefined || size > whole.length) {
      const limit = this.declared ?? this.max;
      const capacity = Math.min(limit, Math.max(size, 2 * (whole?.length ?? this.size), FIRST_GROWTH));
      if (!this.charge(capacity - (whole?.length ?? this.size) + chunk.length * extra)) return 'over_budget';
      const grown = this.alloc(capacity);
      grown.set(whole ? whole.subarray(0, this.size) : this.first!, 0);
      this.whole = whole = grown;
      this.first = undefined;
    } else if (extra && !this.charge(chunk.length * extra)) return 'over_budget';
    whole.set(chunk, this.size);
    this.size = size;
    return 'ok';
  }

  /** The body, whole. */
  body(): B {
    if (this.whole) return this.whole.subarray(0, this.size) as B;
    return this.first ?? this.alloc(0);
  }

  /** Gives back what the body held of the budget. */
  release(): void {
    this.budget.give(this.held);
    this.held = 0;
  }

  private charge(bytes: number): boolean {
    if (!this.budget.take(bytes)) {
      this.budget.refused++;
      return false;
    }
    this.held += bytes;
    return true;
  }
}
