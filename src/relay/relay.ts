import { DEFAULTS } from '../delivery/defaults.js';
import { LAYOUTS } from '../signing/layouts.js';
import { DEFAULT_TOLERANCE, examine, failures, lookup, rowsFor, type HeaderSource } from '../signing/rules.js';
import { WebVerifier } from '../signing/verify-web.js';
import { equalBytes, utf8 } from '../signing/encoding.js';
import { isoMillis } from '../util/clock.js';
import { answers, said, type Answer } from './answers.js';
import {
  CHANNEL_NAME,
  CLOSE,
  CONNECT_PREFIX,
  DEFAULT_WINDOW,
  DEFAULT_WINDOW_BYTES,
  HEALTH_PATH,
  INBOUND_PREFIX,
  MAX_WINDOW,
  PING,
  PONG,
  PROTOCOL_VERSION,
  STATUS_PATH,
  deliveryFrames,
  parseClientMessage,
  type ClientMessage,
  type RelayMessage,
} from './protocol.js';
import type { ChannelRecord, Removed, RelayStorage, StoredDelivery } from './storage.js';

/**
 * The relay's logic, runtime-neutral (no Node module): the same in the Node host (node-host.ts) and the
 * Worker's Durable Object (worker.ts). A host turns its requests and WebSockets into calls of this class
 * and writes back what it returns; the storage is the host's (storage.ts).
 *
 * Inbound, a delivery is refused at its headers when it can be (missing, stale, no signature in a layout
 * we know: the body is never read), then read up to `maxBody`, verified with its channel's secret, stored,
 * and only then answered 2xx. Outbound, each channel has at most one open connection; it gets what is
 * stored, in order, within its window, and a delivery is deleted when that connection acknowledges it.
 */

export const DEFAULT_KEEP_MS = 7 * 24 * 3600_000;
/** The bytes of deliveries (bodies and headers) a relay keeps at most, unless told. */
export const DEFAULT_MAX_BYTES = 256 * 1024 * 1024;
/** How often the relay looks for deliveries older than it keeps. */
export const SWEEP_EVERY_MS = 60_000;

export interface RelayOptions {
  storage: RelayStorage;
  /** The relay token (WXHOOKS_RELAY_TOKEN): undefined, and the relay takes no connection. */
  token: string | undefined;
  /** The byte budget of the deliveries kept (bodies and headers). */
  maxBytes?: number;
  /** How long a delivery is kept, and a channel unused, in ms. */
  keepMs?: number;
  /** The largest body read (413 past it). */
  maxBody?: number;
  /** The body bytes read at once across every request (503 past it). */
  maxInflight?: number;
  /** The most body bytes a client may have sent and not acknowledged (its window). */
  maxWindowBytes?: number;
  /** Seconds a delivery's timestamp may be off the relay's clock (default 300). */
  tolerance?: number;
  now?: () => number;
  /** What happened: one event per request and per connection change. Never a secret. */
  onEvent?: (event: RelayEvent) => void;
}

/** What a request was, for the relay's log. */
export interface RelayRequestEvent {
  time: string;
  outcome: Answer['outcome'];
  status: number;
  method: string;
  path: string;
  channel?: string;
  size?: number;
  seq?: number;
  reason?: string;
  message?: string;
}

/** What happened to a channel or a connection, for the relay's log. */
export interface RelayChannelEvent {
  time: string;
  event: 'connected' | 'disconnected' | 'channel_created' | 'channel_deleted' | 'channel_forgotten' | 'replaced' | 'expired' | 'refused';
  channel?: string;
  queued?: number;
  unacknowledged?: number;
  deliveries?: number;
  message?: string;
}

export type RelayEvent = RelayRequestEvent | RelayChannelEvent;

/** A request, as the relay needs it from its host. */
export interface RelayRequest {
  method: string;
  /** The URL's path. */
  path: string;
  headers: HeaderSource;
  /** The headers as received, in order: what is stored and handed on. Asked only of a verified delivery. */
  headerList(): [string, string][];
  /** Content-Length, when it was sent. */
  declaredLength?: number;
  /** The body's bytes as they come; the relay stops reading early when it has seen enough. */
  body(): AsyncIterable<Uint8Array>;
}

/** What the relay keeps with each connection: small and plain, so that a Durable Object keeps it across hibernation. */
export interface Session {
  channel: string;
  /** `open` was received and answered. */
  opened: boolean;
  /** The last seq sent on this connection. */
  lastSent: number;
  /** What was sent and not acknowledged: [seq, size]. */
  inflight: [number, number][];
  window: number;
  windowBytes: number;
}

/** A WebSocket, as the relay needs it from its host. */
export interface RelaySocket {
  send(data: string | Uint8Array): void;
  close(code: number, reason: string): void;
  session(): Session | undefined;
  setSession(session: Session): void;
}

/** The sockets a host holds for a channel (a Durable Object's are tagged with it). */
export interface SocketDirectory {
  sockets(channel: string): RelaySocket[];
}

/** Where a request goes. */
export type Route = { to: 'inbound'; channel: string } | { to: 'connect'; channel: string } | { to: 'status' } | { to: 'health' } | { to: 'answer'; answer: Answer };

/** The route of a method and path: no storage, no key (the Worker runs it before waking the Durable Object). */
export function route(method: string, path: string): Route {
  const named = (prefix: string) => {
    const name = path.slice(prefix.length);
    return CHANNEL_NAME.test(name) ? name : undefined;
  };
  if (path.startsWith(INBOUND_PREFIX)) {
    const channel = named(INBOUND_PREFIX);
    if (channel === undefined) return { to: 'answer', answer: answers.noChannel() };
    return method === 'POST' ? { to: 'inbound', channel } : { to: 'answer', answer: answers.method('POST') };
  }
  if (path.startsWith(CONNECT_PREFIX)) {
    const channel = named(CONNECT_PREFIX);
    if (channel === undefined) return { to: 'answer', answer: answers.noChannel() };
    return method === 'GET' ? { to: 'connect', channel } : { to: 'answer', answer: answers.method('GET') };
  }
  if (path === STATUS_PATH) return method === 'GET' ? { to: 'status' } : { to: 'answer', answer: answers.method('GET') };
  if (path === HEALTH_PATH) return method === 'GET' ? { to: 'health' } : { to: 'answer', answer: answers.method('GET') };
  return { to: 'answer', answer: answers.notFound() };
}

const AUTO_ROWS = rowsFor('auto', LAYOUTS);
type Digestible = Parameters<typeof crypto.subtle.digest>[1];
const sha256 = async (text: string) => new Uint8Array(await crypto.subtle.digest('SHA-256', utf8(text) as Digestible));

/**
 * Whether the request carries the relay token (`Authorization: Bearer <token>`): undefined when it does,
 * else what to answer. The comparison is of the two SHA-256 digests, in constant time: neither the
 * token's length nor its first differing byte shows in the time taken.
 */
export async function authorize(headers: HeaderSource, token: string | undefined): Promise<Answer | undefined> {
  if (!token) return answers.tokenUnset();
  const auth = lookup(headers, 'authorization', 'Authorization');
  const given = auth && /^bearer\s+/i.test(auth) ? auth.replace(/^bearer\s+/i, '').trim() : undefined;
  if (!given) return answers.noToken();
  const [a, b] = await Promise.all([sha256(given), sha256(token)]);
  return equalBytes(a, b) ? undefined : answers.wrongToken();
}

/**
 * What a delivery's headers alone decide, before its body is read: the three headers present, the
 * timestamp within the window, a signature in a layout the relay checks, a declared length within the
 * limit. Undefined when the body is worth reading.
 */
export function checkHeaders(headers: HeaderSource, now: number, tolerance: number, maxBody: number, declaredLength: number | undefined): Answer | undefined {
  const found = examine(headers, now, tolerance, AUTO_ROWS);
  if (!found.ok) return answers.refused(found);
  if (!found.candidates.length) return answers.refused(failures.malformed(found.problems, AUTO_ROWS));
  if (declaredLength !== undefined && declaredLength > maxBody) return answers.tooLarge(maxBody);
  return undefined;
}

/** Headers about the connection it came on, not the delivery (RFC 9110 §7.6.1): not kept. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** What a delivery counts against the byte budget: its body and its headers. */
const sizeOf = (headers: [string, string][], body: Uint8Array) => headers.reduce((n, [k, v]) => n + k.length + v.length + 4, body.length);

interface LiveChannel {
  record: ChannelRecord;
  verifier?: WebVerifier;
  /** Deliveries verified and waiting to be stored: written together, in arrival order. */
  pending: { delivery: Omit<StoredDelivery, 'seq'>; resolve: (seq: number) => void; reject: (err: unknown) => void }[];
  writing: boolean;
  /** The channel's connection work (open, ack, sending), one step at a time. */
  queue: Promise<void>;
}

export class Relay {
  private readonly storage: RelayStorage;
  private readonly channels = new Map<string, LiveChannel>();
  private readonly maxBytes: number;
  private readonly keepMs: number;
  private readonly maxBody: number;
  private readonly maxInflight: number;
  private readonly maxWindowBytes: number;
  private readonly tolerance: number;
  private readonly now: () => number;
  /** The bytes of the deliveries stored, and of those verified and being stored. */
  private used = 0;
  private reserved = 0;
  /** Body bytes being read now, across every request, and the most there were at once (the status says it). */
  private reading = 0;
  private readingPeak = 0;
  private loaded: Promise<void> | undefined;

  constructor(
    private readonly options: RelayOptions,
    private readonly directory: SocketDirectory,
  ) {
    this.storage = options.storage;
    this.maxBytes = options.maxBytes ?? DEFAULT_MAX_BYTES;
    this.keepMs = options.keepMs ?? DEFAULT_KEEP_MS;
    this.maxBody = options.maxBody ?? DEFAULTS.maxBodyBytes;
    this.maxInflight = options.maxInflight ?? 4 * this.maxBody;
    this.maxWindowBytes = options.maxWindowBytes ?? 4 * DEFAULT_WINDOW_BYTES;
    this.tolerance = options.tolerance ?? DEFAULT_TOLERANCE;
    this.now = options.now ?? Date.now;
  }

  /** Reads the channels and what they hold, and drops what is older than kept. Called once, before anything else. */
  load(): Promise<void> {
    this.loaded ??= (async () => {
      const [records, usage] = await Promise.all([this.storage.channels(), this.storage.usage()]);
      for (const record of records) this.channels.set(record.name, { record, pending: [], writing: false, queue: Promise.resolve() });
      for (const u of usage.values()) this.used += u.bytes;
      await this.sweep();
    })();
    return this.loaded;
  }

  private emit(event: Omit<RelayRequestEvent, 'time'> | Omit<RelayChannelEvent, 'time'>): void {
    this.options.onEvent?.({ time: isoMillis(this.now()), ...event } as RelayEvent);
  }

  /** Answers an HTTP request that is not a WebSocket: an inbound delivery, the status, the health check. */
  async http(request: RelayRequest): Promise<Answer> {
    await this.load();
    const r = route(request.method, request.path);
    const answer = await this.answer(r, request);
    if (r.to !== 'health') {
      const { outcome, status } = answer.a;
      this.emit({ outcome, status, method: request.method, path: request.path, ...answer.extra });
    }
    return answer.a;
  }

  private async answer(r: Route, request: RelayRequest): Promise<{ a: Answer; extra?: Partial<RelayRequestEvent> }> {
    switch (r.to) {
      case 'answer':
        return { a: r.answer };
      case 'health':
        return { a: answers.health() };
      case 'connect':
        return { a: answers.notWebSocket() };
      case 'status': {
        const refused = await authorize(request.headers, this.options.token);
        return { a: refused ?? (await this.status()) };
      }
      case 'inbound':
        return this.inbound(r.channel, request);
    }
  }

  private async inbound(name: string, request: RelayRequest): Promise<{ a: Answer; extra?: Partial<RelayRequestEvent> }> {
    const ch = this.channels.get(name);
    if (!ch) return { a: answers.noChannel() };
    const now = this.now();
    const early = checkHeaders(request.headers, now, this.tolerance, this.maxBody, request.declaredLength);
    if (early) return { a: early, extra: { channel: name, message: said(early) } };
    if (request.declaredLength !== undefined && this.used + this.reserved + request.declaredLength > this.maxBytes) return { a: answers.full(), extra: { channel: name } };
    if (this.reading >= this.maxInflight) return { a: answers.busy(), extra: { channel: name } };

    let held = 0;
    try {
      const chunks: Uint8Array[] = [];
      let over: Answer | undefined;
      for await (const chunk of request.body()) {
        held += chunk.length;
        this.reading += chunk.length;
        if (this.reading > this.readingPeak) this.readingPeak = this.reading;
        if (held > this.maxBody) over = answers.tooLarge(this.maxBody);
        else if (this.reading > this.maxInflight) over = answers.busy();
        if (over) break;
        chunks.push(chunk);
      }
      if (over) return { a: over, extra: { channel: name, size: held } };
      const body = concat(chunks, held);
      const v = await this.verifierOf(ch).verify(request.headers, body, now);
      if (!v.ok) return { a: answers.refused(v), extra: { channel: name, size: held, reason: v.reason, message: v.message } };
      const headers = request.headerList().filter(([name]) => !HOP_BY_HOP.has(name.toLowerCase()));
      const size = sizeOf(headers, body);
      if (this.used + this.reserved + size > this.maxBytes) return { a: answers.full(), extra: { channel: name, size: held } };
      this.reserved += size;
      try {
        const seq = await this.append(ch, { receivedAt: now, headers, body, size });
        this.used += size;
        return { a: answers.stored(), extra: { channel: name, size: held, seq } };
      } catch (err) {
        return { a: answers.notStored(), extra: { channel: name, size: held, message: `not stored: ${(err as Error).message}` } };
      } finally {
        this.reserved -= size;
      }
    } finally {
      this.reading -= held;
    }
  }

  private verifierOf(ch: LiveChannel): WebVerifier {
    ch.verifier ??= new WebVerifier({ secret: ch.record.secrets, tolerance: this.tolerance });
    return ch.verifier;
  }

  /** Stores a verified delivery with those of the same moment, in arrival order; resolves with its seq once stored. */
  private append(ch: LiveChannel, delivery: Omit<StoredDelivery, 'seq'>): Promise<number> {
    return new Promise((resolve, reject) => {
      ch.pending.push({ delivery, resolve, reject });
      if (!ch.writing) void this.write(ch);
    });
  }

  private async write(ch: LiveChannel): Promise<void> {
    ch.writing = true;
    while (ch.pending.length) {
      const batch = ch.pending.splice(0);
      const first = ch.record.nextSeq;
      // the seqs are spent even if the write fails: part of a batch may have been stored
      ch.record.nextSeq = first + batch.length;
      try {
        await this.storage.append(
          ch.record.name,
          batch.map((p, i) => ({ ...p.delivery, seq: first + i })),
          ch.record.nextSeq,
        );
        batch.forEach((p, i) => p.resolve(first + i));
      } catch (err) {
        batch.forEach((p) => p.reject(err));
      }
    }
    ch.writing = false;
    void this.enqueue(ch, () => this.pump(ch)).catch(() => undefined);
  }

  /** Runs a channel's connection work one step at a time. */
  private enqueue(ch: LiveChannel, step: () => Promise<void>): Promise<void> {
    const next = ch.queue.then(step, step);
    ch.queue = next.catch(() => undefined);
    return next;
  }

  /** Sends what the channel's open connection has room for, in order. A connection the storage fails for is closed: the next one gets it all again. */
  private async pump(ch: LiveChannel): Promise<void> {
    for (const socket of this.directory.sockets(ch.record.name)) {
      const s = socket.session();
      if (!s?.opened || s.inflight.length >= s.window) continue;
      const inflightBytes = s.inflight.reduce((n, [, size]) => n + size, 0);
      const room = s.windowBytes - inflightBytes;
      if (s.inflight.length && room <= 0) continue;
      let next: StoredDelivery[];
      try {
        next = await this.storage.read(ch.record.name, s.lastSent, s.window - s.inflight.length, Math.max(room, 1));
      } catch (err) {
        this.emit({ event: 'refused', channel: ch.record.name, message: `the deliveries could not be read: ${(err as Error).message}` });
        socket.setSession({ ...s, opened: false });
        socket.close(CLOSE.internal, 'the relay could not read its storage');
        continue;
      }
      if (s.inflight.length && next[0] && next[0].size > room) continue;
      for (const d of next) {
        for (const frame of deliveryFrames(d)) socket.send(frame);
        s.inflight.push([d.seq, d.size]);
        s.lastSent = d.seq;
      }
      socket.setSession(s);
    }
  }

  /**
   * Whether to take a WebSocket on this request (`GET /connect/<channel>` with the relay token): the
   * channel, or what to answer instead.
   */
  async accept(request: { method: string; path: string; headers: HeaderSource; webSocket: boolean }): Promise<{ channel: string } | { answer: Answer }> {
    const r = route(request.method, request.path);
    const refused = r.to === 'answer' ? r.answer : r.to !== 'connect' ? answers.notFound() : !request.webSocket ? answers.notWebSocket() : await authorize(request.headers, this.options.token);
    if (!refused && r.to === 'connect') return { channel: r.channel };
    const a = refused ?? answers.notFound();
    this.emit({ outcome: a.outcome, status: a.status, method: request.method, path: request.path, message: said(a) });
    return { answer: a };
  }

  /** A WebSocket the host took on /connect/<channel> (`accept` said so). */
  connected(socket: RelaySocket, channel: string): void {
    socket.setSession({ channel, opened: false, lastSent: 0, inflight: [], window: DEFAULT_WINDOW, windowBytes: DEFAULT_WINDOW_BYTES });
  }

  /** A message on a WebSocket. */
  async message(socket: RelaySocket, data: string | Uint8Array): Promise<void> {
    await this.load();
    const s = socket.session();
    if (!s) return;
    if (data === PING) return socket.send(PONG);
    const m = typeof data === 'string' ? parseClientMessage(data) : undefined;
    if (!m) return this.refuse(socket, 'protocol', 'that message is not one this relay understands');
    if (m.type === 'open') return this.open(socket, s, m);
    const ch = this.channels.get(s.channel);
    if (!s.opened || !ch) return this.refuse(socket, 'protocol', 'the channel is not open on this connection: send open first');
    if (m.type === 'ack') return this.enqueue(ch, () => this.ack(ch, socket, m.seqs));
    return this.enqueue(ch, () => this.remove(ch, socket));
  }

  private refuse(socket: RelaySocket, code: keyof typeof CLOSE, message: string): void {
    const s = socket.session();
    this.emit({ event: 'refused', channel: s?.channel, message });
    send(socket, { type: 'error', code, message });
    if (s) socket.setSession({ ...s, opened: false });
    socket.close(CLOSE[code], message);
  }

  private async open(socket: RelaySocket, s: Session, m: Extract<ClientMessage, { type: 'open' }>): Promise<void> {
    if (m.protocol !== PROTOCOL_VERSION) return this.refuse(socket, 'protocol', `this relay speaks protocol ${PROTOCOL_VERSION}, not ${m.protocol}: use a wxhooks of the same version as the relay`);
    if (s.opened) return this.refuse(socket, 'protocol', 'the channel is already open on this connection');
    const now = this.now();
    let ch = this.channels.get(s.channel);
    let created = false;
    if (!ch) {
      if (!m.secrets) return this.refuse(socket, 'unknownChannel', `no channel "${s.channel}" on this relay: give the webhook's secret to create it`);
      const record: ChannelRecord = { name: s.channel, secrets: m.secrets, temporary: Boolean(m.temporary), createdAt: now, lastSeenAt: now, nextSeq: 1 };
      ch = { record, pending: [], writing: false, queue: Promise.resolve() };
      this.channels.set(s.channel, ch);
      created = true;
    }
    const live = ch;
    await this.enqueue(live, async () => {
      const r = live.record;
      if (m.secrets && (m.secrets.length !== r.secrets.length || m.secrets.some((x, i) => x !== r.secrets[i]))) {
        r.secrets = m.secrets;
        live.verifier = undefined;
      }
      if (m.temporary !== undefined) r.temporary = m.temporary;
      r.lastSeenAt = now;
      try {
        await this.storage.saveChannel(r);
      } catch (err) {
        if (created) this.channels.delete(r.name);
        this.emit({ event: 'refused', channel: r.name, message: `the channel could not be stored: ${(err as Error).message}` });
        send(socket, { type: 'error', code: 'internal', message: 'the relay could not store the channel; try again later' });
        return socket.close(CLOSE.internal, 'storage failed');
      }
      if (created) this.emit({ event: 'channel_created', channel: r.name });
      for (const other of this.directory.sockets(r.name)) {
        const o = other.session();
        if (other === socket || !o?.opened) continue;
        other.setSession({ ...o, opened: false });
        send(other, { type: 'error', code: 'replaced', message: 'another connection opened this channel' });
        other.close(CLOSE.replaced, 'another connection opened this channel');
        this.emit({ event: 'replaced', channel: r.name, unacknowledged: o.inflight.length });
      }
      const session: Session = {
        ...s,
        opened: true,
        lastSent: 0,
        inflight: [],
        window: Math.min(m.window ?? DEFAULT_WINDOW, MAX_WINDOW),
        windowBytes: Math.min(m.windowBytes ?? DEFAULT_WINDOW_BYTES, this.maxWindowBytes),
      };
      socket.setSession(session);
      const usage = (await this.storage.usage()).get(r.name) ?? { queued: 0, bytes: 0 };
      send(socket, { type: 'ready', channel: r.name, created, temporary: r.temporary, queued: usage.queued, bytes: usage.bytes, window: session.window, windowBytes: session.windowBytes });
      this.emit({ event: 'connected', channel: r.name, queued: usage.queued });
      await this.pump(live);
    });
  }

  private async ack(ch: LiveChannel, socket: RelaySocket, seqs: number[]): Promise<void> {
    const s = socket.session();
    if (!s?.opened) return;
    const sent = new Set(s.inflight.map(([seq]) => seq));
    const acked = new Set(seqs.filter((seq) => sent.has(seq)));
    if (!acked.size) return;
    this.freed(await this.storage.remove(ch.record.name, [...acked]));
    socket.setSession({ ...s, inflight: s.inflight.filter(([seq]) => !acked.has(seq)) });
    await this.pump(ch);
  }

  private async remove(ch: LiveChannel, socket: RelaySocket): Promise<void> {
    const name = ch.record.name;
    const removed = await this.storage.deleteChannel(name);
    this.freed(removed);
    this.channels.delete(name);
    this.emit({ event: 'channel_deleted', channel: name, deliveries: removed.length });
    const s = socket.session();
    if (s) socket.setSession({ ...s, opened: false });
    send(socket, { type: 'deleted', channel: name });
    socket.close(CLOSE.deleted, 'channel deleted');
  }

  private freed(removed: Removed[]): void {
    for (const r of removed) this.used -= r.size;
  }

  /** A WebSocket closed (by either side, or cut): what it had not acknowledged is sent again on the next connection. */
  async closed(socket: RelaySocket): Promise<void> {
    await this.load();
    const s = socket.session();
    if (!s?.opened) return;
    socket.setSession({ ...s, opened: false });
    const ch = this.channels.get(s.channel);
    this.emit({ event: 'disconnected', channel: s.channel, unacknowledged: s.inflight.length });
    if (!ch) return;
    await this.enqueue(ch, async () => {
      ch.record.lastSeenAt = this.now();
      await this.storage.saveChannel(ch.record).catch(() => undefined);
    });
  }

  /** Drops deliveries older than kept, and channels unused for as long (their connection gone). */
  async sweep(): Promise<void> {
    const now = this.now();
    const expired = await this.storage.expire(now - this.keepMs);
    this.freed(expired);
    const per = new Map<string, number>();
    for (const r of expired) per.set(r.channel, (per.get(r.channel) ?? 0) + 1);
    for (const [channel, deliveries] of per) this.emit({ event: 'expired', channel, deliveries });
    for (const ch of [...this.channels.values()]) {
      const name = ch.record.name;
      if (now - ch.record.lastSeenAt <= this.keepMs || this.directory.sockets(name).some((s) => s.session()?.opened)) continue;
      this.channels.delete(name);
      const removed = await this.storage.deleteChannel(name);
      this.freed(removed);
      this.emit({ event: 'channel_forgotten', channel: name, deliveries: removed.length });
    }
  }

  /** What is queued per channel (never a secret). */
  async status(): Promise<Answer> {
    await this.sweep();
    const usage = await this.storage.usage();
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    const channels = [...this.channels.values()]
      .map((ch) => ch.record)
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => {
        const u = usage.get(r.name) ?? { queued: 0, bytes: 0 };
        return {
          channel: r.name,
          temporary: r.temporary,
          connected: this.directory.sockets(r.name).some((s) => s.session()?.opened),
          queued: u.queued,
          bytes: u.bytes,
          oldest_at: iso(u.oldestAt),
          created_at: iso(r.createdAt),
          last_seen_at: iso(r.lastSeenAt),
        };
      });
    return answers.status({
      channels,
      queued: channels.reduce((n, c) => n + c.queued, 0),
      bytes: this.used,
      max_bytes: this.maxBytes,
      keep_seconds: Math.round(this.keepMs / 1000),
      in_flight: { bytes: this.reading, peak: this.readingPeak, max: this.maxInflight },
    });
  }
}

function send(socket: RelaySocket, message: RelayMessage): void {
  try {
    socket.send(JSON.stringify(message));
  } catch {
    // the connection is already gone: what it had not acknowledged is sent again on the next one
  }
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
