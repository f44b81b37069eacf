import type { Timers } from '../delivery/runner.js';
import type { PairStore } from '../delivery/store.js';
import { RefusedError, UnreachableError, UsageError } from '../errors.js';
import type { ConsumedMessage, ConsumerEvent, VerifiedMessage } from './consumer.js';
import type { SinkDelivery } from './message.js';
import type { SinkView } from './view.js';

/**
 * What the sinks share whichever the broker: a kind of sink (what the registry, src/sinks/kinds.ts, holds),
 * a parsed sink URL, the publisher's and the consumer's interfaces, their errors, the connection's state.
 */

/**
 * A sink URL, parsed and checked once (src/sinks/sink-url.ts): its credentials registered with `redact`,
 * `shown` what every message uses. `S` is the kind's own settings from the query (NATS: the stream's name;
 * Redis: the database).
 */
export interface SinkTarget<S = unknown> {
  /** The kind's name in the registry: `nats`, `redis`. */
  kind: string;
  /** The URL as it may be shown: its password (or token) replaced by `***`. */
  shown: string;
  host: string;
  port: number;
  username?: string;
  password?: string;
  /** The scheme asks for TLS (`rediss://`). */
  tls: boolean;
  /** The path: NATS's subject published to, Redis's stream key. */
  name: string;
  dedupeMs: number;
  keepMs: number;
  /** `?drops=accept`: run on a broker that may drop what no worker has read (said at start), rather than refuse it. */
  acceptDrops: boolean;
  settings: S;
}

/**
 * A kind of sink: everything wxhooks knows of one broker, in the broker's own file (src/sinks/nats.ts,
 * redis.ts). The registry lists them; the URL parser, `listen --sink`'s help, `deliveries list --sink` and
 * the tests' broker table read them from it, so a new broker is a new file and its line in the registry.
 */
export interface SinkDefinition<S = unknown> {
  /** Its name: the registry's key, `SinkTarget.kind`, `SinkView.broker`. */
  readonly kind: string;
  /** What it is, in the flags' help: `NATS JetStream`. */
  readonly label: string;
  /** Its URL schemes (no colon), each with whether it means TLS. */
  readonly schemes: Readonly<Record<string, { tls: boolean }>>;
  readonly defaultPort: number;
  /** Its URL's shape, as help and messages show it: `nats://host:4222/SUBJECT`. */
  readonly example: string;
  /** A user name without a password is a token (NATS): shown as `***` and kept from the output too. */
  readonly userIsToken?: boolean;
  /** What is wrong with a (percent-decoded) path, and what the path should be; undefined when it is right. */
  pathProblem(path: string): { problem: string; hint: string } | undefined;
  /** A path naming a stream of its own for `label` (the tests', and the guide's): `label.deliveries`. */
  pathFor(label: string): string;
  /** Its own query settings, beside the shared `dedupe`, `keep` and `drops`: their names, and how they are read (a UsageError for a bad value). */
  readonly settings: { names: readonly string[]; parse(get: (name: string) => string | undefined, what: string): S };
  /** Connects, finds or makes its stream, and says what the broker as configured can drop. */
  publisher(t: SinkTarget<S>, options: SinkOptions): Promise<Sink>;
  consumer(t: SinkTarget<S>, options: ConsumeOptions): Promise<SinkConsumer>;
  read(t: SinkTarget<S>, limit: number): Promise<SinkView>;
}

/** Declares a kind of sink, its settings' type checked against its functions. */
export const defineSink = <K extends string, S>(definition: SinkDefinition<S> & { kind: K }): SinkDefinition<S> & { kind: K } => definition;

/**
 * What the broker, as configured, can drop before every worker read it, found when a sink opens: `listen`
 * refuses such a sink (exit 2) unless its URL says `?drops=accept`, and then says it at start.
 */
export interface DropRisk {
  /** What it can drop, why, and what that does to the deliveries, in words. */
  what: string;
  /** The setting to change, as a command or a line of the broker's configuration. */
  fix: string;
}

/** The broker could not be reached, or did not acknowledge in time: the message is not known to be in the stream, so try again. */
export class SinkUnavailableError extends UnreachableError {}

/** The broker refused the message for good (larger than it takes): sending it again will not help. */
export class SinkRefusedError extends RefusedError {}

/** Called when the broker is found lost, and when it is back: one call each way. */
export type ConnectionListener = (state: 'lost' | 'restored', reason?: string) => void;

export interface SinkOptions {
  /** How long a publish waits for the broker's acknowledgement before it fails (default 5 s). */
  timeoutMs?: number;
  onConnection?: ConnectionListener;
  /**
   * Told, while the sink is open, when the broker is found to have dropped what no worker had read (Redis
   * evicted keys; a NATS stream's first message passed one a group had not read), or to be set to.
   */
  onDrops?: (what: string) => void;
  /** How often the broker is asked about it (default DEFAULTS.sinkWatchMs). */
  watchMs?: number;
}

export interface PublishResult {
  /** The message's id in the stream: the JetStream sequence, or the Redis entry id (the first one's, for a duplicate). */
  id: string;
  /** The pair was in the stream already (within the dedupe window): nothing was added. */
  duplicate: boolean;
}

/** Where a sink writes, as it found or made it. */
export interface SinkStream {
  /** The JetStream stream, or the Redis stream's key. */
  name: string;
  /** The subject published to (NATS). */
  subject?: string;
  /** Whether this sink created it (NATS: a stream found holding the subject keeps its own settings). */
  created: boolean;
  /** How long a pair is remembered by the broker: the stream's duplicate window, or the dedupe key's life. */
  dedupeMs: number;
  /** How long a message is kept (0: no limit). */
  keepMs: number;
  /** How to make the broker remember a pair longer (`listen` says it when the window is shorter than its own). */
  dedupeFix: string;
  /** What the broker can drop unread (found at open): a sink with any is refused unless its URL says `?drops=accept`. */
  drops: DropRisk[];
}

/** Publishes verified deliveries to a stream, at most once per pair within the dedupe window. */
export interface Sink {
  readonly kind: string;
  /** The sink URL without its password. */
  readonly where: string;
  readonly stream: SinkStream;
  /** False from the moment the broker is found lost until it is found back. */
  readonly connected: boolean;
  /**
   * Resolves once the broker has the message (JetStream's publish acknowledgement; the Redis script's
   * answer), or found its pair there already. Rejects with SinkUnavailableError when the broker is away
   * or did not answer within the timeout (the message may or may not be there: publishing again is
   * safe), and with SinkRefusedError when it will never take it.
   */
  publish(delivery: SinkDelivery): Promise<PublishResult>;
  close(): Promise<void>;
}

export interface ConsumeOptions<V extends VerifiedMessage = VerifiedMessage> {
  /** The consumer group (a JetStream durable consumer, a Redis consumer group): workers of one group share the messages. */
  group: string;
  /**
   * Runs for each message (once `verify`, if given, found it sound): the message is acknowledged when it
   * resolves, and delivered again when it throws or runs past `handlerTimeoutMs`. `signal` is aborted when
   * it is given up on (its time is up, or the worker stops): a handler may stop its work then.
   */
  handler(message: ConsumedMessage, verified: V | undefined, signal: AbortSignal): unknown;
  /**
   * Verifies a message before its pair is claimed, and gives the pair from its signed content; throws
   * MessageRefusedError for one that does not verify. A message whose envelope (trigger, subscription,
   * type, timestamp) disagrees with what it gives is moved to the dead letters, with why.
   */
  verify?(message: ConsumedMessage): V | Promise<V>;
  /**
   * Where processed pairs are kept, so that a handler runs once per pair even when the broker delivers
   * twice (only with `verify`: a pair is never taken from the envelope). Without one: once per delivery.
   */
  store?: PairStore;
  /** Messages handled at once (default DEFAULTS.consumerConcurrency: 16). */
  concurrency?: number;
  /** How long a failed message waits before it is delivered again (default 10 s). */
  retryDelayMs?: number;
  /** Deliveries before a message goes to the dead letters (default 5). */
  maxDeliveries?: number;
  /** How long a message may go unanswered before another worker gets it (default 60 s; a worker answers every third of it while its handler runs). */
  claimTimeoutMs?: number;
  /** A handler still running after this is given up on: its claim let go, its message delivered again (default two of the store's leases: 120 s with the default lease). */
  handlerTimeoutMs?: number;
  /** The timers that time handlers out and bound `stop` (default the runtime's): a test passes its own. */
  timers?: Timers;
  /** This worker's name in the group (Redis; default host:pid:random). */
  name?: string;
  onEvent?: (event: ConsumerEvent) => void;
  onConnection?: ConnectionListener;
}

export interface SinkConsumer {
  readonly group: string;
  /** This worker's name in its group. */
  readonly name: string;
  readonly where: string;
  /** Where dead letters go: a subject, or a stream's key. */
  readonly deadLetters: string;
  /** With `webhooks.consume`'s `metrics` option: where /healthz, /readyz and /metrics are served (`http://host:port`). */
  readonly metricsUrl?: string;
  /**
   * Stops taking messages, lets the handlers under way finish (each within its handler timeout; a message
   * waiting for the store is given back at once), and closes. With `timeoutMs`, handlers still running
   * then are given up on: their messages given back, to be delivered again.
   */
  stop(options?: { timeoutMs?: number }): Promise<void>;
}

/** A consumer group's name: the same rule for both brokers (a JetStream durable name is the stricter). */
export function checkGroup(group: string): void {
  if (!/^[A-Za-z0-9_-]{1,64}$/.test(group)) throw new UsageError(`The consumer group must be 1 to 64 letters, digits, - or _, not "${group.slice(0, 80)}".`);
}

/**
 * Whether the broker is there, as operations find it: lost when one fails for want of it (or the client
 * says the connection went), back when a later one succeeds (or the client is back). An operation
 * started before the last change says nothing of the new state (it was sent on the old connection), so
 * only those started since count: otherwise a restart under load says "lost" twice.
 */
export class BrokerState {
  private lost = false;
  private started = 0;
  private changedAt = 0;

  constructor(private readonly listener?: ConnectionListener | undefined) {}

  get connected(): boolean {
    return !this.lost;
  }

  /** Call when an operation starts; give what it returns to `ok` or `failed`. */
  begin(): number {
    return ++this.started;
  }

  ok(op: number): void {
    if (this.lost && op > this.changedAt) this.change(false);
  }

  failed(op: number, reason: string): void {
    if (!this.lost && op > this.changedAt) this.change(true, reason);
  }

  /** The client says the connection went (or came back). */
  client(lost: boolean, reason?: string): void {
    if (this.lost !== lost) this.change(lost, reason);
  }

  private change(lost: boolean, reason?: string): void {
    this.lost = lost;
    this.changedAt = this.started;
    this.listener?.(lost ? 'lost' : 'restored', reason);
  }
}

/**
 * Runs `look` every `ms` (each run after the last one ended, whatever it came to) until the returned
 * function is called: a sink's watch of its broker. The timer keeps no process alive.
 */
export function watchEvery(ms: number, look: () => Promise<void>): () => void {
  let stopped = false;
  let timer: ReturnType<typeof setTimeout> | undefined;
  const next = () => {
    if (stopped) return;
    timer = setTimeout(() => void look().then(next, next), ms);
    timer.unref?.();
  };
  next();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
