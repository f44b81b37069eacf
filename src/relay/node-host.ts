import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import * as DEFAULTS from '../delivery/defaults.js';
import { BODY_READS } from '../delivery/defaults.js';
import { systemClock, type Clock } from '../util/clock.js';
import { listenOn } from '../util/net.js';
import { nodeBody } from '../util/read-body.js';
import { answers, type Answer } from './answers.js';
import { CLOSE, MAX_CLIENT_MESSAGE } from './protocol.js';
import { Relay, type RelayEvent, type RelayOptions, type RelayRequest, type RelaySocket, type Session } from './relay.js';

/**
 * The relay's Node host (`wxhooks relay serve`): node:http for deliveries and the status, `ws` for the
 * connections of `listen`. It turns each into a call of the relay's logic (relay.ts) and writes back
 * what that returns; the rules are all there.
 */

export interface RelayServerOptions extends Omit<RelayOptions, 'now' | 'onEvent'> {
  host: string;
  port: number;
  clock?: Clock;
  onEvent?: (event: RelayEvent) => void;
  /** Headers must arrive within this, the whole request within BODY_READS times it (as `listen`'s --read-timeout). */
  readTimeoutMs?: number;
  /** OpenTelemetry (src/observe/relay.ts): each request answered in a span of its own. */
  traced?: (path: string, answer: () => Promise<Answer>) => Promise<Answer>;
}

export interface RunningRelay {
  url: string;
  port: number;
  /** Closes every connection (1001: `listen` connects again) and stops; the storage is the caller's to close. */
  close(): Promise<void>;
  /** What each channel holds now, and the bytes being read (`/metrics`). */
  backlog: Relay['backlog'];
}

/** A ws connection, as the relay's logic sees it. */
class NodeSocket implements RelaySocket {
  private state: Session | undefined;
  constructor(readonly ws: WebSocket) {}
  send(data: string | Uint8Array): void {
    this.ws.send(data);
  }
  close(code: number, reason: string): void {
    this.ws.close(code, reason);
  }
  session(): Session | undefined {
    return this.state;
  }
  setSession(session: Session): void {
    this.state = session;
  }
}

/** A request as the logic reads it: every value of a header (Webhook-Signature's joined with spaces), the raw headers in order, the body as node:http gives it. */
function relayRequest(req: IncomingMessage, path: string, query: string): RelayRequest {
  return {
    method: req.method ?? 'GET',
    path,
    query,
    headers: req.headersDistinct,
    headerList: () => {
      const out: [string, string][] = [];
      for (let i = 0; i + 1 < req.rawHeaders.length; i += 2) out.push([req.rawHeaders[i]!, req.rawHeaders[i + 1]!]);
      return out;
    },
    length: req.headers['content-length'],
    stream: (sink) => nodeBody.stream(req, sink),
  };
}

function write(res: ServerResponse, a: Answer): void {
  res.writeHead(a.status, { 'content-type': 'application/json', 'cache-control': 'no-store', ...a.headers, ...(a.close ? { connection: 'close' } : {}) });
  res.end(a.body);
}

/** An answer written on a socket that asked for an upgrade, then closed. */
function refuseUpgrade(socket: Duplex, a: Answer): void {
  const headers = { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(a.body)), connection: 'close', ...a.headers };
  socket.end(
    `HTTP/1.1 ${a.status} ${a.status === 401 ? 'Unauthorized' : 'Refused'}\r\n${Object.entries(headers)
      .map(([k, v]) => `${k}: ${v}`)
      .join('\r\n')}\r\n\r\n${a.body}`,
  );
}

export async function startRelayServer(options: RelayServerOptions): Promise<RunningRelay> {
  const clock = options.clock ?? systemClock;
  const byChannel = new Map<string, Set<NodeSocket>>();
  const relay = new Relay({ ...options, now: () => clock.now() }, { sockets: (channel) => [...(byChannel.get(channel) ?? [])] });
  await relay.load();

  const readTimeout = options.readTimeoutMs ?? DEFAULTS.readTimeoutMs;
  // Node looks for connections past their time every connectionsCheckingInterval (30 s unless told): a
  // sender trickling its headers was cut at 13-45 s with a 10 s --read-timeout
  const server = createServer({ connectionsCheckingInterval: Math.min(1000, readTimeout), headersTimeout: readTimeout, requestTimeout: BODY_READS * readTimeout });
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_CLIENT_MESSAGE });
  const working = new Set<Promise<void>>();

  server.on('request', (req, res) => {
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const answer = () => relay.http(relayRequest(req, path, query === -1 ? '' : url.slice(query + 1)));
    const task = (options.traced ? options.traced(path, answer) : answer()).then(
      (a) => write(res, a),
      () => write(res, answers.internal()),
    );
    working.add(task);
    void task.finally(() => working.delete(task));
  });

  server.on('upgrade', (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    socket.on('error', () => undefined);
    const url = req.url ?? '/';
    const query = url.indexOf('?');
    const path = query === -1 ? url : url.slice(0, query);
    const webSocket = (req.headers.upgrade ?? '').toLowerCase() === 'websocket';
    void relay.accept({ method: req.method ?? 'GET', path, headers: req.headersDistinct, webSocket }).then((taken) => {
      if ('answer' in taken) return refuseUpgrade(socket, taken.answer);
      const { channel, role } = taken;
      wss.handleUpgrade(req, socket, head, (ws) => {
        const s = new NodeSocket(ws);
        let set = byChannel.get(channel);
        if (!set) byChannel.set(channel, (set = new Set()));
        set.add(s);
        relay.connected(s, channel, role);
        ws.on('message', (data: Buffer, isBinary) => {
          relay.message(s, isBinary ? data : data.toString('utf8')).catch(() => ws.close(CLOSE.internal, 'the relay failed'));
        });
        ws.on('error', () => undefined);
        ws.on('close', () => {
          set.delete(s);
          if (!set.size && byChannel.get(channel) === set) byChannel.delete(channel);
          void relay.closed(s).catch(() => undefined);
        });
      });
    });
  });

  const { port, url } = await listenOn(server, options.host, options.port);
  let closing = false;
  void (async () => {
    while (!closing) {
      await clock.after(DEFAULTS.relaySweepIntervalMs);
      if (!closing) await relay.sweep().catch(() => undefined);
    }
  })();

  return {
    url,
    port,
    backlog: () => relay.backlog(),
    async close() {
      closing = true;
      for (const set of byChannel.values()) for (const s of set) s.ws.close(CLOSE.goingAway, 'the relay is stopping');
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      server.closeIdleConnections();
      await Promise.all(working);
      for (const set of byChannel.values()) for (const s of set) s.ws.terminate();
      wss.close();
      server.closeAllConnections();
      await closed;
    },
  };
}
