import { DEFAULT_TOLERANCE } from '../signing/rules.js';

const MiB = 1024 * 1024;

/**
 * The one table of defaults: `listen`'s flags (their values and their help), the handler library's
 * options, the stores, the emulator and `doctor` read them here. A default is changed here and nowhere
 * else. (The tolerance's home is the verifier's rules, which sit below the core: it is listed here by
 * reference.)
 */
export const DEFAULTS = {
  /** How long a processed (trigger, subscription) pair is remembered: `--dedupe-ttl`, the stores' `ttlMs`. */
  pairTtlMs: 24 * 3_600_000,
  /** How long a claim holds unless extended: `--claim-timeout`, the stores' `leaseMs`. The core extends a claim every third of it. */
  claimLeaseMs: 60_000,
  /** A handler still running after this is stopped: its claim let go, 500, `handler_timed_out` (two leases). */
  handlerTimeoutMs: 120_000,
  /** The PostgreSQL schema of the shared store's tables: `--store-schema`, `openStore`'s `schema`. */
  schema: 'wxhooks',
  /** Where processed pairs are kept when no store is named (`--store`, else WXHOOKS_STORE_URL, else this). */
  storeUrl: 'file',
  /** Seconds a timestamp may be off the clock, either way: `--tolerance`, the handlers' `tolerance`. */
  toleranceSeconds: DEFAULT_TOLERANCE,
  /** The largest body read: `--max-body`, the handlers' `maxBody`. Larger is answered 413. */
  maxBodyBytes: 25 * MiB,
  /** The body bytes all requests together may hold while they are read and handled: `--max-inflight`, `maxInflight`. */
  maxInflightBytes: 256 * MiB,
  /** How long your app may take to answer a forwarded delivery: `--forward-timeout`. */
  forwardTimeoutMs: 30_000,
  /** Headers must arrive within this (`--read-timeout`), and a whole body within BODY_READS times it. */
  readTimeoutMs: 10_000,
  /** What a 503 tells the sender to wait, in seconds (`Retry-After`). */
  retryAfterSeconds: 5,
  /** The emulator's delays before each retry of a failed delivery (`emulator --retry-delays`). */
  retryDelaysMs: [5_000, 30_000, 120_000] as readonly number[],
  /** How long the processed-pairs file may stay unwritable before `listen` stops (exit 10). */
  storeGiveUpMs: 60_000,
  /** Expired pairs are swept at least this often (a store sweeps a TTL under four of these every quarter TTL, at least every second: `sweepEvery`). */
  sweepIntervalMs: 60_000,
  /** How often a store tries again the processed pairs it could not write (and the file store looks at its file and its clocks). */
  storeWatchMs: 1_000,
  /** How long a pairs file's opener waits for a brief holder (`reconcile --catch-up` handing over) to let it go, before it refuses. */
  storeBriefWaitMs: 60_000,
  /** The history (`--inspect`, a postgres store's): how many verified requests are kept (`--history`). */
  historyRows: 500,
  /** The history: the body bytes the kept verified requests may hold together (`--history-size`). */
  historyBytes: 64 * MiB,
  /** The history: how much of an older verified body is kept past `historyBytes`, and of a refused one. */
  historyPartBytes: 4096,
  /** The history: how many refused requests are kept, apart from the verified ones. */
  historyRefusedRows: 100,
  /** `reconcile`, `catchUp` and the run watch: the runs looked at, by initialisation time, when no window is given (`--since`). */
  reconcileSinceMs: 24 * 3_600_000,
  /** `listen --watch-runs`, `runs watch`: how often the forecast API is asked what it published (`--watch-interval`). */
  watchIntervalMs: 60_000,
  /** `listen --watch-runs`, `runs watch`: a forecast hour available this long and not delivered is late (`--late-after`). */
  lateAfterMs: 10 * 60_000,
  /** How many pairs the in-memory store keeps at most; past it, the oldest are forgotten. */
  memoryPairs: 100_000,
  /** A sink's `?dedupe=`: the JetStream duplicate window of a stream we create, the life of a Redis dedupe key (as `--dedupe-ttl`). */
  sinkDedupeMs: 24 * 3_600_000,
  /** A sink's `?keep=`: how long a message stays in the stream (JetStream's max_age; Redis trims older entries at each append). */
  sinkKeepMs: 7 * 86_400_000,
  /** How long a publish waits for the broker's acknowledgement before the delivery is answered 503. */
  sinkPublishTimeoutMs: 5_000,
  /** A sink consumer's `concurrency`: messages handled at once by one worker. */
  consumerConcurrency: 16,
  /** A sink consumer's `retryDelayMs`: how long a failed message waits before it is delivered again. */
  consumerRetryDelayMs: 10_000,
  /** A sink consumer's `maxDeliveries`: deliveries of one message before it goes to the dead letters. */
  consumerMaxDeliveries: 5,
  /** A sink consumer's `claimTimeoutMs`: how long a message may go unanswered before another worker gets it (as `--claim-timeout`). */
  consumerClaimTimeoutMs: 60_000,
} as const;

/** How often a store sweeps pairs past a TTL of `ttlMs`: every quarter of it, at least every DEFAULTS.storeWatchMs, at most every DEFAULTS.sweepIntervalMs. */
export const sweepEvery = (ttlMs: number): number => Math.max(DEFAULTS.storeWatchMs, Math.min(DEFAULTS.sweepIntervalMs, Math.floor(ttlMs / 4)));

/** A whole request (its body included) must arrive within this many read timeouts. */
export const BODY_READS = 6;
