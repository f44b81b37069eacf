import * as DEFAULTS from '../delivery/defaults.js';
import type { HeaderSource } from '../signing/rules.js';
import { answers, said, type Answer } from './answers.js';
import { anyKeyMatches, bearer, channelKey, keysOf } from './channel-key.js';
import { isToken, route } from './edge.js';
import { CLOSE, MAX_WINDOW, PING, PONG, PROTOCOL_VERSION, STALE_HEARTBEATS, deliveryFrames, parseClientMessage, type ClientMessage, type RelayMessage, type RetiredSecret } from './protocol.js';
import { liveChannel, type LiveChannel, type RelaySocket, type RelayState, type Session } from './state.js';
import type { ChannelRecord, StoredDelivery } from './storage.js';

/**
 * The connections of `listen` (`GET /connect/<channel>`, a WebSocket): each channel has at most one open
 * connection (a second listen is refused while the first is heard from); it gets what is waiting, in
 * order, within its window; a delivery is deleted when that connection acknowledges it, and kept apart
 * when it refuses it. What a connection leaves unanswered is sent again on the next one.
 */

/** How long a channel's connection may stay silent before another listen may take the channel. */
const STALE_MS = STALE_HEARTBEATS * DEFAULTS.relayHeartbeatMs;

/** Who a request for one channel is: the operator (the relay token), a holder of the channel's keys, or what to answer. */
export async function roleOf(state: RelayState, headers: HeaderSource, channel: string): Promise<Session['role'] | Answer> {
  const { token } = state.settings;
  if (!token) return answers.tokenUnset();
  const given = bearer(headers);
  if (!given) return answers.noToken();
  const keys = keysOf(given);
  if (!keys) return (await isToken(given, token)) ? 'operator' : answers.wrongToken();
  return anyKeyMatches(keys, await keysFor(state, channel)) ? 'channel' : answers.wrongKey();
}

/** A channel's keys, one per secret; for a name that is no channel's, the key of a secret no one has (the same work, and no match). */
async function keysFor(state: RelayState, channel: string): Promise<string[]> {
  const ch = state.channels.get(channel);
  if (!ch) return [await channelKey(`decoy-${state.now()}-${Math.random()}`, channel)];
  ch.keys ??= Promise.all(ch.record.secrets.map((s) => channelKey(s, channel)));
  return ch.keys;
}

/**
 * Whether to take a WebSocket on this request (`GET /connect/<channel>` with the relay token or the
 * channel's keys): the channel and who it is, or what to answer instead.
 */
export async function accept(
  state: RelayState,
  request: { method: string; path: string; headers: HeaderSource; webSocket: boolean },
): Promise<{ channel: string; role: Session['role'] } | { answer: Answer }> {
  const r = route(request.method, request.path);
  let a: Answer;
  if (r.to === 'answer') a = r.answer;
  else if (r.to !== 'connect') a = answers.notFound();
  else if (!request.webSocket) a = answers.notWebSocket();
  else {
    const role = await roleOf(state, request.headers, r.channel);
    if (typeof role === 'string') return { channel: r.channel, role };
    a = role;
  }
  state.emit({ outcome: a.outcome, status: a.status, method: request.method, path: request.path, message: said(a) });
  return { answer: a };
}

/** A WebSocket the host took on /connect/<channel> (`accept` said so). */
export function connected(state: RelayState, socket: RelaySocket, channel: string, role: Session['role']): void {
  socket.setSession({ channel, role, heardAt: state.now(), opened: false, lastSent: 0, inflight: [], window: DEFAULTS.relayWindow, windowBytes: DEFAULTS.relayWindowBytes });
}

/** A message on a WebSocket. */
export async function message(state: RelayState, socket: RelaySocket, data: string | Uint8Array): Promise<void> {
  const s = socket.session();
  if (!s) return;
  if (data === PING) {
    socket.setSession({ ...s, heardAt: state.now() });
    return socket.send(PONG);
  }
  const m = typeof data === 'string' ? parseClientMessage(data) : undefined;
  if (!m) return refuse(state, socket, 'protocol', 'that message is not one this relay understands');
  if (m.type === 'open') return open(state, socket, s, m);
  const ch = state.channels.get(s.channel);
  if (!s.opened || !ch) return refuse(state, socket, 'protocol', 'the channel is not open on this connection: send open first');
  if (m.type === 'ack') return state.enqueue(ch, () => ack(state, ch, socket, m.seqs));
  if (m.type === 'refuse') return state.enqueue(ch, () => refused(state, ch, socket, m));
  return state.enqueue(ch, () => remove(state, ch, socket));
}

/** A WebSocket closed (by either side, or cut): what it had not acknowledged is sent again on the next connection. */
export async function closed(state: RelayState, socket: RelaySocket): Promise<void> {
  const s = socket.session();
  if (!s?.opened) return;
  socket.setSession({ ...s, opened: false });
  state.emit({ event: 'disconnected', channel: s.channel, unacknowledged: s.inflight.length });
  // when it was last used is kept in memory: a connection writes nothing (sweep.ts writes it now and then)
  const ch = state.channels.get(s.channel);
  if (ch) ch.record.lastSeenAt = state.now();
}

/** Sends what the channel's open connection has room for, in order. A connection the storage fails for is closed: the next one gets it all again. */
export async function pump(state: RelayState, ch: LiveChannel): Promise<void> {
  for (const socket of state.directory.sockets(ch.record.name)) {
    const s = socket.session();
    if (!s?.opened || s.inflight.length >= s.window) continue;
    const inflightBytes = s.inflight.reduce((n, [, size]) => n + size, 0);
    const room = s.windowBytes - inflightBytes;
    if (s.inflight.length && room <= 0) continue;
    let next: StoredDelivery[];
    try {
      next = await state.storage.read(ch.record.name, s.lastSent, s.window - s.inflight.length, Math.max(room, 1));
    } catch (err) {
      state.emit({ event: 'refused', channel: ch.record.name, message: `the deliveries could not be read: ${(err as Error).message}` });
      socket.setSession({ ...s, opened: false });
      socket.close(CLOSE.internal, 'the relay could not read its storage');
      continue;
    }
    if (s.inflight.length && next[0] && next[0].size > room) continue;
    for (const d of next) {
      for (const frame of deliveryFrames(d)) socket.send(frame);
      s.inflight.push([d.seq, d.size]);
      s.lastSent = d.seq;
    }
    socket.setSession(s);
  }
}

function refuse(state: RelayState, socket: RelaySocket, code: keyof typeof CLOSE, text: string): void {
  const s = socket.session();
  state.emit({ event: 'refused', channel: s?.channel, message: text });
  send(socket, { type: 'error', code, message: text });
  if (s) socket.setSession({ ...s, opened: false });
  socket.close(CLOSE[code], text);
}

const sameList = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((x, i) => x === b[i]);

/** The secrets of a channel replaced lately (within the grace period), as its listen is told of them. */
export function retiredOf(record: ChannelRecord, now: number): RetiredSecret[] {
  return (record.retired ?? []).filter((r) => now - r.at < DEFAULTS.relaySecretGraceMs).map((r) => ({ secret: r.secret, before: r.at }));
}

async function open(state: RelayState, socket: RelaySocket, s: Session, m: Extract<ClientMessage, { type: 'open' }>): Promise<void> {
  if (m.protocol !== PROTOCOL_VERSION) return refuse(state, socket, 'protocol', `this relay speaks protocol ${PROTOCOL_VERSION}, not ${m.protocol}: use a wxhooks of the same version as the relay`);
  if (s.opened) return refuse(state, socket, 'protocol', 'the channel is already open on this connection');
  const now = state.now();
  let ch = state.channels.get(s.channel);
  let created = false;
  if (!ch) {
    // only the operator reaches a channel there is not (a key of it matches nothing): only it creates one
    if (!m.secrets || s.role !== 'operator') return refuse(state, socket, 'unknownChannel', `no channel "${s.channel}" on this relay: give the webhook's secret to create it`);
    if (state.channels.size >= state.settings.maxChannels)
      return refuse(state, socket, 'tooManyChannels', `this relay keeps ${state.settings.maxChannels} channels, as many as it may (--max-channels): it creates no more`);
    const record: ChannelRecord = { name: s.channel, secrets: m.secrets, temporary: Boolean(m.temporary), createdAt: now, lastSeenAt: now, nextSeq: 1 };
    ch = liveChannel(record);
    state.channels.set(s.channel, ch);
    created = true;
  }
  const live = ch;
  await state.enqueue(live, async () => {
    const r = live.record;
    // a second listen is refused while the one on the channel is heard from; the same client's new
    // connection (it lost the old one) and a newcomer after a long silence take over
    for (const other of state.directory.sockets(r.name)) {
      const o = other.session();
      if (other === socket || !o?.opened || o.client === m.session) continue;
      const silent = now - state.heardAt(other);
      if (silent <= STALE_MS) {
        state.emit({ event: 'taken', channel: r.name, message: 'a second listen was refused: another holds the channel' });
        return refuse(state, socket, 'taken', `another listen holds channel ${r.name} (heard from ${Math.round(silent / 1000)} s ago); it is let go once silent for ${Math.round(STALE_MS / 1000)} s`);
      }
    }
    const changed: ChannelRecord = {
      ...r,
      ...(m.secrets && !sameList(m.secrets, r.secrets)
        ? {
            secrets: m.secrets,
            // those replaced verify, at listen, what came before now, for the grace period
            retired: [...(r.retired ?? []).filter((x) => now - x.at < DEFAULTS.relaySecretGraceMs), ...r.secrets.filter((x) => !m.secrets!.includes(x)).map((secret) => ({ secret, at: now }))],
          }
        : {}),
      ...(m.temporary !== undefined ? { temporary: m.temporary } : {}),
      ...(m.tolerance !== undefined ? { tolerance: m.tolerance } : {}),
      ...(m.scheme !== undefined ? { scheme: m.scheme } : {}),
    };
    const write = created || changed.secrets !== r.secrets || changed.temporary !== r.temporary || changed.tolerance !== r.tolerance || changed.scheme !== r.scheme;
    if (write) {
      // opening a channel as it is writes nothing (a full disk still lets its backlog drain); a change is written before it counts
      try {
        await state.storage.saveChannel({ ...changed, lastSeenAt: now });
      } catch (err) {
        if (created) state.channels.delete(r.name);
        state.emit({ event: 'refused', channel: r.name, message: `the channel could not be stored: ${(err as Error).message}` });
        send(socket, { type: 'error', code: 'internal', message: 'the relay could not store the channel; try again later' });
        return socket.close(CLOSE.internal, 'storage failed');
      }
      live.seenWritten = now;
      if (changed.secrets !== r.secrets) {
        live.verifier = undefined;
        live.keys = undefined;
        if (!created) state.emit({ event: 'secrets_replaced', channel: r.name });
      }
      live.record = changed;
      if (!created && changed.tolerance !== r.tolerance) live.verifier = undefined;
      if (!created && changed.scheme !== r.scheme) live.verifier = undefined;
    }
    live.record.lastSeenAt = now;
    if (created) state.emit({ event: 'channel_created', channel: r.name });
    for (const other of state.directory.sockets(r.name)) {
      const o = other.session();
      if (other === socket || !o?.opened) continue;
      other.setSession({ ...o, opened: false });
      send(other, { type: 'error', code: 'replaced', message: 'a newer connection opened this channel' });
      other.close(CLOSE.replaced, 'a newer connection opened this channel');
      state.emit({ event: 'replaced', channel: r.name, unacknowledged: o.inflight.length });
    }
    const session: Session = {
      ...s,
      client: m.session,
      heardAt: now,
      opened: true,
      lastSent: 0,
      inflight: [],
      window: Math.min(m.window ?? DEFAULTS.relayWindow, MAX_WINDOW),
      windowBytes: Math.min(m.windowBytes ?? DEFAULTS.relayWindowBytes, state.settings.maxWindowBytes),
    };
    socket.setSession(session);
    const usage = (await state.storage.usage()).get(r.name) ?? { queued: 0, refused: 0, bytes: 0 };
    send(socket, {
      type: 'ready',
      channel: r.name,
      created,
      temporary: live.record.temporary,
      queued: usage.queued,
      bytes: usage.bytes,
      refused: usage.refused,
      retired: retiredOf(live.record, now),
      window: session.window,
      windowBytes: session.windowBytes,
    });
    state.emit({ event: 'connected', channel: r.name, queued: usage.queued });
    await pump(state, live);
  });
}

// An acknowledgement or a refusal that came just before its connection closed is still taken: the
// connection's session is kept with the socket, and it says what was handed over on it.
async function ack(state: RelayState, ch: LiveChannel, socket: RelaySocket, seqs: number[]): Promise<void> {
  const s = socket.session();
  if (!s) return;
  const sent = new Set(s.inflight.map(([seq]) => seq));
  const acked = new Set(seqs.filter((seq) => sent.has(seq)));
  socket.setSession({ ...s, heardAt: state.now() });
  if (!acked.size) return;
  state.freed(await state.storage.remove(ch.record.name, [...acked]));
  const now = socket.session() ?? s;
  socket.setSession({ ...now, heardAt: state.now(), inflight: now.inflight.filter(([seq]) => !acked.has(seq)) });
  await pump(state, ch);
}

/** A delivery its listen could not verify: kept apart, with why, until someone drops it. */
async function refused(state: RelayState, ch: LiveChannel, socket: RelaySocket, m: Extract<ClientMessage, { type: 'refuse' }>): Promise<void> {
  const s = socket.session();
  if (!s?.inflight.some(([seq]) => seq === m.seq)) return;
  let more: number | undefined;
  try {
    more = await state.storage.refuse(ch.record.name, m.seq, { at: state.now(), reason: m.reason, message: m.message });
  } catch (err) {
    // not kept apart: it stays in flight, and the next connection is handed it again
    state.emit({ event: 'refused', channel: ch.record.name, seq: m.seq, message: `a refused delivery could not be kept apart: ${(err as Error).message}` });
    return;
  }
  state.used += more ?? 0;
  const now = socket.session() ?? s;
  socket.setSession({ ...now, heardAt: state.now(), inflight: now.inflight.filter(([seq]) => seq !== m.seq) });
  state.emit({ event: 'delivery_refused', channel: ch.record.name, seq: m.seq, reason: m.reason, message: m.message });
  await pump(state, ch);
}

/** The end of a temporary channel's session: it goes with what waits in it; what was refused stays, with it, until dropped. */
async function remove(state: RelayState, ch: LiveChannel, socket: RelaySocket): Promise<void> {
  const name = ch.record.name;
  const usage = (await state.storage.usage()).get(name);
  const kept = usage?.refused ?? 0;
  const removed = kept ? await state.storage.clear(name) : await state.storage.deleteChannel(name);
  state.freed(removed);
  if (!kept) state.channels.delete(name);
  state.emit({ event: 'channel_deleted', channel: name, deliveries: removed.length, ...(kept ? { message: `${kept} refused kept until dropped` } : {}) });
  const s = socket.session();
  if (s) socket.setSession({ ...s, opened: false });
  send(socket, { type: 'deleted', channel: name, kept });
  socket.close(CLOSE.deleted, 'channel deleted');
}

function send(socket: RelaySocket, m: RelayMessage): void {
  try {
    socket.send(JSON.stringify(m));
  } catch {
    // the connection is already gone: what it had not acknowledged is sent again on the next one
  }
}
