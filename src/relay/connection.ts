import type { ClientRequest, IncomingMessage } from 'node:http';
import type WebSocket from 'ws';
import { AuthError, RefusedError, type WxError } from '../errors.js';
import type { Clock } from '../util/clock.js';
import { networkReason } from '../util/net.js';
import type { RelayedDelivery } from './handover.js';
import { CLOSE, FRAME_BODY, MAX_DELIVERY, PING, readFrame, type ClientMessage, type RelayMessage } from './protocol.js';

/**
 * One connection of the relay client, from connecting to its end: the WebSocket, authenticated by the
 * relay token; `open` sent first; the relay's answers read; deliveries assembled from their frames; a
 * keep-alive sent every heartbeat, and a connection from which nothing came for more than two cut.
 */

/** How one connection ended: whether the channel was open on it, why it ended, and, when it is for good, the error to stop with. */
export interface Ended {
  ready: boolean;
  reason: string;
  fatal?: WxError;
}

export interface ConnectionOptions {
  url: string;
  /** The relay's address as the user gave it, for messages. */
  relay: string;
  /** `Bearer` and the relay token, or the channel's keys. */
  authorization: string;
  /** Whether the channel's keys are what it authenticates with (else the relay token): a refusal says which. */
  withKeys: boolean;
  channel: string;
  /** The first message. */
  open: ClientMessage;
  clock: Clock;
  connectTimeoutMs: number;
  heartbeatMs: number;
  onReady(m: Extract<RelayMessage, { type: 'ready' }>): void;
  onDeleted(): void;
  onDelivery(d: RelayedDelivery): void;
}

/** A delivery whose frames are not all in yet. */
interface Assembling {
  seq: number;
  receivedAt: number;
  headers: [string, string][];
  body: Uint8Array;
  got: number;
}

/** Opens one connection; `ended` resolves when it is over (never rejects). */
export function connect(WebSocketClass: typeof WebSocket, o: ConnectionOptions): { ws: WebSocket; ended: Promise<Ended> } {
  const partial = new Map<number, Assembling>();
  let ready = false;
  let reason = 'the connection was closed';
  let fatal: WxError | undefined;
  /** When the relay was last heard from (the monotonic clock). */
  let heard = o.clock.monotonic();
  let over = false;
  const ws = new WebSocketClass(o.url, {
    headers: { authorization: o.authorization },
    handshakeTimeout: o.connectTimeoutMs,
    maxPayload: FRAME_BODY + 1024 * 1024,
    perMessageDeflate: false,
  });
  const ended = new Promise<Ended>((resolve) => {
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
        fatal = refusal(o, status, said);
        if (!fatal) reason = `it answered ${status}${said ? ` (${said})` : ''}`;
        ws.terminate();
      });
    });
    ws.on('open', () => {
      ws.send(JSON.stringify(o.open));
      heard = o.clock.monotonic();
      void heartbeat();
    });
    ws.on('message', (data: Buffer, isBinary: boolean) => {
      heard = o.clock.monotonic();
      if (isBinary) return frame(data);
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
        o.onReady(m);
      } else if (m.type === 'deleted') {
        o.onDeleted();
      } else if (m.type === 'error') {
        reason = m.message;
        fatal = refusedBy(o.channel, m) ?? fatal;
      }
    });
    ws.on('error', (err) => {
      reason = networkReason(err);
    });
    ws.on('close', (code: number, why: Buffer) => {
      over = true;
      if (!fatal && (code === CLOSE.replaced || code === CLOSE.taken || code === CLOSE.tooManyChannels || code === CLOSE.unknownChannel || code === CLOSE.protocol))
        fatal = new RefusedError(`The relay closed the connection: ${why.toString() || code}.`);
      if (code === CLOSE.goingAway) reason = 'the relay is restarting';
      resolve({ ready, reason, fatal });
    });
  });

  /** Sends a keep-alive every heartbeat; a connection from which nothing came for more than two is cut (and made again). */
  async function heartbeat(): Promise<void> {
    for (;;) {
      await o.clock.after(o.heartbeatMs);
      if (over || ws.readyState !== ws.OPEN) return;
      if (o.clock.monotonic() - heard > 2 * o.heartbeatMs) return ws.terminate();
      ws.send(PING);
    }
  }

  function frame(data: Buffer): void {
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
    o.onDelivery({ channel: o.channel, seq: p.seq, receivedAt: p.receivedAt, headers: p.headers, body: p.body, attempt: 1 });
  }

  return { ws, ended };
}

/** The relay refused the connection itself (before any upgrade): for good (the token, not a relay), or undefined (try again). */
function refusal(o: Pick<ConnectionOptions, 'relay' | 'channel' | 'withKeys'>, status: number, said: string | undefined): WxError | undefined {
  const relay = o.relay;
  if (status === 401 && o.withKeys)
    return new AuthError(`The relay at ${relay} does not know channel ${o.channel} with this webhook's secret.`, {
      status,
      hint: "Either the channel does not exist yet, or the relay keeps another secret for it (the secret was replaced here since). Creating a channel, or giving it a secret the relay cannot check against the one it keeps, needs the relay's own token once: export WXHOOKS_RELAY_TOKEN=… and start listen again.",
    });
  if (status === 401)
    return new AuthError(`The relay at ${relay} refused the relay token: ${said ?? `it answered ${status}`}.`, {
      status,
      hint: "WXHOOKS_RELAY_TOKEN must be the relay's own token: the Worker's secret (wrangler secret put WXHOOKS_RELAY_TOKEN) or the one `wxhooks relay serve` was started with.",
    });
  if (status === 503 && said?.includes('WXHOOKS_RELAY_TOKEN'))
    return new RefusedError(`The relay at ${relay} has no token set, so it takes no connection.`, {
      status,
      hint: 'Set its WXHOOKS_RELAY_TOKEN (wrangler secret put WXHOOKS_RELAY_TOKEN), then try again.',
    });
  if (status >= 400 && status < 500)
    return new RefusedError(`The relay at ${relay} answered ${status}${said ? `: ${said}` : ''}.`, {
      status,
      hint: 'Is this the address of a wxhooks relay? It answers GET /health with {"relay":"wxhooks"}.',
    });
  return undefined;
}

/** An error the relay sent on the connection that ends this client for good, or undefined. */
function refusedBy(channel: string, m: Extract<RelayMessage, { type: 'error' }>): WxError | undefined {
  if (m.code === 'replaced')
    return new RefusedError(`Another listen took the channel ${channel} over at the relay (this one had gone silent), so this one stopped.`, {
      hint: 'Only one `listen` may hold a channel: stop the other one, or give this one another channel.',
    });
  if (m.code === 'taken')
    return new RefusedError(`Another listen holds the channel ${channel} at the relay: ${m.message}.`, {
      hint: 'Only one `listen` may hold a channel: stop the other one first (a listen gone away without a word is let go once silent that long).',
    });
  if (m.code === 'tooManyChannels')
    return new RefusedError(`The relay creates no more channels: ${m.message}.`, {
      hint: "Let unused channels go (`wxhooks relay status` lists them; a temporary one goes when its listen ends), or raise the relay's --max-channels (RELAY_MAX_CHANNELS for the Worker).",
    });
  if (m.code === 'unknownChannel')
    return new RefusedError(`The relay has no channel ${channel}: ${m.message}.`, { hint: "Give the webhook's secret (listen --webhook ID) so that the relay creates it." });
  if (m.code === 'protocol') return new RefusedError(`The relay refused this client: ${m.message}.`);
  return undefined;
}
