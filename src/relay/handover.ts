import * as DEFAULTS from '../delivery/defaults.js';
import type { Clock } from '../util/clock.js';
import type { ClientMessage } from './protocol.js';

/**
 * The relay client's queue: the deliveries a connection brought, handed to the callback `concurrency` at
 * a time in the relay's order; what it handles is acknowledged (the acknowledgements of one moment in one
 * message), what it refuses (it cannot verify it) is refused to the relay, which keeps it apart, and what
 * it does not handle yet is handed to it again after a growing delay. A delivery of an earlier
 * connection is neither acknowledged, refused nor tried again: the relay sends it again on the next one.
 */

/** One delivery as the relay received it. */
export interface RelayedDelivery {
  channel: string;
  /** Its place in the channel: deliveries come in this order. */
  seq: number;
  /** When the relay received it (ms since the epoch): verify its timestamp against this, not against now. */
  receivedAt: number;
  /** Its headers as the relay received them, in order (hop-by-hop ones left out). */
  headers: [string, string][];
  body: Uint8Array;
  /** How many times it was handed over on this connection (1 the first). */
  attempt: number;
}

/**
 * What became of a delivery: handled for good (true: acknowledged, the relay deletes it), not yet (false,
 * or a throw: handed over again), or refused (it will never verify here: the relay keeps it apart, with why).
 */
export type Verdict = boolean | { refused: { reason: string; message: string } };

export interface HandoverOptions {
  concurrency: number;
  clock: Clock;
  /** A growing delay with jitter for the `attempt`th try. */
  backoff(attempt: number, first: number, most: number): number;
  onDelivery(delivery: RelayedDelivery): Promise<Verdict>;
  /** Sends a message on the connection of the moment (nothing when there is none). */
  send(message: ClientMessage): void;
}

export class Handover {
  /** Which connection the deliveries of the moment came on. */
  private generation = 0;
  private stopped = false;
  private queue: RelayedDelivery[] = [];
  private running = 0;
  private idle: (() => void) | undefined;
  private acks: number[] = [];
  private acking = false;

  constructor(private readonly o: HandoverOptions) {}

  /** A new connection (or none): what the old one brought and had not handed over is dropped, and nothing of it is acknowledged. */
  reset(generation: number): void {
    this.generation = generation;
    this.queue = [];
    this.acks = [];
  }

  /** A delivery whose frames are all in. */
  push(d: RelayedDelivery, generation: number): void {
    if (generation !== this.generation) return;
    this.queue.push(d);
    this.drain();
  }

  /** No new delivery is handed over; resolves once those being handled are done, their acknowledgements sent. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.queue = [];
    if (this.running) await new Promise<void>((resolve) => (this.idle = resolve));
    this.flushAcks();
  }

  private drain(): void {
    const generation = this.generation;
    while (!this.stopped && this.running < this.o.concurrency && this.queue.length) {
      const d = this.queue.shift()!;
      this.running++;
      void this.handle(d, generation);
    }
  }

  private async handle(d: RelayedDelivery, generation: number): Promise<void> {
    let verdict: Verdict;
    try {
      verdict = await this.o.onDelivery(d);
    } catch {
      verdict = false;
    }
    this.running--;
    if (this.generation === generation) {
      if (verdict === true) this.ack(d.seq);
      else if (verdict !== false) {
        const { reason, message } = verdict.refused;
        this.o.send({ type: 'refuse', seq: d.seq, reason: (reason || 'refused').slice(0, 64), message: (message || reason || 'refused').slice(0, 2048) });
      } else if (!this.stopped) void this.again(d, generation);
    }
    if (!this.running) this.idle?.();
    if (this.generation === generation) this.drain();
  }

  /** A delivery not acknowledged: handed over again after a growing delay, on this connection (the next one gets it from the relay anyway). */
  private async again(d: RelayedDelivery, generation: number): Promise<void> {
    await this.o.clock.after(this.o.backoff(d.attempt - 1, DEFAULTS.relayRedeliverFirstMs, DEFAULTS.relayRedeliverMostMs));
    if (this.stopped || this.generation !== generation) return;
    this.queue.unshift({ ...d, attempt: d.attempt + 1 });
    this.drain();
  }

  /** Acknowledgements of one moment go in one message. */
  private ack(seq: number): void {
    this.acks.push(seq);
    if (this.acking) return;
    this.acking = true;
    setImmediate(() => this.flushAcks());
  }

  private flushAcks(): void {
    this.acking = false;
    if (!this.acks.length) return;
    this.o.send({ type: 'ack', seqs: this.acks });
    this.acks = [];
  }
}
