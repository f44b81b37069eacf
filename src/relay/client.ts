import type WebSocket from 'ws';
import * as DEFAULTS from '../delivery/defaults.js';
import { UsageError } from '../errors.js';
import { systemClock, type Clock } from '../util/clock.js';
import { addSensitive } from '../util/redact.js';
import { MAX_KEYS, channelKey } from './channel-key.js';
import { connect, type Ended } from './connection.js';
import { Handover, type RelayedDelivery, type Verdict } from './handover.js';
import { CHANNEL_NAME, PROTOCOL_VERSION, type ClientMessage, type RelayMessage } from './protocol.js';
import { connectUrl, inboundUrl, newChannelName } from './status-client.js';

export type { RelayedDelivery, Verdict } from './handover.js';
export type { RetiredSecret } from './protocol.js';

/**
 * The client of a relay, for `listen --relay`: it connects out to the relay (no port of its own),
 * authenticates with the relay token or the channel's keys (derived from the webhook's secret), opens
 * its channel (giving the secrets and tolerance it verifies with), and hands each delivery, with its
 * exact bytes and headers, to a callback; what the callback acknowledges is deleted by the relay, what
 * it refuses is kept apart there, what it does not handle yet is handed to it again later. It
 * reconnects by itself, with growing delays and jitter, says so at every try, and keeps the process
 * alive meanwhile. It never prints. Its parts: one connection (connection.ts) and the queue of what it
 * brought (handover.ts).
 */

export type RelayClientEvent =
  /** The channel is open: after start, and after each reconnection (`again`, with how long it was down). */
  | ({ kind: 'connected'; again: boolean; downMs?: number } & Omit<RelayReady, 'retired'>)
  /** The connection was lost; the client is connecting again. */
  | { kind: 'disconnected'; reason: string }
  /** A try to reach the relay failed (said at every try, `attempt` from 1, until `connected`); the client tries again after `retryInMs`. */
  | { kind: 'unreachable'; reason: string; retryInMs: number; attempt: number };

export interface RelayClientOptions {
  /** The relay's address (https://…, or http:// for one on this machine). */
  url: string;
  /** The relay token (WXHOOKS_RELAY_TOKEN): every channel, and creating one. Without it, the channel's keys (from `secrets`) reach that channel only. */
  token?: string;
  channel: string;
  /** Every secret the client verifies with: creates the channel (with the token), or replaces those the relay keeps. */
  secrets?: readonly string[];
  /** The client's tolerance in seconds, and its layout: the relay acknowledges only what verifies so. */
  tolerance?: number;
  scheme?: string;
  /** A channel for this session only (a temporary webhook). */
  temporary?: boolean;
  /** At most this many deliveries (and body bytes) handed over and not yet acknowledged. */
  window?: number;
  windowBytes?: number;
  /** How many deliveries the callback handles at once (default 1: one after the other, in order). */
  concurrency?: number;
  /**
   * Handles one delivery: resolves true once it is handled for good (the relay deletes it), false when
   * it is not (it is handed over again after a growing delay, or on the next connection), `{refused}`
   * when it never will be (the relay keeps it apart, with why). A throw is false.
   */
  onDelivery(delivery: RelayedDelivery): Promise<Verdict>;
  onEvent?(event: RelayClientEvent): void;
  /** The channel is open (at the start, and again after each reconnection): what the relay said, its replaced secrets with it. */
  onOpen?(ready: RelayReady): void;
  clock?: Clock;
  /** For the jitter (default Math.random). */
  random?: () => number;
  /** A connection not open within this is given up, and tried again. */
  connectTimeoutMs?: number;
  /** A keep-alive is sent this often; a connection from which nothing came for more than two of them is taken as dead. */
  heartbeatMs?: number;
}

/** What the relay said when the channel was opened (its `ready`, the protocol's), with where deliveries go in. */
export type RelayReady = Omit<Extract<RelayMessage, { type: 'ready' }>, 'type' | 'window' | 'windowBytes'> & { inboundUrl: string };

export class RelayClient {
  readonly inboundUrl: string;
  private readonly connectUrl: string;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly handover: Handover;
  private ws: WebSocket | undefined;
  /** Which connection this is: a delivery of an earlier one is neither acknowledged nor tried again. */
  private generation = 0;
  private stopped = false;
  private wake: (() => void) | undefined;
  private readyResolve!: (r: RelayReady) => void;
  private readyReject!: (e: unknown) => void;
  private readonly ready: Promise<RelayReady>;
  private doneResolve!: () => void;
  private doneReject!: (e: unknown) => void;
  /** Settles when the client stops: resolves after `close`, rejects when the relay refuses it for good (token, channel, another connection took it over). */
  readonly done: Promise<void>;
  private started = false;
  private deleted: (() => void) | undefined;
  /** This client's name for itself at the relay: its own new connection takes over its old one. */
  private readonly session = newChannelName('listen');
  /** Holds the process while the client runs: between tries, nothing else may. */
  private alive: ReturnType<typeof setInterval> | undefined;
  /** The connection is being made again on purpose (new secrets): no back-off. */
  private again = false;
  /** The secrets the relay was last given, and took: their keys prove the next secrets the client gives it. */
  private proven: readonly string[] = [];

  constructor(private readonly options: RelayClientOptions) {
    if (!CHANNEL_NAME.test(options.channel)) throw new UsageError(`"${options.channel}" is not a channel name: letters, digits, _ . - (at most 64, starting with a letter or digit).`);
    if (!options.token && !options.secrets?.length)
      throw new UsageError("No relay token and no webhook secret: set WXHOOKS_RELAY_TOKEN to the relay's token, or give the webhook (listen --webhook ID).");
    if (options.token) addSensitive(options.token);
    options.secrets?.forEach(addSensitive);
    this.inboundUrl = inboundUrl(options.url, options.channel);
    this.connectUrl = connectUrl(options.url, options.channel);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.handover = new Handover({
      concurrency: Math.max(1, options.concurrency ?? 1),
      clock: this.clock,
      backoff: (attempt, first, most) => this.backoff(attempt, first, most),
      onDelivery: options.onDelivery,
      send: (m) => this.send(m),
    });
    this.ready = new Promise((resolve, reject) => ((this.readyResolve = resolve), (this.readyReject = reject)));
    this.ready.catch(() => undefined);
    this.done = new Promise((resolve, reject) => ((this.doneResolve = resolve), (this.doneReject = reject)));
    this.done.catch(() => undefined);
  }

  /**
   * Connects and opens the channel; resolves once it is open. While the relay cannot be reached it keeps
   * trying (and says so by `onEvent`); it rejects only when the relay refuses it for good (the token, the
   * channel) or the client is closed first.
   */
  start(): Promise<RelayReady> {
    if (!this.started) {
      this.started = true;
      this.alive = setInterval(() => undefined, 2 ** 31 - 1);
      void this.loop().finally(() => clearInterval(this.alive));
    }
    return this.ready;
  }

  /** From now on, these secrets (the webhook's were replaced): the connection is made again, and the relay told. */
  setSecrets(secrets: readonly string[]): void {
    secrets.forEach(addSensitive);
    (this.options as { secrets?: readonly string[] }).secrets = [...secrets];
    const ws = this.ws;
    if (this.stopped || !ws || ws.readyState !== ws.OPEN) return;
    this.again = true;
    ws.close(1000, 'new secrets');
  }

  /**
   * Stops: no new delivery is taken, those being handled finish and are acknowledged, then the connection
   * closes. With `deleteChannel` the relay deletes the channel and what it holds first (a temporary one).
   */
  async close(options: { deleteChannel?: boolean; timeoutMs?: number } = {}): Promise<void> {
    if (this.stopped) return this.done.catch(() => undefined);
    this.stopped = true;
    this.wake?.();
    await this.handover.stop();
    const ws = this.ws;
    const waited = options.timeoutMs ?? DEFAULTS.relayCloseWaitMs;
    if (ws && ws.readyState === ws.OPEN && options.deleteChannel) {
      const deleted = new Promise<void>((resolve) => (this.deleted = resolve));
      this.send({ type: 'delete' });
      await Promise.race([deleted, this.clock.after(waited)]);
    }
    if (ws && ws.readyState !== ws.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      ws.close(1000, 'done');
      await Promise.race([closed, this.clock.after(waited)]);
      ws.terminate();
    }
    this.readyReject(new UsageError('The relay client was closed before the channel was open.'));
    this.doneResolve();
    clearInterval(this.alive);
  }

  private event(e: RelayClientEvent): void {
    this.options.onEvent?.(e);
  }

  private async loop(): Promise<void> {
    const { default: WebSocketClass } = await import('ws');
    let attempt = 0;
    let everReady = false;
    let readyAt = 0;
    let downSince: number | undefined;
    while (!this.stopped) {
      const ended = await this.connectOnce(WebSocketClass, (r) => {
        const { retired: _secrets, ...said } = r; // an event never holds a secret
        this.event({ kind: 'connected', ...said, again: everReady, ...(downSince !== undefined ? { downMs: Math.round(this.clock.monotonic() - downSince) } : {}) });
        if (!everReady) this.readyResolve(r);
        everReady = true;
        readyAt = this.clock.monotonic();
        downSince = undefined;
        attempt = 0;
      });
      if (this.stopped) break;
      if (ended.fatal) {
        this.stopped = true;
        this.readyReject(ended.fatal);
        this.doneReject(ended.fatal);
        return;
      }
      if (ended.ready) {
        downSince = this.clock.monotonic();
        this.event({ kind: 'disconnected', reason: ended.reason });
        // a connection that had lasted, or closed for new secrets: connect again at once (a relay restarting,
        // a network blip); one that ended as soon as it was open backs off like a refused one, so that nothing spins
        if (this.again || this.clock.monotonic() - readyAt >= 1000) {
          this.again = false;
          attempt = 0;
          continue;
        }
      }
      downSince ??= this.clock.monotonic();
      const delay = this.backoff(attempt++, DEFAULTS.relayRetryFirstMs, DEFAULTS.relayRetryMostMs);
      if (!ended.ready) this.event({ kind: 'unreachable', reason: ended.reason, retryInMs: delay, attempt });
      await this.sleep(delay);
    }
  }

  /** A growing delay with jitter: first × 2^attempt, at most `most`, times 0.5 to 1. */
  private backoff(attempt: number, first: number, most: number): number {
    return Math.round(Math.min(most, first * 2 ** Math.min(attempt, 20)) * (0.5 + this.random() / 2));
  }

  /** Waits, unless the client is closed meanwhile. */
  private async sleep(ms: number): Promise<void> {
    await Promise.race([this.clock.after(ms), new Promise<void>((resolve) => (this.wake = resolve))]);
    this.wake = undefined;
  }

  private send(message: ClientMessage): void {
    const ws = this.ws;
    if (ws?.readyState === ws?.OPEN) ws!.send(JSON.stringify(message));
  }

  /** `Bearer` and the relay token, or the channel's keys: one per secret, and those the relay took last (a secret replaced while running is proved by the one before). */
  private async authorization(): Promise<string> {
    const o = this.options;
    if (o.token) return `Bearer ${o.token}`;
    const secrets = [...new Set([...o.secrets!, ...this.proven])].slice(0, MAX_KEYS);
    return `Bearer ${(await Promise.all(secrets.map((s) => channelKey(s, o.channel)))).join(',')}`;
  }

  /** One connection, from connecting to its end. */
  private async connectOnce(WebSocketClass: typeof WebSocket, onReady: (r: RelayReady) => void): Promise<Ended> {
    const generation = ++this.generation;
    this.handover.reset(generation);
    const o = this.options;
    const { ws, ended } = connect(WebSocketClass, {
      url: this.connectUrl,
      relay: o.url,
      authorization: await this.authorization(),
      withKeys: !o.token,
      channel: o.channel,
      open: {
        type: 'open',
        protocol: PROTOCOL_VERSION,
        session: this.session,
        ...(o.secrets ? { secrets: [...o.secrets] } : {}),
        ...(o.tolerance !== undefined ? { tolerance: o.tolerance } : {}),
        ...(o.scheme !== undefined ? { scheme: o.scheme } : {}),
        ...(o.temporary !== undefined ? { temporary: o.temporary } : {}),
        window: o.window ?? DEFAULTS.relayWindow,
        windowBytes: o.windowBytes ?? DEFAULTS.relayWindowBytes,
      },
      clock: this.clock,
      connectTimeoutMs: o.connectTimeoutMs ?? DEFAULTS.relayConnectTimeoutMs,
      heartbeatMs: o.heartbeatMs ?? DEFAULTS.relayHeartbeatMs,
      onReady: (m) => {
        this.proven = o.secrets ?? [];
        m.retired.forEach((r) => addSensitive(r.secret));
        // what the relay said, field by field (nothing else it sends reaches the lines listen writes)
        const r: RelayReady = { channel: m.channel, inboundUrl: this.inboundUrl, created: m.created, temporary: m.temporary, queued: m.queued, bytes: m.bytes, refused: m.refused, retired: m.retired };
        o.onOpen?.(r);
        onReady(r);
      },
      onDeleted: () => this.deleted?.(),
      onDelivery: (d) => this.handover.push(d, generation),
    });
    this.ws = ws;
    const end = await ended;
    if (this.generation === generation) this.handover.reset(++this.generation);
    return end;
  }
}
