import type { IncomingHttpHeaders } from 'node:http';
import { claimKept, CLAIM_KEPT, HISTORY_DEFAULTS, KEEP_BODY, type HistoryLimits } from '../store/history-limits.js';
import type { HistoryRow, PgStore } from '../store/postgres.js';
import { textOrBase64 } from '../util/bytes.js';
import { verified, type ReceiverEvent } from './event.js';
import { listedRow } from './listed.js';
import { isDelivered } from '../delivery/outcomes.js';
import * as DEFAULTS from '../delivery/defaults.js';
import type { DeliveryRecord, FullRecord } from '../delivery/report.js';
import { RunTracker, runView, type RunView, type RunsView } from '../delivery/runs.js';
import { flatHeaders } from './saved.js';
import type { RawDelivery } from './server.js';

export { KEEP_BODY };

// The record, its full form and the runs view are the delivery core's types (src/delivery/): the page reads them too.
export type { DeliveryRecord, FullRecord, RunView, RunsView };

/**
 * Where the history is kept: in this process's memory (History), or in the shared PostgreSQL store
 * (PgHistory), where every instance's page shows every instance's deliveries. The inspector and replay
 * know only this. What it keeps is bounded by its HistoryLimits, whatever is sent.
 */
export interface HistorySource {
  /** Records a request: its report (not changed, nor kept past what it says), and what arrived. */
  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void;
  since(after: number): Promise<DeliveryRecord[]>;
  get(id: number): Promise<FullRecord | undefined>;
  bodyOf(id: number): Promise<{ body: Buffer; whole: boolean } | undefined>;
  /** The verified attempts of the delivery record `id` is one of (none for a refused request). */
  attemptsOf(id: number): Promise<FullRecord[]>;
  runs(): Promise<RunsView>;
  /** The ids of the records whose report or body holds `text` (any case), newest first, at most `limit`. */
  search(text: string, limit: number): Promise<number[]>;
  /** Calls `listener` with each new record as a row of the page's stream (src/receiver/listed.ts); returns how to stop. */
  subscribe(listener: (row: unknown[], id: number) => void): () => void;
}

function bodyFields(body: Buffer | undefined): Pick<FullRecord, 'body' | 'body_base64' | 'body_kept'> {
  return body ? { ...textOrBase64(body), body_kept: body.length } : { body_kept: 0 };
}

/** What the history holds of one request. */
interface Kept {
  id: number;
  event: ReceiverEvent;
  ms?: number;
  replayOf?: number;
  headers?: IncomingHttpHeaders;
  peer?: string;
  answer?: RawDelivery['answer'];
  /** A body of its own: one over SMALL_BODY (the request's buffer, or a copy of its start), or a part cut from one. */
  body?: Buffer;
  /** A body up to SMALL_BODY: copied into a slab, at `at`. */
  slab?: Slab;
  at: number;
  /** Bytes of the body kept (in `body` or the slab). */
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

/** The last `capacity` of something, oldest first, found by id (ids grow). */
class Ring<T extends { id: number }> {
  private readonly items: (T | undefined)[];
  private head = 0;
  length = 0;

  constructor(readonly capacity: number) {
    this.items = new Array<T | undefined>(capacity);
  }

  /** Adds `item` as the newest; returns the oldest, if it had to go. */
  push(item: T): T | undefined {
    const slot = (this.head + this.length) % this.capacity;
    const gone = this.length === this.capacity ? this.items[slot] : undefined;
    this.items[slot] = item;
    if (gone) this.head = (this.head + 1) % this.capacity;
    else this.length++;
    return gone;
  }

  /** The i-th oldest. */
  at(i: number): T {
    return this.items[(this.head + i) % this.capacity]!;
  }

  find(id: number): T | undefined {
    let lo = 0;
    let hi = this.length - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      const item = this.at(mid);
      if (item.id === id) return item;
      if (item.id < id) lo = mid + 1;
      else hi = mid - 1;
    }
    return undefined;
  }

  *after(id: number): Generator<T> {
    for (let i = 0; i < this.length; i++) {
      const item = this.at(i);
      if (item.id > id) yield item;
    }
  }
}

/**
 * The requests `listen` answered, with their headers and bodies, and the model runs of their deliveries:
 * what the inspector page and replay read, in this process's memory. Verified requests and refused ones
 * are kept apart, each by its own limits (src/store/history-limits.ts), so that an anonymous sender can
 * push out only other refused requests: memory is at most `bytes` of verified bodies, `refusedRows` ×
 * `partBytes` of refused ones, and a fixed amount per record.
 */
export class History implements HistorySource {
  private readonly verifiedRing: Ring<Kept>;
  private readonly refusedRing: Ring<Kept>;
  readonly limits: HistoryLimits;
  private next = 1;
  private readonly listeners = new Set<(row: unknown[], id: number) => void>();
  private readonly tracker = new RunTracker(undefined, DEFAULTS.historyRuns);
  private readonly slabs = new Slabs();
  /** Body bytes the verified records hold, against `limits.bytes`. */
  private held = 0;
  /** How many of the oldest verified records have had their bodies cut to a part, and how many to nothing. */
  private cut = 0;
  private dropped = 0;
  /** Test deliveries seen (kept out of the runs). */
  private tests = 0;

  constructor(limits: Partial<HistoryLimits> = {}) {
    this.limits = { ...HISTORY_DEFAULTS, ...limits };
    this.verifiedRing = new Ring(this.limits.rows);
    this.refusedRing = new Ring(this.limits.refusedRows);
  }

  /** Body bytes held by the verified records (for tests and the benchmark). */
  get heldBytes(): number {
    return this.held;
  }

  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void {
    const ok = verified(event);
    if (!ok) event = refusedKept(event);
    const k: Kept = {
      id: this.next++,
      event,
      ms: raw?.ms,
      replayOf,
      headers: ok ? raw?.headers : claimCut(raw?.headers),
      peer: raw?.peer,
      answer: raw?.answer,
      body: undefined,
      slab: undefined,
      at: 0,
      length: 0,
    };
    if (ok) {
      const most = Math.min(KEEP_BODY, this.limits.bytes);
      if (raw) this.keepBody(k, raw.body.length <= most ? raw.body : raw.body.subarray(0, most));
      const gone = this.verifiedRing.push(k);
      if (gone) {
        this.forget(gone);
        // the oldest left: the cursors of cut and dropped bodies count one fewer
        if (this.cut) this.cut--;
        if (this.dropped) this.dropped--;
      }
      this.keepWithinBudget();
      if (isDelivered(event.outcome)) {
        // a test delivery (a ping) is no part of a model run: counted apart
        if (event.test) this.tests++;
        else this.tracker.add(event);
      }
    } else {
      if (raw?.body.length) {
        k.body = Buffer.from(raw.body.subarray(0, this.limits.partBytes));
        k.length = k.body.length;
      }
      this.refusedRing.push(k);
    }
    if (this.listeners.size) {
      const row = listedRow(event, k.id, replayOf);
      for (const listen of this.listeners) listen(row, k.id);
    }
  }

  private keepBody(k: Kept, body: Buffer): void {
    if (body.length <= SMALL_BODY) {
      const { slab, at } = this.slabs.keep(body);
      k.slab = slab;
      k.at = at;
    } else k.body = body;
    k.length = body.length;
    this.held += body.length;
  }

  /** Lets go of a record's body (all of it). */
  private forget(k: Kept): void {
    if (k.slab) this.slabs.drop(k.slab);
    this.held -= k.length;
    k.slab = undefined;
    k.body = undefined;
    k.length = 0;
  }

  /**
   * Past the byte budget, the oldest verified bodies are cut to their first `partBytes` (a copy, so the
   * rest is freed), then, if the parts alone are past it, the oldest parts go too. The newest stay whole.
   */
  private keepWithinBudget(): void {
    const ring = this.verifiedRing;
    const part = this.limits.partBytes;
    while (this.held > this.limits.bytes && this.cut < ring.length - 1) {
      const k = ring.at(this.cut++);
      if (k.length <= part) continue;
      const start = Buffer.from(bytesOf(k)!.subarray(0, part));
      this.forget(k);
      k.body = start;
      k.length = part;
      this.held += part;
    }
    while (this.held > this.limits.bytes && this.dropped < ring.length - 1) this.forget(ring.at(this.dropped++));
  }

  async runs(): Promise<RunsView> {
    return { runs: this.tracker.runs().map(runView), tests: this.tests };
  }

  subscribe(listener: (row: unknown[], id: number) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async search(text: string, limit: number): Promise<number[]> {
    const needle = text.toLowerCase();
    const out: number[] = [];
    const all = [...this.keptAfter(0)];
    for (let i = all.length - 1; i >= 0 && out.length < limit; i--) {
      const k = all[i]!;
      const bytes = bytesOf(k);
      if (JSON.stringify(k.event).toLowerCase().includes(needle) || bytes?.toString('utf8').toLowerCase().includes(needle)) out.push(k.id);
    }
    return out;
  }

  /** Both rings' records after id `after`, oldest first. */
  private *keptAfter(after: number): Generator<Kept> {
    const a = this.verifiedRing.after(after);
    const b = this.refusedRing.after(after);
    let x = a.next();
    let y = b.next();
    while (!x.done || !y.done) {
      if (y.done || (!x.done && x.value.id < y.value.id)) {
        yield x.value!;
        x = a.next();
      } else {
        yield y.value;
        y = b.next();
      }
    }
  }

  /** The records after id `after` (0: all kept), oldest first. */
  async since(after: number): Promise<DeliveryRecord[]> {
    return [...this.keptAfter(after)].map(recordOf);
  }

  private find(id: number): Kept | undefined {
    return this.verifiedRing.find(id) ?? this.refusedRing.find(id);
  }

  /** A record with its headers and body, or undefined if it is no longer kept. */
  async get(id: number): Promise<FullRecord | undefined> {
    const k = this.find(id);
    return k ? full(k) : undefined;
  }

  /** The bytes kept of a record's body (a copy: a slab is reused), and whether they are all of it. */
  async bodyOf(id: number): Promise<{ body: Buffer; whole: boolean } | undefined> {
    const k = this.find(id);
    const bytes = k && bytesOf(k);
    if (!k || !bytes) return undefined;
    return { body: Buffer.from(bytes), whole: bytes.length === (k.event.size ?? bytes.length) };
  }

  async attemptsOf(id: number): Promise<FullRecord[]> {
    const r = this.verifiedRing.find(id)?.event;
    if (!r?.trigger_id) return [];
    const out: FullRecord[] = [];
    for (const k of this.verifiedRing.after(0)) if (sameDelivery(k.event, r)) out.push(full(k));
    return out;
  }
}

/** A refused request's report as a history keeps it: its claimed Trigger-Id cut (a copy: the report is the listener's, and is not changed). */
function refusedKept<T extends ReceiverEvent>(event: T): T {
  const claim = event.claimed_trigger_id;
  return claim !== undefined && claim.length > CLAIM_KEPT ? { ...event, claimed_trigger_id: claimKept(claim) } : event;
}

/** A refused request's headers as a history keeps them: the Trigger-Id it claims cut, as in its report. */
function claimCut<T extends IncomingHttpHeaders | Record<string, string> | undefined>(headers: T): T {
  const claim = headers?.['trigger-id'];
  return typeof claim === 'string' && claim.length > CLAIM_KEPT ? { ...headers, 'trigger-id': claimKept(claim) } : headers;
}

const recordOf = (k: Kept): DeliveryRecord => ({ ...k.event, id: k.id, ...(k.ms !== undefined ? { ms: k.ms } : {}), ...(k.replayOf !== undefined ? { replay_of: k.replayOf } : {}) });
const full = (k: Kept): FullRecord => ({
  ...recordOf(k),
  headers: flatHeaders(k.headers),
  ...bodyFields(bytesOf(k)),
  ...(k.peer ? { peer: k.peer } : {}),
  ...(k.answer ? { app_answer: k.answer } : {}),
});

/** A kept body's bytes, where they are (a view of its slab, to be read at once), or undefined for none. */
const bytesOf = (k: Kept): Buffer | undefined => (k.slab ? k.slab.bytes.subarray(k.at, k.at + k.length) : k.body);

/** Whether two records are attempts of one delivery: the same Trigger-Id, and the same subscription when both say. */
const sameDelivery = (a: ReceiverEvent, b: ReceiverEvent) =>
  a.trigger_id === b.trigger_id && (a.subscription_id === undefined || b.subscription_id === undefined || a.subscription_id === b.subscription_id);

/** The most a page is sent at once from the shared history (the newest). */
const SHOWN = 100_000;
/** How long an id skipped by a poll is looked for again: a row another instance has inserted but not yet committed. */
const GAP_MS = 10_000;

/**
 * The history in the shared PostgreSQL store: what every instance received, kept by the same limits
 * (the store trims it as it writes). A request is written with its turn's others (its answer does not
 * wait); the page's stream is fed by reading what is new, every quarter second, while a page is open.
 * Ids are taken when a row is inserted and seen when it is committed, which with several instances is
 * not always in order: an id a poll passed over is looked for again, by id, for GAP_MS.
 */
export class PgHistory implements HistorySource {
  private readonly listeners = new Set<(row: unknown[], id: number) => void>();
  private poller: NodeJS.Timeout | undefined;
  private last = -1;

  constructor(
    private readonly store: PgStore,
    private readonly limits: HistoryLimits,
  ) {}

  add(event: ReceiverEvent, raw?: RawDelivery, replayOf?: number): void {
    const ok = verified(event);
    if (!ok) event = refusedKept(event);
    const record: Partial<FullRecord> = {
      ...event,
      ...(raw ? { ms: raw.ms } : {}),
      ...(raw?.peer ? { peer: raw.peer } : {}),
      ...(raw?.answer ? { app_answer: raw.answer } : {}),
      ...(replayOf !== undefined ? { replay_of: replayOf } : {}),
    };
    const keep = ok ? KEEP_BODY : this.limits.partBytes;
    this.store.record({
      record,
      verified: ok,
      outcome: event.outcome,
      type: event.type,
      trigger: event.trigger_id ?? event.claimed_trigger_id,
      subscription: event.subscription_id,
      headers: raw ? (ok ? flatHeaders(raw.headers) : claimCut(flatHeaders(raw.headers))) : undefined,
      body: raw ? (raw.body.length <= keep ? raw.body : raw.body.subarray(0, keep)) : undefined,
      size: raw?.body.length,
    });
  }

  private static record(row: HistoryRow): DeliveryRecord {
    // (rows written before claims were cut hold them whole)
    return { ...refusedKept(row.record as unknown as DeliveryRecord), id: row.id };
  }

  private static full(row: HistoryRow): FullRecord {
    return { ...PgHistory.record(row), headers: (row.verified ? row.headers : claimCut(row.headers ?? undefined)) ?? {}, ...bodyFields(row.body ?? undefined) };
  }

  async since(after: number): Promise<DeliveryRecord[]> {
    const newest = await this.store.historyNewest();
    const rows = (await this.store.historySince(Math.max(after, newest - SHOWN), SHOWN)).map(PgHistory.record);
    // the first page's stream goes on from what it read here: nothing after it may be skipped by the poll
    if (this.last < 0) this.last = Math.max(newest, rows.at(-1)?.id ?? 0);
    return rows;
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
    if (!row?.verified) return [];
    const r = PgHistory.record(row);
    if (!r.trigger_id) return [];
    return (await this.store.historyOfTrigger(r.trigger_id)).map(PgHistory.full).filter((x) => sameDelivery(x, r));
  }

  async runs(): Promise<RunsView> {
    // grouped by the database; the tracker then joins the same instant written two ways
    const tracker = new RunTracker();
    const [{ runs, tests }, arrivals] = await Promise.all([this.store.historyRuns(), this.store.historyArrivals()]);
    // each hour's first arrival first, with its times: its delivery lag
    for (const a of arrivals) tracker.add({ type: 'forecast_hour.available', ...a });
    for (const g of runs) {
      for (const hour of g.hours) tracker.add({ type: 'forecast_hour.available', model: g.model, initialization_time: g.initialization_time, forecast_hour: hour });
      if (g.init_event) tracker.add({ type: 'initialization_time.available', model: g.model, initialization_time: g.initialization_time });
    }
    return { runs: tracker.runs().map(runView), tests };
  }

  async search(text: string, limit: number): Promise<number[]> {
    return this.store.historySearch(text, limit);
  }

  subscribe(listener: (row: unknown[], id: number) => void): () => void {
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
  /** Ids passed over (not yet committed, or rolled back), and when they were first missed. */
  private readonly gaps = new Map<number, number>();

  private async poll(): Promise<void> {
    if (this.polling) return;
    this.polling = true;
    try {
      if (this.last < 0) {
        // what is there now is what the page reads first: only what comes after is streamed (unless a
        // page's first read, in since(), said where the stream begins while this one was asked)
        const newest = await this.store.historyNewest();
        if (this.last < 0) this.last = newest;
        return;
      }
      const now = Date.now();
      for (const [id, since] of this.gaps) if (now - since > GAP_MS) this.gaps.delete(id);
      const rows = await this.store.historyAfter(this.last, [...this.gaps.keys()], SHOWN);
      for (const row of rows) {
        this.gaps.delete(row.id);
        for (let id = this.last + 1; id < row.id; id++) this.gaps.set(id, now);
        this.last = Math.max(this.last, row.id);
        const record = PgHistory.record(row);
        const line = listedRow(record, record.id, record.replay_of);
        for (const listen of this.listeners) listen(line, record.id);
      }
    } catch {
      // the database is away: the next poll tries again
    } finally {
      this.polling = false;
    }
  }
}
