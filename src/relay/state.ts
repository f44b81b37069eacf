import * as DEFAULTS from '../delivery/defaults.js';
import type { HeaderSource } from '../signing/rules.js';
import type { WebVerifier } from '../signing/verify-web.js';
import { InflightBudget, type ChunkSink } from '../util/bodies.js';
import { isoMillis } from '../util/clock.js';
import type { Answer } from './answers.js';
import type { ChannelRecord, RelayStorage, Removed, StoredDelivery } from './storage.js';

/**
 * What the relay's parts (inbound.ts, outbound.ts, sweep.ts) share: its settings, its channels as held
 * in memory, its budgets, and its log. Runtime-neutral: the same in the Node host and the Worker.
 */

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
  /** Seconds a delivery's timestamp may be off the relay's clock (default 300): a channel's listen may narrow it. */
  tolerance?: number;
  /** The most channels kept: past it, none is created. */
  maxChannels?: number;
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
  event:
    | 'connected'
    | 'disconnected'
    | 'channel_created'
    | 'channel_deleted'
    | 'channel_forgotten'
    | 'secrets_replaced'
    | 'replaced'
    | 'taken'
    | 'expired'
    | 'refused'
    | 'delivery_refused'
    | 'dropped';
  channel?: string;
  seq?: number;
  reason?: string;
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
  /** The URL's query, without its `?`. */
  query?: string;
  headers: HeaderSource;
  /** The headers as received, in order: what is stored and handed on. Asked only of a verified delivery. */
  headerList(): [string, string][];
  /** The text of its Content-Length, when it was sent (read by the door's one reader of it). */
  length: string | null | undefined;
  /** Gives the body's chunks to `sink` as they arrive (the host's runtime: nodeBody, webBody); returns how to stop reading. */
  stream(sink: ChunkSink<Uint8Array>): (() => void) | undefined;
}

/** What the relay keeps with each connection: small and plain, so that a Durable Object keeps it across hibernation. */
export interface Session {
  channel: string;
  /** Who it is: the operator (the relay token: every channel, and may create one), or a holder of the channel's keys. */
  role: 'operator' | 'channel';
  /** The client's own name (its `open`'s), the same across its reconnections. */
  client?: string;
  /** When it was last heard from: its open, an acknowledgement, a keep-alive the relay saw (ms, the relay's clock). */
  heardAt: number;
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
  /** When the host last heard from it, when it knows better than the session (a keep-alive answered without waking a Durable Object). */
  heardAt?(): number | undefined;
}

/** The sockets a host holds for a channel (a Durable Object's are tagged with it). */
export interface SocketDirectory {
  sockets(channel: string): RelaySocket[];
}

/** A channel as the relay holds it in memory. */
export interface LiveChannel {
  record: ChannelRecord;
  verifier?: WebVerifier;
  /** Deliveries verified and waiting to be stored: written together, in arrival order. */
  pending: { delivery: Omit<StoredDelivery, 'seq'>; resolve: (seq: number) => void; reject: (err: unknown) => void }[];
  writing: boolean;
  /** The channel's connection work (open, ack, sending), one step at a time. */
  queue: Promise<void>;
  /** The channel's keys, one per secret (channel-key.ts), made when first asked. */
  keys?: Promise<string[]>;
  /** The `lastSeenAt` last written: a connection changes it in memory, and it is written now and then, not at each connection. */
  seenWritten: number;
}

export const liveChannel = (record: ChannelRecord): LiveChannel => ({ record, pending: [], writing: false, queue: Promise.resolve(), seenWritten: record.lastSeenAt });

/** The relay's settings, each resolved to its value. */
export interface Settings {
  token: string | undefined;
  maxBytes: number;
  keepMs: number;
  maxBody: number;
  maxInflight: number;
  maxWindowBytes: number;
  tolerance: number;
  maxChannels: number;
}

export class RelayState {
  readonly storage: RelayStorage;
  readonly settings: Settings;
  readonly now: () => number;
  readonly channels: Map<string, LiveChannel> = new Map<string, LiveChannel>();
  /** The bytes of the deliveries stored, and of those verified and being stored. */
  used = 0;
  reserved = 0;
  /** Body bytes being read now, across every request, against --max-inflight (the door's budget; the status says its peak). */
  readonly budget: InflightBudget;

  constructor(
    private readonly options: RelayOptions,
    readonly directory: SocketDirectory,
  ) {
    this.storage = options.storage;
    this.now = options.now ?? Date.now;
    this.settings = {
      token: options.token,
      maxBytes: options.maxBytes ?? DEFAULTS.relayMaxBytes,
      keepMs: options.keepMs ?? DEFAULTS.relayKeepMs,
      maxBody: options.maxBody ?? DEFAULTS.maxBodyBytes,
      maxInflight: options.maxInflight ?? DEFAULTS.relayMaxInflightBytes,
      maxWindowBytes: options.maxWindowBytes ?? DEFAULTS.relayMaxWindowBytes,
      tolerance: options.tolerance ?? DEFAULTS.toleranceSeconds,
      maxChannels: options.maxChannels ?? DEFAULTS.relayMaxChannels,
    };
    this.budget = new InflightBudget(this.settings.maxInflight);
  }

  emit(event: Omit<RelayRequestEvent, 'time'> | Omit<RelayChannelEvent, 'time'>): void {
    this.options.onEvent?.({ time: isoMillis(this.now()), ...event } as RelayEvent);
  }

  /** Runs a channel's connection work one step at a time. */
  enqueue<T>(ch: LiveChannel, step: () => Promise<T>): Promise<T> {
    const next = ch.queue.then(step, step);
    ch.queue = next.then(
      () => undefined,
      () => undefined,
    );
    return next;
  }

  /** What left the storage gives its bytes back to the budget. */
  freed(removed: Removed[]): void {
    for (const r of removed) this.used -= r.size;
  }

  /** What a delivery of `size` bytes takes in the storage, as the byte budget counts it. */
  footprint(size: number): number {
    return this.storage.footprint ? this.storage.footprint(size) : size;
  }

  /** When a socket was last heard from. */
  heardAt(socket: RelaySocket): number {
    return Math.max(socket.session()?.heardAt ?? 0, socket.heardAt?.() ?? 0);
  }

  /** Whether a channel has a connection open on it now. */
  connected(name: string): boolean {
    return this.directory.sockets(name).some((s) => s.session()?.opened);
  }
}
