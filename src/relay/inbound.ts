import { WebVerifier } from '../signing/verify-web.js';
import { answers, said, type Answer } from './answers.js';
import { checkHeaders } from './edge.js';
import { pump } from './outbound.js';
import type { LiveChannel, RelayRequest, RelayRequestEvent, RelayState } from './state.js';
import type { StoredDelivery } from './storage.js';

/**
 * A delivery coming in (`POST /in/<channel>`): refused at its headers when it can be (missing, stale, no
 * signature in a layout we know: the body is never read), then read up to `maxBody` within the in-flight
 * budget, verified with its channel's secret, stored with those of the same moment, and only then
 * answered 2xx.
 */

/** What an inbound request was answered, and what its log line says besides. */
export interface Inbound {
  a: Answer;
  extra?: Partial<RelayRequestEvent>;
}

/** Headers about the connection it came on, not the delivery (RFC 9110 §7.6.1): not kept. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** What a delivery counts against the byte budget: its body and its headers. */
const sizeOf = (headers: [string, string][], body: Uint8Array) => headers.reduce((n, [k, v]) => n + k.length + v.length + 4, body.length);

export async function inbound(state: RelayState, name: string, request: RelayRequest): Promise<Inbound> {
  const ch = state.channels.get(name);
  if (!ch) return { a: answers.noChannel() };
  const { settings } = state;
  const now = state.now();
  const early = checkHeaders(request.headers, now, settings.tolerance, settings.maxBody, request.declaredLength);
  if (early) return { a: early, extra: { channel: name, message: said(early) } };
  if (request.declaredLength !== undefined && state.used + state.reserved + request.declaredLength > settings.maxBytes) return { a: answers.full(), extra: { channel: name } };
  if (state.reading >= settings.maxInflight) return { a: answers.busy(), extra: { channel: name } };

  let held = 0;
  try {
    const chunks: Uint8Array[] = [];
    let over: Answer | undefined;
    for await (const chunk of request.body()) {
      held += chunk.length;
      state.reading += chunk.length;
      if (state.reading > state.readingPeak) state.readingPeak = state.reading;
      if (held > settings.maxBody) over = answers.tooLarge(settings.maxBody);
      else if (state.reading > settings.maxInflight) over = answers.busy();
      if (over) break;
      chunks.push(chunk);
    }
    if (over) return { a: over, extra: { channel: name, size: held } };
    const body = concat(chunks, held);
    const v = await verifierOf(state, ch).verify(request.headers, body, now);
    if (!v.ok) return { a: answers.refused(v), extra: { channel: name, size: held, reason: v.reason, message: v.message } };
    const headers = request.headerList().filter(([header]) => !HOP_BY_HOP.has(header.toLowerCase()));
    const size = sizeOf(headers, body);
    if (state.used + state.reserved + size > settings.maxBytes) return { a: answers.full(), extra: { channel: name, size: held } };
    state.reserved += size;
    try {
      const seq = await append(state, ch, { receivedAt: now, headers, body, size });
      state.used += size;
      return { a: answers.stored(), extra: { channel: name, size: held, seq } };
    } catch (err) {
      return { a: answers.notStored(), extra: { channel: name, size: held, message: `not stored: ${(err as Error).message}` } };
    } finally {
      state.reserved -= size;
    }
  } finally {
    state.reading -= held;
  }
}

function verifierOf(state: RelayState, ch: LiveChannel): WebVerifier {
  ch.verifier ??= new WebVerifier({ secret: ch.record.secrets, tolerance: state.settings.tolerance });
  return ch.verifier;
}

/** Stores a verified delivery with those of the same moment, in arrival order; resolves with its seq once stored. */
function append(state: RelayState, ch: LiveChannel, delivery: Omit<StoredDelivery, 'seq'>): Promise<number> {
  return new Promise((resolve, reject) => {
    ch.pending.push({ delivery, resolve, reject });
    if (!ch.writing) void write(state, ch);
  });
}

async function write(state: RelayState, ch: LiveChannel): Promise<void> {
  ch.writing = true;
  while (ch.pending.length) {
    const batch = ch.pending.splice(0);
    const first = ch.record.nextSeq;
    // the seqs are spent even if the write fails: part of a batch may have been stored
    ch.record.nextSeq = first + batch.length;
    try {
      await state.storage.append(
        ch.record.name,
        batch.map((p, i) => ({ ...p.delivery, seq: first + i })),
        ch.record.nextSeq,
      );
      batch.forEach((p, i) => p.resolve(first + i));
    } catch (err) {
      batch.forEach((p) => p.reject(err));
    }
  }
  ch.writing = false;
  void state.enqueue(ch, () => pump(state, ch)).catch(() => undefined);
}

function concat(chunks: Uint8Array[], size: number): Uint8Array {
  if (chunks.length === 1) return chunks[0]!;
  const out = new Uint8Array(size);
  let at = 0;
  for (const c of chunks) {
    out.set(c, at);
    at += c.length;
  }
  return out;
}
