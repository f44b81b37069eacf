import { DEFAULT_SCHEME, type LayoutName, type Scheme } from '../signing/layouts.js';
import { DEFAULT_TOLERANCE } from '../signing/rules.js';

// A bundle drops a default it does not read only when its value is known to have no side effect: to
// esbuild a product is not (`wxhooks/web` kept eleven unread ones, 48 B of its min+gzip), and a call of a
// function marked as having none is.
/* @__NO_SIDE_EFFECTS__ */ const mib = (n: number): number => n * 1024 * 1024;
/* @__NO_SIDE_EFFECTS__ */ const minutes = (n: number): number => n * 60_000;
/* @__NO_SIDE_EFFECTS__ */ const hours = (n: number): number => n * 3_600_000;
/* @__NO_SIDE_EFFECTS__ */ const days = (n: number): number => n * 86_400_000;

/**
 * The one table of defaults: `listen`'s flags (their values and their help), the handler library's
 * options, the stores, the emulator and `doctor` read them here. A default is changed here and nowhere
 * else. (The tolerance's and the scheme's homes are the verifier's rules and layouts, which sit below the
 * core: they are listed here by reference.)
 *
 * The table is this module: each default is an export of its own, read as `DEFAULTS.name` through
 * `import * as DEFAULTS from '…/defaults.js'`. A bundler then keeps only the defaults a bundle reads (an
 * object's unused keys are never dropped): `wxhooks/web` reads 8 of the 80, and this saves it 0.6 KB of
 * its min+gzip (BENCHMARKS.md, wxhooks/web).
 */

/** `listen --port`: where deliveries are taken (and what `doctor` looks at when the webhook's URL is not local). */
export const listenPort = 8787;
/** The address `listen`, `emulator` and `relay serve` bind unless told (`--host`): this machine only. */
export const host = '127.0.0.1';
/** `listen --path`: the path deliveries are POSTed to (the handler library answers every path unless given one). */
export const listenPath = '/';
/** `listen --inspect` without an address: the inspector page's port, on `host`. */
export const inspectPort = 8789;
/** How long a request to the service may take, retries included: `--timeout`, `catchUp`'s `timeoutMs`. */
export const requestTimeoutMs = 30_000;
/** How long a processed (trigger, subscription) pair is remembered: `--dedupe-ttl`, the stores' `ttlMs`. */
export const pairTtlMs: number = hours(24);
/** How long a claim holds unless extended: `--claim-timeout`, the stores' `leaseMs`. The core extends a claim every third of it. */
export const claimLeaseMs = 60_000;
/**
 * A handler still running after this many of its store's leases is stopped: its claim let go, 500,
 * `handler_timed_out` (the handlers' `handlerTimeoutMs` when not given; 120 s with the default lease).
 */
export const handlerTimeoutLeases = 2;
/** The PostgreSQL schema of the shared store's tables: `--store-schema`, `openStore`'s `schema`. */
export const schema = 'wxhooks';
/** Where processed pairs are kept when no store is named (`--store`, else WXHOOKS_STORE_URL, else this). */
export const storeUrl = 'file';
/** Which signature layouts are tried: `--scheme`, the handlers' `scheme` (its home is the layout table's). */
export const scheme: Scheme = DEFAULT_SCHEME;
/** Seconds a timestamp may be off the clock, either way: `--tolerance`, the handlers' `tolerance`. */
export const toleranceSeconds: typeof DEFAULT_TOLERANCE = DEFAULT_TOLERANCE;
/** The largest body read: `--max-body`, the handlers' `maxBody`. Larger is answered 413. */
export const maxBodyBytes: number = mib(25);
/** The body bytes all requests together may hold while they are read and handled: `--max-inflight`, `maxInflight`. */
export const maxInflightBytes: number = mib(256);
/** How long your app may take to answer a forwarded delivery: `--forward-timeout`. */
export const forwardTimeoutMs = 30_000;
/** Headers must arrive within this (`--read-timeout`), and a whole body within BODY_READS times it. */
export const readTimeoutMs = 10_000;
/** How long `listen` keeps an idle connection open for the sender's next request. */
export const keepAliveMs = 5_000;
/** On close, how long `listen`'s open connections may finish their requests before they are cut. */
export const closeGraceMs = 2_000;
/** A connection answered and cut off (a timeout, malformed HTTP) is destroyed at the latest this long after, whatever the client does. */
export const cutOffMs = 1_000;
/** The connections `listen` keeps to your app (`--forward-to`), and how long an idle one stays open. */
export const forwardConnections = 64;
export const forwardKeepAliveMs = 10_000;
/** What a 503 tells the sender to wait, in seconds (`Retry-After`). */
export const retryAfterSeconds = 5;
/** The emulator's delays before each retry of a failed delivery (`emulator --retry-delays`). */
export const retryDelaysMs = [5_000, 30_000, 120_000] as readonly number[];
/** `emulator --port`. */
export const emulatorPort = 8788;
/** `emulator --attempt-timeout`: a delivery attempt with no answer by then has failed. */
export const emulatorAttemptTimeoutMs = 10_000;
/** `emulator --concurrency`: delivery attempts in flight at once, across every webhook. */
export const emulatorConcurrency = 64;
/** `emulator --shape`: the field names of the service's documentation (`live`: the live service's). */
export const emulatorShape = 'documented' as 'documented' | 'live';
/** `emulator deliveries --last`: the attempts listed. */
export const emulatorAttemptsShown = 50;
/** `trigger run --hours` and `--interval`: the forecast hours of the run published, and the pause between them. */
export const triggerHours = '0-24/6';
export const triggerIntervalMs = 0;
/** How long the processed-pairs file may stay unwritable before `listen` stops (exit 10). */
export const storeGiveUpMs = 60_000;
/** Expired pairs are swept at least this often (a store sweeps a TTL under four of these every quarter TTL, at least every second: `sweepEvery`). */
export const sweepIntervalMs = 60_000;
/** How often a store tries again the processed pairs it could not write (and the file store looks at its file and its clocks). */
export const storeWatchMs = 1_000;
/** How long a pairs file's opener waits for a brief holder (`reconcile --catch-up` handing over) to let it go, before it refuses. */
export const storeBriefWaitMs = 60_000;
/** The history (`--inspect`, a postgres store's): how many verified requests are kept (`--history`). */
export const historyRows = 500;
/** The history: the body bytes the kept verified requests may hold together (`--history-size`). */
export const historyBytes: number = mib(64);
/** The history: how much of an older verified body is kept past `historyBytes`, and of a refused one. */
export const historyPartBytes = 4096;
/** The history: how many refused requests are kept, apart from the verified ones. */
export const historyRefusedRows = 100;
/**
 * The history's runs view (`--inspect`): how many model runs it keeps, the newest by initialisation time.
 * Each run holds its hours, so a receiver that runs for months would otherwise hold every hour it ever saw.
 */
export const historyRuns = 200;
/** `reconcile`, `catchUp` and the run watch: the runs looked at, by initialisation time, when no window is given (`--since`). */
export const reconcileSinceMs: number = hours(24);
/** `listen --watch-runs`, `runs watch`: how often the forecast API is asked what it published (`--watch-interval`). */
export const watchIntervalMs = 60_000;
/** `listen --watch-runs`, `runs watch`: a forecast hour available this long and not delivered is late (`--late-after`). */
export const lateAfterMs: number = minutes(10);
/** How many pairs the in-memory store keeps at most; past it, the oldest are forgotten. */
export const memoryPairs = 100_000;
/** A sink's `?dedupe=`: the JetStream duplicate window of a stream we create, the life of a Redis dedupe key (as `--dedupe-ttl`). */
export const sinkDedupeMs: number = hours(24);
/** A sink's `?keep=`: how long a message stays in the stream (JetStream's max_age; Redis trims older entries at each append). */
export const sinkKeepMs: number = days(7);
/** How long a publish waits for the broker's acknowledgement before the delivery is answered 503. */
export const sinkPublishTimeoutMs = 5_000;
/** How long a sink or a consumer waits for its broker to answer at start before it gives up (exit 6). */
export const sinkConnectTimeoutMs = 5_000;
/** How often an open sink asks its broker whether it dropped what no worker had read (Redis evictions, a NATS stream's limits). */
export const sinkWatchMs = 5_000;
/** How many of a stream's newest messages `deliveries list --sink` shows. */
export const sinkListLimit = 100;
/** A sink consumer's `concurrency`: messages handled at once by one worker. */
export const consumerConcurrency = 16;
/** A sink consumer's `retryDelayMs`: how long a failed message waits before it is delivered again. */
export const consumerRetryDelayMs = 10_000;
/** A sink consumer's `maxDeliveries`: deliveries of one message before it goes to the dead letters. */
export const consumerMaxDeliveries = 5;
/** A sink consumer's `claimTimeoutMs`: how long a message may go unanswered before another worker gets it (as `--claim-timeout`). */
export const consumerClaimTimeoutMs = 60_000;
/** `/readyz` (`--metrics`): how long a check (the store asked, a broker) may take before it counts as not ready. */
export const readyCheckMs = 2_000;
/** OpenTelemetry: where spans go when only OTEL_TRACES_EXPORTER=otlp says to send them (the OTLP/HTTP default). */
export const otlpTracesUrl = 'http://localhost:4318/v1/traces';
/** The model a command names when none is given: `send`'s generated body, `trigger`, the emulator's events, MCP's send_delivery. */
export const model = 'wm-6';
/** `wxhooks mcp`'s wait_for_delivery and wait_for_run: how long they wait unless told (`timeout_seconds`). */
export const mcpWaitSeconds = 30;
/** `send`'s generated body (`--type`, `--webhook-id`, `--subscription-id`, `--model`) and how it is signed (`--layout`); the MCP server's send_delivery too. */
export const sendType = 'forecast_hour.available';
export const sendWebhookId = '1';
export const sendSubscriptionId = '1';
export const sendLayout: 'standard' = 'standard' satisfies LayoutName;

// The relay (`relay serve`, the Worker, `listen --relay`): its flags and vars, its protocol, its client.
/** `relay serve --port`. */
export const relayPort = 8790;
/** `relay serve --store`: a folder (`file`) or a postgres:// URL. */
export const relayStore = 'file';
/** `relay serve --schema`: the PostgreSQL schema of the relay's tables. */
export const relaySchema = 'wxhooks_relay';
/** How long a delivery waits for `listen`, and a channel unused is kept: `--keep`, RELAY_KEEP_SECONDS. */
export const relayKeepMs: number = days(7);
/** The bytes of deliveries kept at most, as the store takes them (a file's whole blocks): `--max-bytes`, RELAY_MAX_BYTES. */
export const relayMaxBytes: number = mib(256);
/** Body bytes read at once across every inbound request, in both hosts (a Worker has 128 MB): `--max-inflight`. */
export const relayMaxInflightBytes: number = mib(32);
/** The channels a relay keeps at most (a token holder cannot make more): `--max-channels`, RELAY_MAX_CHANNELS. */
export const relayMaxChannels = 100;
/** How often `relay serve` drops what is older than kept. */
export const relaySweepIntervalMs = 60_000;
/** How often the Worker's Durable Object wakes to do the same (each alarm wakes it; it also does at each status). */
export const relayWorkerSweepIntervalMs = 3_600_000;
/** What a 503 for a spent byte budget tells the service to wait, in seconds: room comes back only as `listen` acknowledges. */
export const relayFullRetryAfterSeconds = 60;
/** `relay serve --store file`: the bytes of the newest deliveries also kept in memory, so that handing them over reads no file. */
export const relayMemoryBytes: number = mib(32);
/** A channel's replaced secret still verifies, at `listen`, what the relay received before the change, for this long. */
export const relaySecretGraceMs: number = hours(24);
/** The protocol's window: deliveries, and body bytes, handed over and not yet acknowledged, unless the client asks otherwise. */
export const relayWindow = 32;
export const relayWindowBytes: number = mib(8);
/** The most body bytes a client may ask to have handed over and not acknowledged. */
export const relayMaxWindowBytes: number = mib(32);
/** The relay client connects again after a failed connection after this, doubling (with jitter) up to the most. */
export const relayRetryFirstMs = 500;
export const relayRetryMostMs = 30_000;
/** A delivery `listen` did not acknowledge is handed over again after this, doubling (with jitter) up to the most. */
export const relayRedeliverFirstMs = 1_000;
export const relayRedeliverMostMs = 60_000;
/** A connection to the relay not open within this is given up, and tried again. */
export const relayConnectTimeoutMs = 10_000;
/** How long the relay client, stopping, waits for the relay to delete a temporary channel and close. */
export const relayCloseWaitMs = 5_000;
/** The client's keep-alive: a connection silent for more than two of these is cut, and the relay lets go of a channel's connection silent for STALE_HEARTBEATS of them. */
export const relayHeartbeatMs = 30_000;
/**
 * Relayed deliveries `listen` handles at once when it forwards nothing (with --forward-to: one, in the
 * relay's order). Measured (BENCHMARKS.md, relay): a backlog of 2,000 drained at 0.36× a direct listen
 * handled 1 at a time (window 8), 0.43-0.93× at 16 (window 64).
 */
export const relayConcurrency = 16;

/** How often a store sweeps pairs past a TTL of `ttlMs`: every quarter of it, at least every storeWatchMs, at most every sweepIntervalMs. */
export const sweepEvery = (ttlMs: number): number => Math.max(storeWatchMs, Math.min(sweepIntervalMs, Math.floor(ttlMs / 4)));

/** A whole request (its body included) must arrive within this many read timeouts. */
export const BODY_READS = 6;
