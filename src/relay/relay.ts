import { answers, type Answer } from './answers.js';
import { authorize, route, type Route } from './edge.js';
import { inbound } from './inbound.js';
import { accept, closed, connected, message } from './outbound.js';
import { RelayState, liveChannel, type RelayOptions, type RelayRequest, type RelayRequestEvent, type RelaySocket, type SocketDirectory } from './state.js';
import { sweep } from './sweep.js';

export type { RelayChannelEvent, RelayEvent, RelayOptions, RelayRequest, RelayRequestEvent, RelaySocket, Session, SocketDirectory } from './state.js';

/**
 * The relay's logic, runtime-neutral (no Node module): the same in the Node host (node-host.ts) and the
 * Worker's Durable Object (worker.ts). A host turns its requests and WebSockets into calls of this class
 * and writes back what it returns; the storage is the host's (storage.ts). Its parts: the edge (edge.ts:
 * what headers alone decide), deliveries coming in (inbound.ts), the connections of `listen` taking them
 * (outbound.ts), and what time lets go of (sweep.ts), over the state they share (state.ts).
 */
export class Relay {
  private readonly state: RelayState;
  private loaded: Promise<void> | undefined;

  constructor(options: RelayOptions, directory: SocketDirectory) {
    this.state = new RelayState(options, directory);
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

  /** Answers an HTTP request that is not a WebSocket: an inbound delivery, the status, the health check. */
  async http(request: RelayRequest): Promise<Answer> {
    await this.load();
    const r = route(request.method, request.path);
    const answer = await this.answer(r, request);
    if (r.to !== 'health') {
      const { outcome, status } = answer.a;
      this.state.emit({ outcome, status, method: request.method, path: request.path, ...answer.extra });
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
        const refused = await authorize(request.headers, this.state.settings.token);
        return { a: refused ?? (await this.status()) };
      }
      case 'inbound':
        return inbound(this.state, r.channel, request);
    }
  }

  /** Whether to take a WebSocket on this request: the channel, or what to answer instead. */
  accept(request: Parameters<typeof accept>[1]): ReturnType<typeof accept> {
    return accept(this.state, request);
  }

  /** A WebSocket the host took on /connect/<channel> (`accept` said so). */
  connected(socket: RelaySocket, channel: string): void {
    connected(socket, channel);
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

  /** What is queued per channel (never a secret). */
  async status(): Promise<Answer> {
    const state = this.state;
    await sweep(state);
    const usage = await state.storage.usage();
    const iso = (ms: number | undefined) => (ms === undefined ? null : new Date(ms).toISOString());
    const channels = [...state.channels.values()]
      .map((ch) => ch.record)
      .sort((a, b) => a.name.localeCompare(b.name))
      .map((r) => {
        const u = usage.get(r.name) ?? { queued: 0, bytes: 0 };
        return {
          channel: r.name,
          temporary: r.temporary,
          connected: state.connected(r.name),
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
      bytes: state.used,
      max_bytes: state.settings.maxBytes,
      keep_seconds: Math.round(state.settings.keepMs / 1000),
      in_flight: { bytes: state.reading, peak: state.readingPeak, max: state.settings.maxInflight },
    });
  }
}
