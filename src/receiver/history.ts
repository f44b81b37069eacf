import type { IncomingHttpHeaders } from 'node:http';
import type { ReceiverEvent } from './event.js';
import { RunTracker } from './runs.js';
import type { RawDelivery } from './server.js';

/** Bodies up to this size are kept whole; a larger one is kept in part (its start), and marked. */
export const KEEP_BODY = 1024 * 1024;

/** One request `listen` answered, as the inspector shows it: the report, and what arrived. */
export interface DeliveryRecord extends ReceiverEvent {
  id: number;
  /** When it was answered, after how long (ms). */
  ms?: number;
  /** A replay (from the inspector or `deliveries replay`) of delivery N: never counted as processed. */
  replay_of?: number;
}

/** A record with what arrived: its headers and (the start of) its body. */
export interface FullRecord extends DeliveryRecord {
  headers: Record<string, string>;
  /** The body as text when it is UTF-8, else `body_base64`. */
  body?: string;
  body_base64?: string;
  /** Bytes of the body kept: less than `size` when it was cut. */
  body_kept: number;
}

interface Kept {
  record: DeliveryRecord;
  headers?: IncomingHttpHeaders;
  /** The bytes as they arrived (no copy is made: a body up to KEEP_BODY is the request's own buffer). */
  body?: Buffer;
}

/**
 * The last `capacity` requests `listen` answered, refused ones included, with their headers and bodies,
 * and the model runs their deliveries belong to: what the inspector page and replay read. Memory is at
 * most `capacity` × KEEP_BODY for the bodies, and a fixed amount per record.
 */
export class History {
  /** A ring: the oldest is overwritten once it is full. */
  private readonly ring: (Kept | undefined)[];
  private next = 1;
  private readonly listeners = new Set<(record: DeliveryRecord) => void>();
  readonly runs = new RunTracker();

  constructor(readonly capacity: number) {
    this.ring = new Array<Kept | undefined>(capacity);
  }

  /** What is kept, oldest first. */
  private get kept(): Kept[] {
    const out: Kept[] = [];
    const start = this.next - 1; // the id the next record will overwrite the slot of
    for (let i = 0; i < this.capacity; i++) {
      const k = this.ring[(start + i) % this.capacity];
      if (k) out.push(k);
    }
    return out;
  }

  private slot(id: number): Kept | undefined {
    const k = this.ring[(id - 1) % this.capacity];
    return k?.record.id === id ? k : undefined;
  }

  /**
   * Records a request (the report itself becomes the record: the receiver is done with it; a copy cost
   * `listen --inspect` ~3% of its throughput); tells every listener (the page's event stream).
   */
  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): DeliveryRecord {
    const record = event as DeliveryRecord;
    record.id = this.next++;
    if (raw) record.ms = raw.ms;
    if (replayOf !== undefined) record.replay_of = replayOf;
    const body = raw && (raw.body.length <= KEEP_BODY ? raw.body : Buffer.from(raw.body.subarray(0, KEEP_BODY)));
    this.ring[(record.id - 1) % this.capacity] = { record, headers: raw?.headers, body };
    if (record.outcome === 'accepted' || record.outcome === 'duplicate') this.runs.add(record);
    for (const listen of this.listeners) listen(record);
    return record;
  }

  /** Calls `listener` for each request from now on; returns how to stop. */
  subscribe(listener: (record: DeliveryRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The records after id `after` (0: all kept), oldest first. */
  since(after: number): DeliveryRecord[] {
    const out: DeliveryRecord[] = [];
    for (const k of this.kept) if (k.record.id > after) out.push(k.record);
    return out;
  }

  /** A record with its headers and body, or undefined if it is no longer kept. */
  get(id: number): FullRecord | undefined {
    const k = this.slot(id);
    if (!k) return undefined;
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(k.headers ?? {})) if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    const full: FullRecord = { ...k.record, headers, body_kept: k.body?.length ?? 0 };
    if (k.body) {
      const text = k.body.toString('utf8');
      if (Buffer.from(text, 'utf8').equals(k.body)) full.body = text;
      else full.body_base64 = k.body.toString('base64');
    }
    return full;
  }

  /** The bytes kept of a record's body, and whether they are all of it. */
  bodyOf(id: number): { body: Buffer; whole: boolean } | undefined {
    const k = this.slot(id);
    if (!k?.body) return undefined;
    return { body: k.body, whole: k.body.length === (k.record.size ?? k.body.length) };
  }

  /** The attempts of the same delivery (its Trigger-Id and subscription) that are still kept, oldest first. */
  attemptsOf(id: number): FullRecord[] {
    const r = this.slot(id)?.record;
    if (!r?.trigger_id) return [];
    return this.kept
      .filter((k) => k.record.trigger_id === r.trigger_id && (r.subscription_id === undefined || k.record.subscription_id === undefined || k.record.subscription_id === r.subscription_id))
      .map((k) => this.get(k.record.id)!);
  }
}
