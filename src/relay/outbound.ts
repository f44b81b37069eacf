import { DEFAULTS } from '../delivery/defaults.js';
import type { HeaderSource } from '../signing/rules.js';
import { answers, said, type Answer } from './answers.js';
import { authorize, route } from './edge.js';
import { CLOSE, MAX_WINDOW, PING, PONG, PROTOCOL_VERSION, deliveryFrames, parseClientMessage, type ClientMessage, type RelayMessage } from './protocol.js';
import { liveChannel, type LiveChannel, type RelaySocket, type RelayState, type Session } from './state.js';
import type { ChannelRecord, StoredDelivery } from './storage.js';

/**
 * The connections of `listen` (`GET /connect/<channel>`, a WebSocket): each channel has at most one open
 * connection; it gets what is stored, in order, within its window, and a delivery is deleted when that
 * connection acknowledges it. What a connection leaves unacknowledged is sent again on the next one.
 */

/**
 * Whether to take a WebSocket on this request (`GET /connect/<channel>` with the relay token): the
 * channel, or what to answer instead.
 */
export async function accept(state: RelayState, request: { method: string; path: string; headers: HeaderSource; webSocket: boolean }): Promise<{ channel: string } | { answer: Answer }> {
  const r = route(request.method, request.path);
  const refused = r.to === 'answer' ? r.answer : r.to !== 'connect' ? answers.notFound() : !request.webSocket ? answers.notWebSocket() : await authorize(request.headers, state.settings.token);
  if (!refused && r.to === 'connect') return { channel: r.channel };
  const a = refused ?? answers.notFound();
  state.emit({ outcome: a.outcome, status: a.status, method: request.method, path: request.path, message: said(a) });
  return { answer: a };
}

/** A WebSocket the host took on /connect/<channel> (`accept` said so). */
export function connected(socket: RelaySocket, channel: string): void {
  socket.setSession({ channel, opened: false, lastSent: 0, inflight: [], window: DEFAULTS.relayWindow, windowBytes: DEFAULTS.relayWindowBytes });
}

/** A message on a WebSocket. */
export async function message(state: RelayState, socket: RelaySocket, data: string | Uint8Array): Promise<void> {
  const s = socket.session();
  if (!s) return;
  if (data === PING) return socket.send(PONG);
  const m = typeof data === 'string' ? parseClientMessage(data) : undefined;
  if (!m) return refuse(state, socket, 'protocol', 'that message is not one this relay understands');
  if (m.type === 'open') return open(state, socket, s, m);
  const ch = state.channels.get(s.channel);
  if (!s.opened || !ch) return refuse(state, socket, 'protocol', 'the channel is not open on this connection: send open first');
  if (m.type === 'ack') return state.enqueue(ch, () => ack(state, ch, socket, m.seqs));
  return state.enqueue(ch, () => remove(state, ch, socket));
}

/** A WebSocket closed (by either side, or cut): what it had not acknowledged is sent again on the next connection. */
export async function closed(state: RelayState, socket: RelaySocket): Promise<void> {
  const s = socket.session();
  if (!s?.opened) return;
  socket.setSession({ ...s, opened: false });
  const ch = state.channels.get(s.channel);
  state.emit({ event: 'disconnected', channel: s.channel, unacknowledged: s.inflight.length });
  if (!ch) return;
  await state.enqueue(ch, async () => {
    ch.record.lastSeenAt = state.now();
    await state.storage.saveChannel(ch.record).catch(() => undefined);
  });
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

async function open(state: RelayState, socket: RelaySocket, s: Session, m: Extract<ClientMessage, { type: 'open' }>): Promise<void> {
  if (m.protocol !== PROTOCOL_VERSION) return refuse(state, socket, 'protocol', `this relay speaks protocol ${PROTOCOL_VERSION}, not ${m.protocol}: use a wxhooks of the same version as the relay`);
  if (s.opened) return refuse(state, socket, 'protocol', 'the channel is already open on this connection');
  const now = state.now();
  let ch = state.channels.get(s.channel);
  let created = false;
  if (!ch) {
    if (!m.secrets) return refuse(state, socket, 'unknownChannel', `no channel "${s.channel}" on this relay: give the webhook's secret to create it`);
    const record: ChannelRecord = { name: s.channel, secrets: m.secrets, temporary: Boolean(m.temporary), createdAt: now, lastSeenAt: now, nextSeq: 1 };
    ch = liveChannel(record);
    state.channels.set(s.channel, ch);
    created = true;
  }
  const live = ch;
  await state.enqueue(live, async () => {
    const r = live.record;
    if (m.secrets && (m.secrets.length !== r.secrets.length || m.secrets.some((x, i) => x !== r.secrets[i]))) {
      r.secrets = m.secrets;
      live.verifier = undefined;
    }
    if (m.temporary !== undefined) r.temporary = m.temporary;
    r.lastSeenAt = now;
    try {
      await state.storage.saveChannel(r);
    } catch (err) {
      if (created) state.channels.delete(r.name);
      state.emit({ event: 'refused', channel: r.name, message: `the channel could not be stored: ${(err as Error).message}` });
      send(socket, { type: 'error', code: 'internal', message: 'the relay could not store the channel; try again later' });
      return socket.close(CLOSE.internal, 'storage failed');
    }
    if (created) state.emit({ event: 'channel_created', channel: r.name });
    for (const other of state.directory.sockets(r.name)) {
      const o = other.session();
      if (other === socket || !o?.opened) continue;
      other.setSession({ ...o, opened: false });
      send(other, { type: 'error', code: 'replaced', message: 'another connection opened this channel' });
      other.close(CLOSE.replaced, 'another connection opened this channel');
      state.emit({ event: 'replaced', channel: r.name, unacknowledged: o.inflight.length });
    }
    const session: Session = {
      ...s,
      opened: true,
      lastSent: 0,
      inflight: [],
      window: Math.min(m.window ?? DEFAULTS.relayWindow, MAX_WINDOW),
      windowBytes: Math.min(m.windowBytes ?? DEFAULTS.relayWindowBytes, state.settings.maxWindowBytes),
    };
    socket.setSession(session);
    const usage = (await state.storage.usage()).get(r.name) ?? { queued: 0, bytes: 0 };
    send(socket, { type: 'ready', channel: r.name, created, temporary: r.temporary, queued: usage.queued, bytes: usage.bytes, window: session.window, windowBytes: session.windowBytes });
    state.emit({ event: 'connected', channel: r.name, queued: usage.queued });
    await pump(state, live);
  });
}

async function ack(state: RelayState, ch: LiveChannel, socket: RelaySocket, seqs: number[]): Promise<void> {
  const s = socket.session();
  if (!s?.opened) return;
  const sent = new Set(s.inflight.map(([seq]) => seq));
  const acked = new Set(seqs.filter((seq) => sent.has(seq)));
  if (!acked.size) return;
  state.freed(await state.storage.remove(ch.record.name, [...acked]));
  socket.setSession({ ...s, inflight: s.inflight.filter(([seq]) => !acked.has(seq)) });
  await pump(state, ch);
}

async function remove(state: RelayState, ch: LiveChannel, socket: RelaySocket): Promise<void> {
  const name = ch.record.name;
  const removed = await state.storage.deleteChannel(name);
  state.freed(removed);
  state.channels.delete(name);
  state.emit({ event: 'channel_deleted', channel: name, deliveries: removed.length });
  const s = socket.session();
  if (s) socket.setSession({ ...s, opened: false });
  send(socket, { type: 'deleted', channel: name });
  socket.close(CLOSE.deleted, 'channel deleted');
}

function send(socket: RelaySocket, m: RelayMessage): void {
  try {
    socket.send(JSON.stringify(m));
  } catch {
    // the connection is already gone: what it had not acknowledged is sent again on the next one
  }
}
