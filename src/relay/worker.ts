import * as DEFAULTS from '../delivery/defaults.js';
import { declaredLength, webBody } from '../util/bodies.js';
import { isoMillis } from '../util/clock.js';
import { said, type Answer } from './answers.js';
import { DurableObjectRelayStorage, type DurableSql } from './do-storage.js';
import { authorizeChannel, checkHeaders, route } from './edge.js';
import { CLOSE, PING, PONG } from './protocol.js';
import { Relay, type RelayEvent, type RelayRequest, type RelaySocket, type Session } from './relay.js';

/**
 * The relay's Worker host: a Cloudflare Worker in front of one Durable Object that holds every channel
 * (bundled into one file by scripts/bundle-relay.js; relay/wrangler.toml deploys it). The Worker itself
 * refuses what needs no storage (an unknown path, a delivery whose headers alone fail: missing, stale,
 * no signature; a connection, a channel's API or the status with neither the relay token nor what may
 * be a channel's keys), so that floods of those never wake the Durable Object; the rest goes to the
 * object, which runs the relay's logic (relay.ts) over its own SQLite (do-storage.ts) and holds the connections
 * of `listen` with the WebSocket Hibernation API: an idle connection costs nothing.
 *
 * Configuration (wrangler.toml's [vars], or the Worker's settings): WXHOOKS_RELAY_TOKEN (a secret:
 * `wrangler secret put WXHOOKS_RELAY_TOKEN`), RELAY_KEEP_SECONDS, RELAY_MAX_BYTES, RELAY_MAX_BODY,
 * RELAY_MAX_INFLIGHT, RELAY_MAX_CHANNELS (each unset: DEFAULTS').
 */

/** What the relay uses of the Workers runtime (declared here: the build has no Workers types). */
interface HibernatableWebSocket {
  send(data: string | Uint8Array): void;
  close(code?: number, reason?: string): void;
  serializeAttachment(value: unknown): void;
  deserializeAttachment(): unknown;
}
interface DurableObjectState {
  storage: DurableSql & { setAlarm(at: number): Promise<void>; getAlarm(): Promise<number | null> };
  acceptWebSocket(ws: HibernatableWebSocket, tags?: string[]): void;
  getWebSockets(tag?: string): HibernatableWebSocket[];
  /** When the runtime last answered this socket's keep-alive itself (without waking the object). */
  getWebSocketAutoResponseTimestamp?(ws: HibernatableWebSocket): Date | null;
  setWebSocketAutoResponse(pair: unknown): void;
  blockConcurrencyWhile<T>(fn: () => Promise<T>): Promise<T>;
}
interface DurableObjectStub {
  fetch(request: Request): Promise<Response>;
}
interface DurableObjectNamespace {
  idFromName(name: string): unknown;
  get(id: unknown): DurableObjectStub;
}
declare const WebSocketPair: { new (): { 0: HibernatableWebSocket; 1: HibernatableWebSocket } };
declare const WebSocketRequestResponsePair: { new (request: string, response: string): unknown };

export interface RelayEnv {
  RELAY: DurableObjectNamespace;
  WXHOOKS_RELAY_TOKEN?: string;
  RELAY_KEEP_SECONDS?: string;
  RELAY_MAX_BYTES?: string;
  RELAY_MAX_BODY?: string;
  RELAY_MAX_INFLIGHT?: string;
  RELAY_MAX_CHANNELS?: string;
}

/** A whole number from a variable, or the default when it is not set; a variable set to anything else stops the relay with why. */
function setting(env: RelayEnv, name: 'RELAY_KEEP_SECONDS' | 'RELAY_MAX_BYTES' | 'RELAY_MAX_BODY' | 'RELAY_MAX_INFLIGHT' | 'RELAY_MAX_CHANNELS', fallback: number): number {
  const text = env[name];
  if (text === undefined || text === '') return fallback;
  if (!/^\d+$/.test(text) || Number(text) <= 0) throw new Error(`${name} must be a whole number above 0, not "${text}"`);
  return Number(text);
}

const log = (event: RelayEvent) => console.log(JSON.stringify(event));

function respond(a: Answer): Response {
  return new Response(a.body, { status: a.status, headers: { 'content-type': 'application/json', 'cache-control': 'no-store', ...a.headers } });
}

function relayRequest(request: Request, url: URL): RelayRequest {
  return {
    method: request.method,
    path: url.pathname,
    query: url.search.slice(1),
    headers: request.headers,
    headerList: () => [...(request.headers as unknown as Iterable<[string, string]>)],
    length: request.headers.get('content-length'),
    stream: (sink) => webBody.stream(request, sink),
  };
}

export default {
  /** The Worker: what needs no storage is answered here; the rest goes to the one Durable Object. */
  async fetch(request: Request, env: RelayEnv): Promise<Response> {
    const url = new URL(request.url);
    const path = url.pathname;
    const r = route(request.method, path, url.search.slice(1));
    const early =
      r.to === 'answer'
        ? r.answer
        : r.to === 'inbound'
          ? checkHeaders(request.headers, Date.now(), DEFAULTS.toleranceSeconds, setting(env, 'RELAY_MAX_BODY', DEFAULTS.maxBodyBytes), declaredLength(request.headers.get('content-length')))
          : r.to === 'connect' || r.to === 'status' || r.to === 'channel'
            ? await authorizeChannel(request.headers, env.WXHOOKS_RELAY_TOKEN)
            : undefined;
    if (early) {
      log({ time: isoMillis(Date.now()), outcome: early.outcome, status: early.status, method: request.method, path, message: said(early) });
      return respond(early);
    }
    return env.RELAY.get(env.RELAY.idFromName('relay')).fetch(request);
  },
};

/** The Durable Object: every channel, its deliveries, and the connections of `listen`. */
export class RelayObject {
  private readonly relay: Relay;
  private readonly sockets = new WeakMap<HibernatableWebSocket, RelaySocket>();

  constructor(
    private readonly ctx: DurableObjectState,
    env: RelayEnv,
  ) {
    this.relay = new Relay(
      {
        storage: new DurableObjectRelayStorage(ctx.storage),
        token: env.WXHOOKS_RELAY_TOKEN,
        keepMs: setting(env, 'RELAY_KEEP_SECONDS', DEFAULTS.relayKeepMs / 1000) * 1000,
        maxBytes: setting(env, 'RELAY_MAX_BYTES', DEFAULTS.relayMaxBytes),
        maxBody: setting(env, 'RELAY_MAX_BODY', DEFAULTS.maxBodyBytes),
        maxInflight: setting(env, 'RELAY_MAX_INFLIGHT', DEFAULTS.relayMaxInflightBytes),
        maxChannels: setting(env, 'RELAY_MAX_CHANNELS', DEFAULTS.relayMaxChannels),
        onEvent: log,
      },
      { sockets: (channel) => ctx.getWebSockets(channel).map((ws) => this.wrap(ws)) },
    );
    // a keep-alive is answered by the runtime, without waking the object
    ctx.setWebSocketAutoResponse(new WebSocketRequestResponsePair(PING, PONG));
    void ctx.blockConcurrencyWhile(async () => {
      await this.relay.load();
      if ((await ctx.storage.getAlarm()) === null) await ctx.storage.setAlarm(Date.now() + DEFAULTS.relayWorkerSweepIntervalMs);
    });
  }

  /** The relay's view of a socket: its session is kept in the socket's attachment, which survives hibernation. */
  private wrap(ws: HibernatableWebSocket): RelaySocket {
    let s = this.sockets.get(ws);
    if (!s) {
      s = {
        send: (data) => ws.send(data),
        close: (code, reason) => ws.close(code, reason),
        session: () => (ws.deserializeAttachment() as Session | null) ?? undefined,
        setSession: (session) => ws.serializeAttachment(session),
        heardAt: () => this.ctx.getWebSocketAutoResponseTimestamp?.(ws)?.getTime(),
      };
      this.sockets.set(ws, s);
    }
    return s;
  }

  async fetch(request: Request): Promise<Response> {
    const url = new URL(request.url);
    if (route(request.method, url.pathname).to === 'connect') {
      const taken = await this.relay.accept({ method: request.method, path: url.pathname, headers: request.headers, webSocket: request.headers.get('upgrade')?.toLowerCase() === 'websocket' });
      if ('answer' in taken) return respond(taken.answer);
      const pair = new WebSocketPair();
      this.ctx.acceptWebSocket(pair[1], [taken.channel]);
      this.relay.connected(this.wrap(pair[1]), taken.channel, taken.role);
      return new Response(null, { status: 101, webSocket: pair[0] } as ResponseInit);
    }
    return respond(await this.relay.http(relayRequest(request, url)));
  }

  async webSocketMessage(ws: HibernatableWebSocket, message: string | ArrayBuffer): Promise<void> {
    try {
      await this.relay.message(this.wrap(ws), typeof message === 'string' ? message : new Uint8Array(message));
    } catch {
      ws.close(CLOSE.internal, 'the relay failed');
    }
  }

  async webSocketClose(ws: HibernatableWebSocket, code: number): Promise<void> {
    await this.relay.closed(this.wrap(ws));
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, 'closed');
    } catch {
      // already closed on this side
    }
  }

  async webSocketError(ws: HibernatableWebSocket): Promise<void> {
    await this.relay.closed(this.wrap(ws));
  }

  async alarm(): Promise<void> {
    await this.relay.sweep();
    await this.ctx.storage.setAlarm(Date.now() + DEFAULTS.relayWorkerSweepIntervalMs);
  }
}
