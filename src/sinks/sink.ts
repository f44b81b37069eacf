import { RefusedError, UnreachableError, UsageError } from '../errors.js';
import type { ConsumedMessage, ConsumerEvent } from './consumer.js';
import type { SinkDelivery } from './message.js';
import type { PairStore } from '../delivery/store.js';
import type { SinkKind } from './sink-url.js';

/** What the sinks share whichever the broker: the publisher's and the consumer's interfaces, their errors, the connection's state. */

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
}

/** Publishes verified deliveries to a stream, at most once per pair within the dedupe window. */
export interface Sink {
  readonly kind: SinkKind;
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

export interface ConsumeOptions {
  /** The consumer group (a JetStream durable consumer, a Redis consumer group): workers of one group share the messages. */
  group: string;
  /** Runs for each message; the message is acknowledged when it resolves, and delivered again when it throws. */
  handler: (message: ConsumedMessage) => unknown;
  /** Where processed pairs are kept, so that a handler runs once per pair even when the broker delivers twice. Without one: once per delivery. */
  store?: PairStore;
  /** Messages handled at once (default DEFAULTS.consumerConcurrency: 16). */
  concurrency?: number;
  /** How long a failed message waits before it is delivered again (default 10 s). */
  retryDelayMs?: number;
  /** Deliveries before a message goes to the dead letters (default 5). */
  maxDeliveries?: number;
  /** How long a message may go unanswered before another worker gets it (default 60 s; a worker answers every third of it while its handler runs). */
  claimTimeoutMs?: number;
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
  /** Stops taking messages, lets the handlers under way finish (a message waiting for the store is given back), and closes. */
  stop(): Promise<void>;
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

  constructor(private readonly listener?: ConnectionListener) {}

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
