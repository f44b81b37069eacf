import { answers, type Answer } from './answers.js';
import { bearer, keysOf } from './channel-key.js';
import { authorize, route, type Route } from './edge.js';
import { inboundDoor, type InboundRequest } from './inbound.js';
import { accept, closed, connected, message, roleOf } from './outbound.js';
import { RelayState, liveChannel, type RelayOptions, type RelayRequest, type RelayRequestEvent, type RelaySocket, type Session, type SocketDirectory } from './state.js';
import type { ChannelUsage } from './storage.js';
import { sweep } from './sweep.js';

export type { RelayChannelEvent, RelayEvent, RelayOptions, RelayRequest, RelayRequestEvent, RelaySocket, Session, SocketDirectory } from './state.js';

/**
 * The relay's logic, runtime-neutral (no Node module): the same in the Node host (node-host.ts) and the
 * Worker's Durable Object (worker.ts). A host turns its requests and WebSockets into calls of this class
 * and writes back what it returns; the storage is the host's (storage.ts). Its parts: the edge (edge.ts:
 * what headers alone decide), deliveries coming in (inbound.ts), the connections of `listen` taking them
 * (outbound.ts), and what time lets go of (sweep.ts), over the state they share (state.ts).
 */

/** A channel as its status says it (never a secret). */
export interface ChannelStatus {
  channel: string;
  temporary: boolean;
  connected: boolean;
  queued: number;
  refused: number;
  bytes: number;
  oldest_at: string | null;
  created_at: string;
  last_seen_at: string;
}

/** A refused delivery as listed (its headers as received, why its listen refused it; never its body). */
export interface RefusedEntry {
  seq: number;
  received_at: string;
  refused_at: string;
  size: number;
  reason: string;
  message: string;
  headers: [string, string][];
}

const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());

export class Relay {
  private readonly state: RelayState;
  private readonly inbound: (req: InboundRequest, answered: (a: Answer) => void) => void;
  private loaded: Promise<void> | undefined;

  constructor(options: RelayOptions, directory: SocketDirectory) {
    this.state = new RelayState(options, directory);
    this.inbound = inboundDoor(this.state);
  }

  /** Reads the channels and what they hold, and drops what is older than kept. Called once, before anything else. */
  load(): Promise<void> {
    this.loaded ??= (async () => {
      const { storage } = this.state;
      const [records, usage] = await Promise.all([storage.channels(), storage.usage()]);
      for (const record of records) this.state.channels.set(record.name, liveChannel(record));
      for (const u of usage.values()) this.state.used += u.bytes;
      await sweep(this.state);
    })();
    return this.loaded;
  }

  /** Answers an HTTP request that is not a WebSocket: an inbound delivery, a channel's API, the status, the health check. */
  async http(request: RelayRequest): Promise<Answer> {
    await this.load();
    const r = route(request.method, request.path, request.query);
    // a delivery goes through the relay's door, which reports it itself
    if (r.to === 'inbound') return new Promise((resolve) => this.inbound({ channel: r.channel, request, at: this.state.now() }, resolve));
    const answer = await this.answer(r, request);
    if (r.to !== 'health') {
      const { outcome, status } = answer.a;
      this.state.emit({ outcome, status, method: request.method, path: request.path, ...answer.extra });
    }
    return answer.a;
  }

  private async answer(r: Exclude<Route, { to: 'inbound' }>, request: RelayRequest): Promise<{ a: Answer; extra?: Partial<RelayRequestEvent> }> {
    switch (r.to) {
      case 'answer':
        return { a: r.answer };
      case 'health':
        return { a: answers.health() };
      case 'connect':
        return { a: answers.notWebSocket() };
      case 'status': {
        const given = bearer(request.headers);
        const refused = given && keysOf(given) ? answers.operatorOnly() : await authorize(request.headers, this.state.settings.token);
        return { a: refused ?? (await this.status()) };
      }
      case 'channel': {
        const role = await roleOf(this.state, request.headers, r.channel);
        if (typeof role !== 'string') return { a: role, extra: { channel: r.channel } };
        return { a: await this.channelApi(r), extra: { channel: r.channel } };
      }
    }
  }

  /** A channel's own API: its status, its refused deliveries, dropping some. Reached by the relay token or the channel's keys. */
  private async channelApi(r: Extract<Route, { to: 'channel' }>): Promise<Answer> {
    const { storage } = this.state;
    const ch = this.state.channels.get(r.channel);
    if (!ch) return answers.wrongKey(); // the operator asked for a channel there is not (gone since)
    if (r.what === 'status') return answers.channel(this.statusOf(r.channel, (await storage.usage()).get(r.channel)));
    const refused = await storage.refusedOf(r.channel);
    if (r.what === 'refused') {
      const entries: RefusedEntry[] = refused.map((d) => ({
        seq: d.seq,
        received_at: iso(d.receivedAt)!,
        refused_at: iso(d.refused!.at)!,
        size: d.size,
        reason: d.refused!.reason,
        message: d.refused!.message,
        headers: d.headers,
      }));
      return answers.channel({ channel: r.channel, refused: entries });
    }
    const wanted = r.seqs ? new Set(r.seqs) : undefined;
    const seqs = refused.map((d) => d.seq).filter((seq) => !wanted || wanted.has(seq));
    const dropped = await this.state.enqueue(ch, async () => {
      const removed = await storage.remove(r.channel, seqs);
      this.state.freed(removed);
      return removed;
    });
    this.state.emit({ event: 'dropped', channel: r.channel, deliveries: dropped.length });
    // a temporary channel whose listen is gone, and which now holds nothing, goes
    const u = (await storage.usage()).get(r.channel);
    if (ch.record.temporary && !this.state.connected(r.channel) && !u?.queued && !u?.refused) {
      this.state.channels.delete(r.channel);
      this.state.freed(await storage.deleteChannel(r.channel));
      this.state.emit({ event: 'channel_deleted', channel: r.channel, deliveries: 0 });
    }
    const missing = wanted ? [...wanted].filter((seq) => !seqs.includes(seq)) : [];
    return answers.channel({ channel: r.channel, dropped: dropped.map((d) => d.seq).sort((a, b) => a - b), not_refused: missing });
  }

  /** Whether to take a WebSocket on this request: the channel and who it is, or what to answer instead. */
  async accept(request: Parameters<typeof accept>[1]): ReturnType<typeof accept> {
    await this.load();
    return accept(this.state, request);
  }

  /** A WebSocket the host took on /connect/<channel> (`accept` said so). */
  connected(socket: RelaySocket, channel: string, role: Session['role']): void {
    connected(this.state, socket, channel, role);
  }

  /** A message on a WebSocket. */
  async message(socket: RelaySocket, data: string | Uint8Array): Promise<void> {
    await this.load();
    return message(this.state, socket, data);
  }

  /** A WebSocket closed (by either side, or cut). */
  async closed(socket: RelaySocket): Promise<void> {
    await this.load();
    return closed(this.state, socket);
  }

  /** Drops deliveries older than kept, and channels unused for as long. */
  sweep(): Promise<void> {
    return sweep(this.state);
  }

  private statusOf(name: string, u: ChannelUsage | undefined): ChannelStatus {
    const r = this.state.channels.get(name)!.record;
    return {
      channel: r.name,
      temporary: r.temporary,
      connected: this.state.connected(r.name),
      queued: u?.queued ?? 0,
      refused: u?.refused ?? 0,
      bytes: u?.bytes ?? 0,
      oldest_at: iso(u?.oldestAt),
      created_at: iso(r.createdAt)!,
      last_seen_at: iso(r.lastSeenAt)!,
    };
  }

  /** What each channel holds now, and the bytes being read, for `/metrics` (no sweep: a scrape changes nothing). */
  async backlog(): Promise<{ channels: ChannelStatus[]; inFlight: { used: number; max: number } }> {
    const usage = await this.state.storage.usage();
    return { channels: [...this.state.channels.keys()].map((name) => this.statusOf(name, usage.get(name))), inFlight: { used: this.state.budget.used, max: this.state.budget.max } };
  }

  /** What is queued per channel (never a secret). */
  async status(): Promise<Answer> {
    const state = this.state;
    await sweep(state);
    const usage = await state.storage.usage();
    const channels = [...state.channels.keys()].sort((a, b) => a.localeCompare(b)).map((name) => this.statusOf(name, usage.get(name)));
    return answers.status({
      channels,
      queued: channels.reduce((n, c) => n + c.queued, 0),
      refused: channels.reduce((n, c) => n + c.refused, 0),
      bytes: state.used,
      max_bytes: state.settings.maxBytes,
      max_channels: state.settings.maxChannels,
      keep_seconds: Math.round(state.settings.keepMs / 1000),
      in_flight: { bytes: state.budget.used, peak: state.budget.peak, max: state.budget.max },
    });
  }
}
