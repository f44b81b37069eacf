/**
 * The relay's wire protocol, shared by the relay (src/relay/relay.ts, in either host) and its client
 * (src/relay/client.ts): runtime-neutral, no Node module.
 *
 * One WebSocket per channel, opened by `listen` to `/connect/<channel>` with `Authorization: Bearer`
 * and either the relay token (the operator's: every channel) or the channel's keys (channel-key.ts:
 * derived from the webhook's secret, that channel only). The client speaks first: `open` (who it is,
 * the secrets and tolerance it verifies with, its window). The relay answers `ready`, then sends each
 * stored delivery, backlog first, in arrival order, as binary frames; the client answers `ack` with
 * the sequence numbers it has handled, and only then does the relay delete them, or `refuse` with
 * those it cannot verify, which the relay then keeps apart, with the reason, until someone drops them.
 * What was sent and neither acknowledged nor refused when a connection ends is sent again on the next.
 */

export const PROTOCOL_VERSION = 2;

/** The inbound path of a channel (what the webhook's URL ends with), and the client's. */
export const INBOUND_PREFIX = '/in/';
export const CONNECT_PREFIX = '/connect/';
export const STATUS_PATH = '/status';
/** One channel's own API (its status, its refused deliveries): the relay token, or the channel's keys. */
export const CHANNELS_PREFIX = '/channels/';
export const HEALTH_PATH = '/health';

/** A channel's name: what goes in the inbound URL. */
export const CHANNEL_NAME: RegExp = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$/;

/**
 * At most this many deliveries are sent and not yet acknowledged on a connection (a client may ask for
 * fewer; DEFAULTS.relayWindow unless it asks): the relay keeps their sequence numbers and sizes with the
 * socket, and a Durable Object keeps that in the socket's attachment (2 KiB at most) so that it survives
 * hibernation.
 */
export const MAX_WINDOW = 64;
/**
 * The body bytes in one frame: a larger delivery is sent in several. Cloudflare closes a WebSocket whose
 * message is over 1 MiB (1009), and a smaller frame lets the window move sooner.
 */
export const FRAME_BODY: number = 512 * 1024;
/** The largest delivery a client assembles from frames (the relay's own limit, --max-body, is below it). */
export const MAX_DELIVERY: number = 256 * 1024 * 1024;
/** Client messages are small (an ack, an open): a larger one closes the connection. */
export const MAX_CLIENT_MESSAGE: number = 64 * 1024;

/**
 * A channel's connection is let go of when nothing came from it for this many of the client's
 * keep-alives (DEFAULTS.relayHeartbeatMs): another listen may then take the channel.
 */
export const STALE_HEARTBEATS = 2.5;

/** A client's name for itself: the same across its reconnections, so that its own new connection takes over its old one. */
export const SESSION_NAME: RegExp = /^[A-Za-z0-9_-]{8,64}$/;

/** The text a client sends to keep the connection alive, and the answer (a Durable Object answers it without waking). */
export const PING = 'ping';
export const PONG = 'pong';

/** WebSocket close codes (4000-4999 are the application's). */
export const CLOSE = {
  /** The server is stopping (or restarting): connect again. */
  goingAway: 1001,
  /** Something failed in the relay: connect again. */
  internal: 1011,
  /** A newer connection of the same client (or one taking over from a connection gone silent) opened this channel: this one is done. */
  replaced: 4000,
  /** Another listen holds this channel (it was heard from lately): this one is refused, and stops. */
  taken: 4009,
  /** The relay keeps as many channels as it may (`--max-channels`): none is created. */
  tooManyChannels: 4029,
  /** The channel was deleted, as this client asked. */
  deleted: 4001,
  /** A message the relay did not understand. */
  protocol: 4400,
  /** The channel does not exist and no secret was given to create it. */
  unknownChannel: 4404,
} as const;

/** Client → relay. */
export type ClientMessage =
  | {
      type: 'open';
      protocol: number;
      /** The client's own name (SESSION_NAME), the same across its reconnections. */
      session: string;
      /**
       * Every secret the client verifies with (several during a rotation). Required to create the channel;
       * when they differ from those kept, they replace them (the connection proved one of those kept, or
       * is the operator's), and the ones replaced verify what came before, for DEFAULTS.relaySecretGraceMs.
       */
      secrets?: string[];
      /** The client's tolerance, in seconds: the relay answers 2xx only for what it will verify too. */
      tolerance?: number;
      /** The layout the client verifies with (`auto` or one row's name). */
      scheme?: string;
      /** A channel for one `listen` session (its temporary webhook): deleted when that `listen` says so. */
      temporary?: boolean;
      /** At most this many deliveries (and body bytes) sent and not acknowledged. */
      window?: number;
      windowBytes?: number;
    }
  | { type: 'ack'; seqs: number[] }
  /** A delivery the client could not verify: kept apart with why, out of the queue, until dropped. */
  | { type: 'refuse'; seq: number; reason: string; message: string }
  /** Deletes the channel and what waits in it (a temporary channel, at the end of its session); refused deliveries stay, with it. */
  | { type: 'delete' };

/** A secret of the channel replaced lately: it verifies, at the client, what the relay received before `before`. */
export interface RetiredSecret {
  secret: string;
  before: number;
}

/** Relay → client (text frames; deliveries come as binary frames). */
export type RelayMessage =
  | {
      type: 'ready';
      channel: string;
      /** The channel was created by this open (else it existed). */
      created: boolean;
      temporary: boolean;
      /** What is waiting, sent next. */
      queued: number;
      bytes: number;
      /** Deliveries refused before (by a listen that could not verify them), kept apart until dropped. */
      refused: number;
      /** Secrets of the channel replaced within the grace period: what came before each may be signed with it. */
      retired: RetiredSecret[];
      window: number;
      windowBytes: number;
    }
  | { type: 'deleted'; channel: string; kept: number }
  | { type: 'error'; code: keyof typeof CLOSE | 'bad_request'; message: string };

/** The first frame of a delivery carries its headers; each frame carries its seq and the offset of its bytes. */
export interface FrameMeta {
  seq: number;
  offset: number;
  /** First frame only: the body's whole length, when it was received (ms since the epoch), and its headers as received. */
  size?: number;
  receivedAt?: number;
  headers?: [string, string][];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** One delivery as frames: [4-byte big-endian length of the meta][meta, JSON][body bytes from offset]. */
export function deliveryFrames(d: { seq: number; receivedAt: number; headers: [string, string][]; body: Uint8Array }): Uint8Array[] {
  const frames: Uint8Array[] = [];
  for (let offset = 0; offset === 0 || offset < d.body.length; offset += FRAME_BODY) {
    const meta: FrameMeta = offset === 0 ? { seq: d.seq, offset, size: d.body.length, receivedAt: d.receivedAt, headers: d.headers } : { seq: d.seq, offset };
    const m = encoder.encode(JSON.stringify(meta));
    const part = d.body.subarray(offset, offset + FRAME_BODY);
    const frame = new Uint8Array(4 + m.length + part.length);
    new DataView(frame.buffer).setUint32(0, m.length);
    frame.set(m, 4);
    frame.set(part, 4 + m.length);
    frames.push(frame);
  }
  return frames;
}

/** A frame read back: its meta and its bytes (a view, not a copy), or undefined when it is not one. */
export function readFrame(frame: Uint8Array): { meta: FrameMeta; bytes: Uint8Array } | undefined {
  if (frame.length < 4) return undefined;
  const length = new DataView(frame.buffer, frame.byteOffset, frame.byteLength).getUint32(0);
  if (4 + length > frame.length) return undefined;
  try {
    const meta = JSON.parse(decoder.decode(frame.subarray(4, 4 + length))) as FrameMeta;
    if (!Number.isSafeInteger(meta.seq) || !Number.isSafeInteger(meta.offset)) return undefined;
    return { meta, bytes: frame.subarray(4 + length) };
  } catch {
    return undefined;
  }
}

/** A client message, or undefined when the text is not one. */
export function parseClientMessage(text: string): ClientMessage | undefined {
  let m: unknown;
  try {
    m = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof m !== 'object' || m === null) return undefined;
  const o = m as Record<string, unknown>;
  const count = (v: unknown) => v === undefined || (Number.isSafeInteger(v) && (v as number) > 0);
  const isText = (v: unknown, most: number) => typeof v === 'string' && v.length > 0 && v.length <= most;
  switch (o.type) {
    case 'open':
      if (!Number.isSafeInteger(o.protocol) || !count(o.window) || !count(o.windowBytes) || (o.temporary !== undefined && typeof o.temporary !== 'boolean')) return undefined;
      if (o.protocol !== PROTOCOL_VERSION) return o as ClientMessage; // answered with which protocol the relay speaks
      if (typeof o.session !== 'string' || !SESSION_NAME.test(o.session)) return undefined;
      if (o.tolerance !== undefined && (!Number.isSafeInteger(o.tolerance) || (o.tolerance as number) < 1)) return undefined;
      if (o.scheme !== undefined && !isText(o.scheme, 32)) return undefined;
      if (o.secrets !== undefined && (!Array.isArray(o.secrets) || !o.secrets.length || o.secrets.length > 4 || o.secrets.some((s) => !isText(s, 1024)))) return undefined;
      return o as ClientMessage;
    case 'ack':
      if (!Array.isArray(o.seqs) || o.seqs.length > 4 * MAX_WINDOW || o.seqs.some((s) => !Number.isSafeInteger(s))) return undefined;
      return o as ClientMessage;
    case 'refuse':
      if (!Number.isSafeInteger(o.seq) || !isText(o.reason, 64) || !isText(o.message, 2048)) return undefined;
      return { type: 'refuse', seq: o.seq as number, reason: o.reason as string, message: o.message as string };
    case 'delete':
      return { type: 'delete' };
    default:
      return undefined;
  }
}
