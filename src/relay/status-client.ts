import { AuthError, RefusedError, UnreachableError, UsageError } from '../errors.js';
import { networkReason } from '../util/net.js';
import { CONNECT_PREFIX, INBOUND_PREFIX, STATUS_PATH } from './protocol.js';

/**
 * A relay's addresses, and its HTTP API as a client asks it (`relay status`, `doctor --relay`): never a
 * WebSocket (the connection of `listen` is connection.ts's).
 */

/** The relay's address as given (https://…, or http:// for one on this machine; ws:// and wss:// taken as those), checked. */
export function httpUrl(relay: string): URL {
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
  return withSlash(u);
}

const withSlash = (u: URL) => new URL(u.pathname.endsWith('/') ? u.toString() : `${u.toString()}/`);

/** The URL the service posts a channel's deliveries to: the webhook's URL. */
export function inboundUrl(relay: string, channel: string): string {
  return new URL(INBOUND_PREFIX.slice(1) + channel, httpUrl(relay)).toString();
}

/** The WebSocket URL `listen` opens a channel on. */
export function connectUrl(relay: string, channel: string): string {
  const ws = new URL(CONNECT_PREFIX.slice(1) + channel, httpUrl(relay));
  ws.protocol = ws.protocol === 'https:' ? 'wss:' : 'ws:';
  return ws.toString();
}

/** A name for a temporary channel: not guessable (nobody can post to it without the secret anyway, but nobody should find it either). */
export function newChannelName(prefix = 'tmp'): string {
  const bytes = crypto.getRandomValues(new Uint8Array(10));
  return `${prefix}-${[...bytes].map((b) => b.toString(16).padStart(2, '0')).join('')}`;
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
  const base = httpUrl(relay);
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
