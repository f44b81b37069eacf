// The figures a long-running door keeps of itself, in plain JavaScript: counters, gauges read when asked,
// and histograms of fixed buckets, each with a name and labels as Prometheus names them. They are what
// `/metrics` exposes (src/observe/prometheus.ts renders them through prom-client, loaded only then), what
// the inspector page and `wxhooks mcp` show (the same numbers: a quantile is read from the same buckets,
// as Prometheus' histogram_quantile reads them), and they cost a delivery a few map updates, whether or
// not anything reads them. No imports: the inspector page bundles the types.

/** One label set's key: the values joined by a character no label value of ours holds. */
const SEP = '\u0001';

/** The most label sets a series keeps; past it, every new one is counted under `other` (no sender can grow our memory). */
export const MAX_SERIES = 200;

/** What a series of any kind is: a Prometheus family (name, help, type, label names) and its values. */
export interface Family {
  readonly name: string;
  readonly help: string;
  readonly type: 'counter' | 'gauge' | 'histogram';
  readonly labels: readonly string[];
}

/** A label set as a key (the values in the order of the family's labels), bounded by MAX_SERIES. */
function keyOf(map: Map<string, unknown>, values: readonly string[]): string {
  const key = values.length === 1 ? values[0]! : values.join(SEP);
  if (map.has(key) || map.size < MAX_SERIES) return key;
  return values.map(() => 'other').join(SEP);
}

export const labelsOf = (key: string): string[] => key.split(SEP);

/** A count that only grows (requests, errors, late hours said). */
export class Counter implements Family {
  readonly type = 'counter';
  readonly values: Map<string, number> = new Map<string, number>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labels: readonly string[] = [],
  ) {}

  inc(values: readonly string[] = [], by = 1): void {
    const key = keyOf(this.values, values);
    this.values.set(key, (this.values.get(key) ?? 0) + by);
  }

  /** The count of one label set (0 when none). */
  get(values: readonly string[] = []): number {
    return this.values.get(values.join(SEP)) ?? 0;
  }

  /** Every label set with its count, as label values and a number. */
  entries(): [string[], number][] {
    return [...this.values].map(([k, v]) => [this.labels.length ? labelsOf(k) : [], v]);
  }
}

/** A value read when it is asked for (the bytes in flight, a relay's backlog): nothing is kept between reads. */
export class Gauge implements Family {
  readonly type = 'gauge';
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labels: readonly string[],
    readonly read: () => [string[], number][] | Promise<[string[], number][]>,
  ) {}
}

/** One histogram's counts: how many fell at or under each bound, their sum and their count. */
export class Buckets {
  /** Per bound, how many fell in (bound[i-1], bound[i]]; the last is above every bound (+Inf). */
  readonly counts: number[];
  sum = 0;
  count = 0;
  constructor(readonly bounds: readonly number[]) {
    this.counts = new Array<number>(bounds.length + 1).fill(0);
  }

  observe(v: number): void {
    const b = this.bounds;
    let i = 0;
    while (i < b.length && v > b[i]!) i++;
    this.counts[i]!++;
    this.sum += v;
    this.count++;
  }

  /** Adds another histogram's counts (of the same bounds) to these. */
  add(o: Buckets): void {
    for (let i = 0; i < this.counts.length; i++) this.counts[i]! += o.counts[i]!;
    this.sum += o.sum;
    this.count += o.count;
  }

  /**
   * The q-quantile (0..1), as Prometheus' histogram_quantile computes it from these buckets: linear within
   * the bucket it falls in (from 0 for the first), the highest bound when it falls above every bound;
   * undefined when nothing was observed.
   */
  quantile(q: number): number | undefined {
    if (!this.count) return undefined;
    const rank = q * this.count;
    let seen = 0;
    for (let i = 0; i < this.counts.length; i++) {
      const before = seen;
      seen += this.counts[i]!;
      if (seen < rank || this.counts[i] === 0) continue;
      if (i === this.bounds.length) return this.bounds[i - 1];
      const lower = i === 0 ? 0 : this.bounds[i - 1]!;
      const upper = this.bounds[i]!;
      return lower + ((upper - lower) * (rank - before)) / this.counts[i]!;
    }
    return this.bounds.at(-1);
  }
}

/** A distribution of values by label set (latencies, lags), in fixed buckets. */
export class Histogram implements Family {
  readonly type = 'histogram';
  readonly values: Map<string, Buckets> = new Map<string, Buckets>();
  constructor(
    readonly name: string,
    readonly help: string,
    readonly labels: readonly string[],
    readonly bounds: readonly number[],
  ) {}

  observe(values: readonly string[], v: number): void {
    const key = keyOf(this.values, values);
    let b = this.values.get(key);
    if (!b) this.values.set(key, (b = new Buckets(this.bounds)));
    b.observe(v);
  }

  /** Every label set's buckets together (or those `keep` picks by their label values). */
  merged(keep?: (labels: string[]) => boolean): Buckets {
    const all = new Buckets(this.bounds);
    for (const [k, b] of this.values) if (!keep || keep(this.labels.length ? labelsOf(k) : [])) all.add(b);
    return all;
  }

  entries(): [string[], Buckets][] {
    return [...this.values].map(([k, b]) => [this.labels.length ? labelsOf(k) : [], b]);
  }
}

export type Series = Counter | Gauge | Histogram;

/** Bounds in seconds. */
export const BOUNDS = {
  /** A signature's check: tens of microseconds. */
  verify: [0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05],
  /** The app's answer, a store's or a broker's: milliseconds to seconds. */
  call: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
  /** A forecast's delivery lag: seconds to hours. */
  lag: [1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 10800, 43200],
  /** How long a message waited in the stream before a worker took it. */
  stream: [0.01, 0.05, 0.1, 0.5, 1, 5, 15, 60, 300, 900, 3600],
} as const;
