import type { ClientRequest, IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { AuthError, RefusedError, UnreachableError, UsageError, type WxError } from '../errors.js';
import { systemClock, type Clock } from '../util/clock.js';
import { networkReason } from '../util/net.js';
import { addSensitive } from '../util/redact.js';
import {
  CHANNEL_NAME,
  CLOSE,
  CONNECT_PREFIX,
  DEFAULT_WINDOW,
  DEFAULT_WINDOW_BYTES,
  FRAME_BODY,
  INBOUND_PREFIX,
  PING,
  PROTOCOL_VERSION,
  STATUS_PATH,
  readFrame,
  type ClientMessage,
  type RelayMessage,
} from './protocol.js';

/**
 * The client of a relay, for `listen --relay`: it connects out to the relay (no port of its own),
 * authenticates with the relay token, opens its channel (giving the webhook's secret), and hands each
 * delivery, with its exact bytes and headers, to a callback; what the callback acknowledges is deleted
 * by the relay, what it does not is handed to it again later. It reconnects by itself, with growing
 * delays and jitter, and says when the relay is unreachable and when it is back. It never prints.
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

export type RelayClientEvent =
  /** The channel is open: after start, and after each reconnection (`again`, with how long it was down). */
  | { kind: 'connected'; channel: string; inboundUrl: string; created: boolean; temporary: boolean; queued: number; bytes: number; again: boolean; downMs?: number }
  /** The connection was lost; the client is connecting again. */
  | { kind: 'disconnected'; reason: string }
  /** The relay cannot be reached (once per outage, until `connected`); the client keeps trying. */
  | { kind: 'unreachable'; reason: string; retryInMs: number };

export interface RelayClientOptions {
  /** The relay's address (https://…, or http:// for one on this machine). */
  url: string;
  /** The relay token (WXHOOKS_RELAY_TOKEN). */
  token: string;
  channel: string;
  /** The webhook's secret: creates the channel, or replaces the one the relay keeps. */
  secrets?: readonly string[];
  /** A channel for this session only (a temporary webhook). */
  temporary?: boolean;
  /** At most this many deliveries (and body bytes) handed over and not yet acknowledged. */
  window?: number;
  windowBytes?: number;
  /** How many deliveries the callback handles at once (default 1: one after the other, in order). */
  concurrency?: number;
  /**
   * Handles one delivery: resolves true once it is handled for good (the relay deletes it), false when
   * it is not (it is handed over again after a growing delay, or on the next connection). A throw is false.
   */
  onDelivery(delivery: RelayedDelivery): Promise<boolean>;
  onEvent?(event: RelayClientEvent): void;
  clock?: Clock;
  /** For the jitter (default Math.random). */
  random?: () => number;
  /** A connection not open within this is given up, and tried again (default 10 s). */
  connectTimeoutMs?: number;
  /** A keep-alive is sent this often; a connection from which nothing came for more than two of them is taken as dead (default 30 s). */
  heartbeatMs?: number;
}

/** What the relay said when the channel was first opened. */
export interface RelayReady {
  channel: string;
  inboundUrl: string;
  created: boolean;
  temporary: boolean;
  queued: number;
  bytes: number;
}

/** The URL the service posts a channel's deliveries to: the webhook's URL. */
export function inboundUrl(relay: string, channel: string): string {
  return new URL(INBOUND_PREFIX.slice(1) + channel, withSlash(httpUrl(relay))).toString();
}

/** A name for a temporary channel: not guessable (nobody can post to it without the secret anyway, but nobody should find it either). */
export function newChannelName(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  return `tmp-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
}

function httpUrl(relay: string): URL {
  let u: URL;
  try {
    u = new URL(relay);
  } catch {
    throw new UsageError(`The relay's address "${relay}" is not a URL.`, { hint: 'Give it whole: https://relay.example.com (or http://127.0.0.1:8790 for one on this machine).' });
  }
  if (u.protocol === 'ws:') u.protocol = 'http:';
  if (u.protocol === 'wss:') u.protocol = 'https:';
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new UsageError(`The relay's address must be https:// (or http://), not ${u.protocol}//…`);
  if (u.username || u.password) throw new UsageError("The relay's address must not carry a user or password: the relay token goes in WXHOOKS_RELAY_TOKEN.");
  u.search = '';
  u.hash = '';
  return u;
}

/** What a relay's `GET /status` says (never a secret). */
export interface RelayStatus {
  channels: { channel: string; temporary: boolean; connected: boolean; queued: number; bytes: number; oldest_at: string | null; created_at: string; last_seen_at: string }[];
  queued: number;
  bytes: number;
  max_bytes: number;
  keep_seconds: number;
  in_flight: { bytes: number; peak: number; max: number };
}

/**
 * Asks a relay what it holds (`relay status`; `doctor` checks the link with it): the relay unreachable is
 * exit 6, the token refused exit 3, an answer that is not a relay's exit 5.
 */
export async function relayStatus(relay: string, token: string, timeoutMs: number): Promise<RelayStatus> {
  const base = withSlash(httpUrl(relay));
  let res: Response;
  try {
    res = await fetch(new URL(STATUS_PATH.slice(1), base), { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new UnreachableError(`Cannot reach the relay at ${base.origin}: ${networkReason((err as { cause?: unknown }).cause ?? err, timeoutMs)}.`, {
      hint: 'Is it running, and is this its address?',
      cause: err,
    });
  }
  const text = await res.text();
  let body: Partial<RelayStatus> & { error?: string } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // not a relay's answer: said below
  }
  if (res.status === 401) throw new AuthError(`The relay refused the token: ${body.error ?? res.status}.`, { status: 401, hint: "WXHOOKS_RELAY_TOKEN must be the relay's own token." });
  if (!res.ok || !Array.isArray(body.channels))
    throw new RefusedError(`The relay at ${base.origin} answered ${res.status}${body.error ? `: ${body.error}` : ''}.`, { status: res.status, hint: 'Is this the address of a wxhooks relay?' });
  return body as RelayStatus;
}

const withSlash = (u: URL) => new URL(u.pathname.endsWith('/') ? u.toString() : `${u.toString()}/`);

/** A delivery whose frames are not all in yet. */
interface Assembling {
  seq: number;
  receivedAt: number;
  headers: [string, string][];
  body: Uint8Array;
  got: number;
}

/** How one connection ended. */
type Ended = { ready: boolean; reason: string; fatal?: WxError };

const RETRY_FIRST_MS = 500;
const RETRY_MAX_MS = 30_000;
const HANDLER_RETRY_FIRST_MS = 1000;
const HANDLER_RETRY_MAX_MS = 60_000;
/** The largest delivery the client assembles (the relay's own limit is below it). */
const MAX_DELIVERY = 256 * 1024 * 1024;

export class RelayClient {
  readonly inboundUrl: string;
  private readonly connectUrl: string;
  private readonly clock: Clock;
  private readonly random: () => number;
  private readonly concurrency: number;
  private ws: WebSocket | undefined;
  /** Which connection this is: a delivery of an earlier one is neither acknowledged nor tried again. */
  private generation = 0;
  private stopped = false;
  private queue: RelayedDelivery[] = [];
  private running = 0;
  private idle: (() => void) | undefined;
  private acks: number[] = [];
  private acking = false;
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

  constructor(private readonly options: RelayClientOptions) {
    const base = withSlash(httpUrl(options.url));
    if (!CHANNEL_NAME.test(options.channel)) throw new UsageError(`"${options.channel}" is not a channel name: letters, digits, _ . - (at most 64, starting with a letter or digit).`);
    if (!options.token) throw new UsageError("No relay token: set WXHOOKS_RELAY_TOKEN to the relay's token.");
    addSensitive(options.token);
    options.secrets?.forEach(addSensitive);
    this.inboundUrl = inboundUrl(options.url, options.channel);
    const ws = new URL(CONNECT_PREFIX.slice(1) + options.channel, base);
    ws.protocol = ws.protocol === 'https:' ? 'wss:' : 'ws:';
    this.connectUrl = ws.toString();
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.concurrency = Math.max(1, options.concurrency ?? 1);
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
      void this.loop();
    }
    return this.ready;
  }

  /**
   * Stops: no new delivery is taken, those being handled finish and are acknowledged, then the connection
   * closes. With `deleteChannel` the relay deletes the channel and what it holds first (a temporary one).
   */
  async close(options: { deleteChannel?: boolean; timeoutMs?: number } = {}): Promise<void> {
    if (this.stopped) return this.done.catch(() => undefined);
    this.stopped = true;
    this.queue = [];
    this.wake?.();
    if (this.running) await new Promise<void>((resolve) => (this.idle = resolve));
    this.flushAcks();
    const ws = this.ws;
    if (ws && ws.readyState === ws.OPEN && options.deleteChannel) {
      const deleted = new Promise<void>((resolve) => (this.deleted = resolve));
      this.send({ type: 'delete' });
      await Promise.race([deleted, this.clock.after(options.timeoutMs ?? 5000)]);
    }
    if (ws && ws.readyState !== ws.CLOSED) {
      const closed = new Promise<void>((resolve) => ws.once('close', () => resolve()));
      ws.close(1000, 'done');
      await Promise.race([closed, this.clock.after(options.timeoutMs ?? 5000)]);
      ws.terminate();
    }
    this.readyReject(new UsageError('The relay client was closed before the channel was open.'));
    this.doneResolve();
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
    let saidUnreachable = false;
    while (!this.stopped) {
      const ended = await this.connectOnce(WebSocketClass, (r) => {
        this.event({ kind: 'connected', ...r, again: everReady, ...(downSince !== undefined ? { downMs: Math.round(this.clock.monotonic() - downSince) } : {}) });
        if (!everReady) this.readyResolve(r);
        everReady = true;
        readyAt = this.clock.monotonic();
        downSince = undefined;
        saidUnreachable = false;
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
        // a connection that had lasted: connect again at once (a relay restarting, a network blip); one
        // that ended as soon as it was open backs off like a refused one, so that nothing spins
        if (this.clock.monotonic() - readyAt >= 1000) {
          attempt = 0;
          continue;
        }
      }
      downSince ??= this.clock.monotonic();
      const delay = this.backoff(attempt++, RETRY_FIRST_MS, RETRY_MAX_MS);
      if (!saidUnreachable && !ended.ready) {
        saidUnreachable = true;
        this.event({ kind: 'unreachable', reason: ended.reason, retryInMs: delay });
      }
      await this.sleep(delay);
    }
  }

  /** A growing delay with jitter: first × 2^attempt, at most max, times 0.5 to 1. */
  private backoff(attempt: number, first: number, max: number): number {
    return Math.round(Math.min(max, first * 2 ** Math.min(attempt, 20)) * (0.5 + this.random() / 2));
  }

  /** Waits, unless the client is closed meanwhile. */
  private async sleep(ms: number): Promise<void> {
    await Promise.race([this.clock.after(ms), new Promise<void>((resolve) => (this.wake = resolve))]);
    this.wake = undefined;
  }

  private send(message: ClientMessage | typeof PING): void {
    const ws = this.ws;
    if (ws?.readyState === ws?.OPEN) ws!.send(typeof message === 'string' ? message : JSON.stringify(message));
  }

  /** One connection, from connecting to its end. */
  private connectOnce(WebSocketClass: typeof WebSocket, onReady: (r: RelayReady) => void): Promise<Ended> {
    const generation = ++this.generation;
    this.queue = [];
    this.acks = [];
    const partial = new Map<number, Assembling>();
    return new Promise<Ended>((resolve) => {
      let ready = false;
      let reason = 'the connection was closed';
      let fatal: WxError | undefined;
      /** When the relay was last heard from (the monotonic clock). */
      let heard = this.clock.monotonic();
      const ws = new WebSocketClass(this.connectUrl, {
        headers: { authorization: `Bearer ${this.options.token}` },
        handshakeTimeout: this.options.connectTimeoutMs ?? 10_000,
        maxPayload: FRAME_BODY + 1024 * 1024,
        perMessageDeflate: false,
      });
      this.ws = ws;
      ws.on('unexpected-response', (_req: ClientRequest, res: IncomingMessage) => {
        const status = res.statusCode ?? 0;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (text = (text + d).slice(0, 2048)));
        res.on('end', () => {
          let said: string | undefined;
          try {
            said = (JSON.parse(text) as { error?: string }).error;
          } catch {
            said = undefined;
          }
          if (status === 401) {
            fatal = new AuthError(`The relay at ${this.options.url} refused the relay token: ${said ?? `it answered ${status}`}.`, {
              status,
              hint: "WXHOOKS_RELAY_TOKEN must be the relay's own token: the Worker's secret (wrangler secret put WXHOOKS_RELAY_TOKEN) or the one `wxhooks relay serve` was started with.",
            });
          } else if (status === 503 && said?.includes('WXHOOKS_RELAY_TOKEN')) {
            fatal = new RefusedError(`The relay at ${this.options.url} has no token set, so it takes no connection.`, {
              status,
              hint: 'Set its WXHOOKS_RELAY_TOKEN (wrangler secret put WXHOOKS_RELAY_TOKEN), then try again.',
            });
          } else if (status >= 400 && status < 500) {
            fatal = new RefusedError(`The relay at ${this.options.url} answered ${status}${said ? `: ${said}` : ''}.`, {
              status,
              hint: 'Is this the address of a wxhooks relay? It answers GET /health with {"relay":"wxhooks"}.',
            });
          } else {
            reason = `it answered ${status}${said ? ` (${said})` : ''}`;
          }
          ws.terminate();
        });
      });
      ws.on('open', () => {
        this.send({
          type: 'open',
          protocol: PROTOCOL_VERSION,
          ...(this.options.secrets ? { secrets: [...this.options.secrets] } : {}),
          ...(this.options.temporary !== undefined ? { temporary: this.options.temporary } : {}),
          window: this.options.window ?? DEFAULT_WINDOW,
          windowBytes: this.options.windowBytes ?? DEFAULT_WINDOW_BYTES,
        });
        heard = this.clock.monotonic();
        void this.heartbeat(ws, generation, () => heard);
      });
      ws.on('message', (data: Buffer, isBinary: boolean) => {
        heard = this.clock.monotonic();
        if (isBinary) return this.frame(data, partial, generation, ws);
        const text = data.toString('utf8');
        if (text === 'pong') return;
        let m: RelayMessage;
        try {
          m = JSON.parse(text) as RelayMessage;
        } catch {
          return;
        }
        if (m.type === 'ready') {
          ready = true;
          onReady({ channel: m.channel, inboundUrl: this.inboundUrl, created: m.created, temporary: m.temporary, queued: m.queued, bytes: m.bytes });
        } else if (m.type === 'deleted') {
          this.deleted?.();
        } else if (m.type === 'error') {
          reason = m.message;
          if (m.code === 'replaced')
            fatal = new RefusedError(`Another connection opened the channel ${this.options.channel} on the relay, so this one stopped.`, {
              hint: 'Only one `listen` may hold a channel: stop the other one, or give this one another channel.',
            });
          else if (m.code === 'unknownChannel')
            fatal = new RefusedError(`The relay has no channel ${this.options.channel}: ${m.message}.`, { hint: "Give the webhook's secret (listen --webhook ID) so that the relay creates it." });
          else if (m.code === 'protocol') fatal = new RefusedError(`The relay refused this client: ${m.message}.`);
        }
      });
      ws.on('error', (err) => {
        reason = networkReason(err);
      });
      ws.on('close', (code: number, why: Buffer) => {
        if (this.generation === generation) this.generation++;
        if (!fatal && (code === CLOSE.replaced || code === CLOSE.unknownChannel || code === CLOSE.protocol)) fatal = new RefusedError(`The relay closed the connection: ${why.toString() || code}.`);
        if (code === CLOSE.goingAway) reason = 'the relay is restarting';
        resolve({ ready, reason, fatal });
      });
    });
  }

  /** Sends a keep-alive every heartbeat; a connection from which nothing came for more than two is cut (and made again). */
  private async heartbeat(ws: WebSocket, generation: number, heard: () => number): Promise<void> {
    const every = this.options.heartbeatMs ?? 30_000;
    for (;;) {
      await this.clock.after(every);
      if (this.generation !== generation || ws.readyState !== ws.OPEN) return;
      if (this.clock.monotonic() - heard() > 2 * every) return ws.terminate();
      ws.send(PING);
    }
  }

  private frame(data: Buffer, partial: Map<number, Assembling>, generation: number, ws: WebSocket): void {
    const f = readFrame(data);
    if (!f) return void ws.terminate();
    const { meta, bytes } = f;
    let p = partial.get(meta.seq);
    if (meta.offset === 0) {
      if (meta.size === undefined || meta.size > MAX_DELIVERY || !meta.headers || meta.receivedAt === undefined) return void ws.terminate();
      p = { seq: meta.seq, receivedAt: meta.receivedAt, headers: meta.headers, body: new Uint8Array(meta.size), got: 0 };
      partial.set(meta.seq, p);
    }
    if (!p || meta.offset !== p.got || p.got + bytes.length > p.body.length) return void ws.terminate();
    p.body.set(bytes, meta.offset);
    p.got += bytes.length;
    if (p.got < p.body.length) return;
    partial.delete(meta.seq);
    this.queue.push({ channel: this.options.channel, seq: p.seq, receivedAt: p.receivedAt, headers: p.headers, body: p.body, attempt: 1 });
    this.drain(generation);
  }

  /** Hands deliveries to the callback, `concurrency` at a time, in order. */
  private drain(generation: number): void {
    while (!this.stopped && this.running < this.concurrency && this.queue.length && this.generation === generation) {
      const d = this.queue.shift()!;
      this.running++;
      void this.handle(d, generation);
    }
  }

  private async handle(d: RelayedDelivery, generation: number): Promise<void> {
    let ok: boolean;
    try {
      ok = await this.options.onDelivery(d);
    } catch {
      ok = false;
    }
    this.running--;
    if (this.generation === generation) {
      if (ok) this.ack(d.seq);
      else if (!this.stopped) void this.again(d, generation);
    }
    if (!this.running) this.idle?.();
    this.drain(generation);
  }

  /** A delivery not acknowledged: handed over again after a growing delay, on this connection (the next one gets it from the relay anyway). */
  private async again(d: RelayedDelivery, generation: number): Promise<void> {
    await this.clock.after(this.backoff(d.attempt - 1, HANDLER_RETRY_FIRST_MS, HANDLER_RETRY_MAX_MS));
    if (this.stopped || this.generation !== generation) return;
    this.queue.unshift({ ...d, attempt: d.attempt + 1 });
    this.drain(generation);
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
    this.send({ type: 'ack', seqs: this.acks });
    this.acks = [];
  }
}
