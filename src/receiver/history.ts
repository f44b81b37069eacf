import type { IncomingHttpHeaders } from 'node:http';
import type { HistoryRow, PgStore } from '../store/postgres.js';
import type { ReceiverEvent } from './event.js';
import { RunTracker, type Run } from './runs.js';
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

/** A model run as the runs view shows it. */
export interface RunView {
  model: string;
  initialization_time: string;
  hours: number[];
  init_event: boolean;
}

/**
 * Where the history is kept: in this process's memory (History), or in the shared PostgreSQL store
 * (PgHistory), where every instance's page shows every instance's deliveries. The inspector and replay
 * know only this.
 */
export interface HistorySource {
  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void;
  since(after: number): Promise<DeliveryRecord[]>;
  get(id: number): Promise<FullRecord | undefined>;
  bodyOf(id: number): Promise<{ body: Buffer; whole: boolean } | undefined>;
  attemptsOf(id: number): Promise<FullRecord[]>;
  runs(): Promise<RunView[]>;
  subscribe(listener: (record: DeliveryRecord) => void): () => void;
}

const runView = (r: Run): RunView => ({ model: r.model, initialization_time: r.initialization_time, hours: [...r.hours].sort((a, b) => a - b), init_event: r.initEvent });

/** Headers as one text each. */
function flat(headers: IncomingHttpHeaders | Record<string, string> | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers ?? {})) if (value !== undefined) out[name] = Array.isArray(value) ? value.join(', ') : value;
  return out;
}

/** The body as text when it is UTF-8 that round-trips, else base64. */
function bodyFields(body: Buffer | undefined): Pick<FullRecord, 'body' | 'body_base64' | 'body_kept'> {
  if (!body) return { body_kept: 0 };
  const text = body.toString('utf8');
  return Buffer.from(text, 'utf8').equals(body) ? { body: text, body_kept: body.length } : { body_base64: body.toString('base64'), body_kept: body.length };
}

interface Kept {
  record: DeliveryRecord;
  headers?: IncomingHttpHeaders;
  /** A body over SMALL_BODY: the request's own buffer (up to KEEP_BODY), or a copy of its start. */
  body?: Buffer;
  /** A body up to SMALL_BODY: copied into a slab, at `at`, `length` bytes. */
  slab?: Slab;
  at: number;
  length: number;
}

/** Bodies up to this size are copied into the history's slabs; larger ones keep buffers of their own. */
const SMALL_BODY = 16 * 1024;
const SLAB_BYTES = 256 * 1024;
/** Empty slabs kept for reuse: more are left to the garbage collector. */
const SPARE_SLABS = 4;

interface Slab {
  bytes: Buffer;
  /** Bytes handed out, from the start. */
  used: number;
  /** Bodies in it still kept. */
  live: number;
}

/**
 * Where the history keeps small bodies (a forecast notification is ~1 KB): copied into shared slabs, each
 * reused once every body in it has left the history. Kept as they arrived, each request's own buffer
 * (a V8 object, and memory under it) outlived V8's young generation, and was freed only by a full
 * collection: measured with perf at 50 clients, garbage collection with malloc and free took 7.9% of
 * `listen --inspect`'s CPU so, 6.7-6.8% with slabs (plain `listen`: 5.9%); the copy takes ~0.1%
 * (BENCHMARKS.md). Memory: the bytes of the bodies kept, rounded up to whole slabs, and SPARE_SLABS.
 */
class Slabs {
  private current: Slab | undefined;
  private readonly spare: Slab[] = [];

  /** Copies `body` (at most SMALL_BODY bytes) into a slab; returns where. */
  keep(body: Buffer): { slab: Slab; at: number } {
    let slab = this.current;
    if (!slab || slab.used + body.length > SLAB_BYTES) {
      if (slab && slab.live === 0) this.retire(slab);
      slab = this.spare.pop() ?? { bytes: Buffer.allocUnsafeSlow(SLAB_BYTES), used: 0, live: 0 };
      this.current = slab;
    }
    const at = slab.used;
    body.copy(slab.bytes, at);
    slab.used += body.length;
    slab.live++;
    return { slab, at };
  }

  /** A body has left the history: its slab is reused once it holds no other. */
  drop(slab: Slab): void {
    if (--slab.live === 0 && slab !== this.current) this.retire(slab);
  }

  private retire(slab: Slab): void {
    slab.used = 0;
    if (this.spare.length < SPARE_SLABS) this.spare.push(slab);
  }
}

/**
 * The last `capacity` requests `listen` answered, refused ones included, with their headers and bodies,
 * and the model runs their deliveries belong to: what the inspector page and replay read. Memory is at
 * most `capacity` × KEEP_BODY for the bodies, and a fixed amount per record.
 */
export class History implements HistorySource {
  /** A ring: the oldest is overwritten once it is full. */
  private readonly ring: (Kept | undefined)[];
  private next = 1;
  private readonly listeners = new Set<(record: DeliveryRecord) => void>();
  private readonly tracker = new RunTracker();
  private readonly slabs = new Slabs();

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
  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void {
    const record = event as DeliveryRecord;
    record.id = this.next++;
    if (raw) record.ms = raw.ms;
    if (replayOf !== undefined) record.replay_of = replayOf;
    const i = (record.id - 1) % this.capacity;
    const gone = this.ring[i];
    if (gone?.slab) this.slabs.drop(gone.slab);
    const kept: Kept = { record, headers: raw?.headers, body: undefined, slab: undefined, at: 0, length: 0 };
    if (raw && raw.body.length <= SMALL_BODY) {
      const { slab, at } = this.slabs.keep(raw.body);
      kept.slab = slab;
      kept.at = at;
      kept.length = raw.body.length;
    } else if (raw) {
      kept.body = raw.body.length <= KEEP_BODY ? raw.body : Buffer.from(raw.body.subarray(0, KEEP_BODY));
    }
    this.ring[i] = kept;
    if (record.outcome === 'accepted' || record.outcome === 'duplicate') this.tracker.add(record);
    for (const listen of this.listeners) listen(record);
  }

  async runs(): Promise<RunView[]> {
    return this.tracker.runs().map(runView);
  }

  /** Calls `listener` for each request from now on; returns how to stop. */
  subscribe(listener: (record: DeliveryRecord) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The records after id `after` (0: all kept), oldest first. */
  async since(after: number): Promise<DeliveryRecord[]> {
    const out: DeliveryRecord[] = [];
    for (const k of this.kept) if (k.record.id > after) out.push(k.record);
    return out;
  }

  /** A record with its headers and body, or undefined if it is no longer kept. */
  async get(id: number): Promise<FullRecord | undefined> {
    const k = this.slot(id);
    return k ? this.full(k) : undefined;
  }

  private full(k: Kept): FullRecord {
    return { ...k.record, headers: flat(k.headers), ...bodyFields(bytesOf(k)) };
  }

  /** The bytes kept of a record's body (a copy: a slab is reused), and whether they are all of it. */
  async bodyOf(id: number): Promise<{ body: Buffer; whole: boolean } | undefined> {
    const k = this.slot(id);
    const bytes = k && bytesOf(k);
    if (!k || !bytes) return undefined;
    return { body: Buffer.from(bytes), whole: bytes.length === (k.record.size ?? bytes.length) };
  }

  /** The attempts of the same delivery (its Trigger-Id and subscription) that are still kept, oldest first. */
  async attemptsOf(id: number): Promise<FullRecord[]> {
    const r = this.slot(id)?.record;
    if (!r?.trigger_id) return [];
    return this.kept.filter((k) => sameDelivery(k.record, r)).map((k) => this.full(k));
  }
}

/** A kept body's bytes, where they are (a view of its slab, to be read at once), or undefined for none. */
const bytesOf = (k: Kept): Buffer | undefined => (k.slab ? k.slab.bytes.subarray(k.at, k.at + k.length) : k.body);

/** Whether two records are attempts of one delivery: the same Trigger-Id, and the same subscription when both say. */
const sameDelivery = (a: DeliveryRecord, b: DeliveryRecord) =>
  a.trigger_id === b.trigger_id && (a.subscription_id === undefined || b.subscription_id === undefined || a.subscription_id === b.subscription_id);

/** How far back each poll of the shared history looks again: ids are taken in one order and committed in another. */
const OVERLAP = 500;
/** The most a page is sent at once from the shared history (the newest). */
const SHOWN = 100_000;

/**
 * The history in the shared PostgreSQL store: what every instance received. A request is written with
 * its turn's others (its answer does not wait); the page's stream is fed by reading what is new, every
 * quarter second, while a page is open. Ids are taken when a row is inserted and seen when it is
 * committed, which with several instances is not always in order: each poll looks OVERLAP ids back, and
 * passes over those it has already sent.
 */
export class PgHistory implements HistorySource {
  private readonly listeners = new Set<(record: DeliveryRecord) => void>();
  private poller: NodeJS.Timeout | undefined;
  private last = -1;
  private readonly sent = new Set<number>();

  constructor(private readonly store: PgStore) {}

  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void {
    const record: Partial<DeliveryRecord> = { ...event, ...(raw ? { ms: raw.ms } : {}), ...(replayOf !== undefined ? { replay_of: replayOf } : {}) };
    this.store.record({
      record,
      outcome: event.outcome,
      type: event.type,
      trigger: event.trigger_id,
      subscription: event.subscription_id,
      headers: raw ? flat(raw.headers) : undefined,
      body: raw ? (raw.body.length <= KEEP_BODY ? raw.body : raw.body.subarray(0, KEEP_BODY)) : undefined,
      size: raw?.body.length,
    });
  }

  private static record(row: HistoryRow): DeliveryRecord {
    return { ...(row.record as unknown as DeliveryRecord), id: row.id };
  }

  private static full(row: HistoryRow): FullRecord {
    return { ...PgHistory.record(row), headers: row.headers ?? {}, ...bodyFields(row.body ?? undefined) };
  }

  async since(after: number): Promise<DeliveryRecord[]> {
    const newest = await this.store.historyNewest();
    return (await this.store.historySince(Math.max(after, newest - SHOWN), SHOWN)).map(PgHistory.record);
  }

  async get(id: number): Promise<FullRecord | undefined> {
    const row = await this.store.historyOne(id);
    return row && PgHistory.full(row);
  }

  async bodyOf(id: number): Promise<{ body: Buffer; whole: boolean } | undefined> {
    const row = await this.store.historyOne(id);
    if (!row?.body) return undefined;
    return { body: row.body, whole: row.body.length === (row.size ?? row.body.length) };
  }

  async attemptsOf(id: number): Promise<FullRecord[]> {
    const row = await this.store.historyOne(id);
    if (!row) return [];
    const r = PgHistory.record(row);
    if (!r.trigger_id) return [];
    return (await this.store.historyOfTrigger(r.trigger_id)).map(PgHistory.full).filter((x) => sameDelivery(x, r));
  }

  async runs(): Promise<RunView[]> {
    const tracker = new RunTracker();
    for (const r of await this.since(0)) if (r.outcome === 'accepted' || r.outcome === 'duplicate') tracker.add(r);
    return tracker.runs().map(runView);
  }

  subscribe(listener: (record: DeliveryRecord) => void): () => void {
    this.listeners.add(listener);
    this.poller ??= setInterval(() => void this.poll(), 250);
    return () => {
      this.listeners.delete(listener);
      if (!this.listeners.size && this.poller) {
        clearInterval(this.poller);
        this.poller = undefined;
      }
    };
  }

  private polling = false;

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      if (this.last < 0) {
        // what is there now is what the page reads first: only what comes after is streamed
        this.last = await this.store.historyNewest();
        for (const row of await this.store.historySince(this.last - OVERLAP, SHOWN)) {
          this.sent.add(row.id);
          this.last = Math.max(this.last, row.id);
        }
        return;
      }
      for (const row of await this.store.historySince(this.last - OVERLAP, SHOWN)) {
        if (this.sent.has(row.id) || row.id <= this.last - OVERLAP) continue;
        this.sent.add(row.id);
        this.last = Math.max(this.last, row.id);
        const record = PgHistory.record(row);
        for (const listen of this.listeners) listen(record);
      }
      for (const id of this.sent) if (id <= this.last - OVERLAP) this.sent.delete(id);
    } catch {
      // the database is away: the next poll tries again
    } finally {
      this.polling = false;
    }
  }
}
