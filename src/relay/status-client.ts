import { AuthError, RefusedError, UnreachableError, UsageError } from '../errors.js';
import { networkReason } from '../util/net.js';
import { channelKey } from './channel-key.js';
import { CHANNELS_PREFIX, CONNECT_PREFIX, INBOUND_PREFIX, STATUS_PATH } from './protocol.js';
import type { ChannelStatus, RefusedEntry } from './relay.js';

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
  channels: ChannelStatus[];
  queued: number;
  refused: number;
  bytes: number;
  max_bytes: number;
  max_channels: number;
  keep_seconds: number;
  in_flight: { bytes: number; peak: number; max: number };
}

export type { ChannelStatus, RefusedEntry };

/** How a client reaches a relay's API: the relay token (every channel), or one channel's keys, from the webhook's secrets. */
export type RelayAuth = { token: string } | { secrets: readonly string[] };

async function authorization(auth: RelayAuth, channel: string | undefined): Promise<string> {
  if ('token' in auth) return `Bearer ${auth.token}`;
  if (channel === undefined) throw new UsageError('Only the relay token (WXHOOKS_RELAY_TOKEN) may list every channel.');
  return `Bearer ${(await Promise.all(auth.secrets.map((s) => channelKey(s, channel)))).join(',')}`;
}

/**
 * One request to a relay's API, its JSON answer: the relay unreachable is exit 6, a credential refused
 * exit 3, an answer that is not a relay's exit 5.
 */
async function api<T>(relay: string, auth: RelayAuth, method: string, path: string, timeoutMs: number, channel?: string): Promise<T> {
  const base = httpUrl(relay);
  let res: Response;
  try {
    res = await fetch(new URL(path.slice(1), base), { method, headers: { authorization: await authorization(auth, channel) }, signal: AbortSignal.timeout(timeoutMs) });
  } catch (err) {
    throw new UnreachableError(`Cannot reach the relay at ${base.origin}: ${networkReason((err as { cause?: unknown }).cause ?? err, timeoutMs)}.`, {
      hint: 'Is it running, and is this its address?',
      cause: err,
    });
  }
  const text = await res.text();
  let body: Record<string, unknown> & { error?: string } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // not a relay's answer: said below
  }
  if (res.status === 401) {
    if ('token' in auth) throw new AuthError(`The relay refused the token: ${body.error ?? res.status}.`, { status: 401, hint: "WXHOOKS_RELAY_TOKEN must be the relay's own token." });
    throw new AuthError(`The relay does not know channel ${channel} with this webhook's secret.`, {
      status: 401,
      hint: "Is it the channel of this webhook (its URL at the service names it)? Or was the secret replaced here since the channel was opened? The relay's own token (WXHOOKS_RELAY_TOKEN) reaches every channel.",
    });
  }
  if (!res.ok || typeof body !== 'object' || body === null)
    throw new RefusedError(`The relay at ${base.origin} answered ${res.status}${body.error ? `: ${body.error}` : ''}.`, { status: res.status, hint: 'Is this the address of a wxhooks relay?' });
  return body as T;
}

/**
 * Asks a relay what it holds (`relay status`; `doctor` checks the link with it): every channel, with the
 * relay token.
 */
export async function relayStatus(relay: string, token: string, timeoutMs: number): Promise<RelayStatus> {
  const body = await api<RelayStatus>(relay, { token }, 'GET', STATUS_PATH, timeoutMs);
  if (!Array.isArray(body.channels))
    throw new RefusedError(`The relay at ${httpUrl(relay).origin} answered something else than a relay's status.`, { hint: 'Is this the address of a wxhooks relay?' });
  return body;
}

/** One channel's status: with the relay token, or the channel's keys. */
export function channelStatus(relay: string, auth: RelayAuth, channel: string, timeoutMs: number): Promise<ChannelStatus> {
  return api<ChannelStatus>(relay, auth, 'GET', `${CHANNELS_PREFIX}${channel}`, timeoutMs, channel);
}

/** A channel's refused deliveries (their headers and why, not their bodies). */
export async function refusedAt(relay: string, auth: RelayAuth, channel: string, timeoutMs: number): Promise<RefusedEntry[]> {
  return (await api<{ refused: RefusedEntry[] }>(relay, auth, 'GET', `${CHANNELS_PREFIX}${channel}/refused`, timeoutMs, channel)).refused;
}

/** Drops refused deliveries of a channel: those named, or all. What it dropped, and the seqs named that were not refused deliveries there. */
export function dropRefused(relay: string, auth: RelayAuth, channel: string, which: number[] | 'all', timeoutMs: number): Promise<{ dropped: number[]; not_refused: number[] }> {
  const query = which === 'all' ? 'all=true' : `seq=${which.join(',')}`;
  return api(relay, auth, 'DELETE', `${CHANNELS_PREFIX}${channel}/refused?${query}`, timeoutMs, channel);
}
