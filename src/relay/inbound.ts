import { SCHEMES, type Scheme } from '../signing/layouts.js';
import { examineHeaders } from '../signing/rules.js';
import { WebVerifier } from '../signing/verify-web.js';
import { answers, said, type Answer } from './answers.js';
import { checkHeaders, notVerified } from './edge.js';
import { pump } from './outbound.js';
import type { LiveChannel, RelayRequest, RelayRequestEvent, RelayState } from './state.js';
import type { StoredDelivery } from './storage.js';

/**
 * A delivery coming in (`POST /in/<channel>`): refused at its headers when it can be (missing, stale, no
 * signature in a layout we know: the body is never read), then read up to `maxBody` within the in-flight
 * budget, verified with its channel's secrets, as its listen verifies (its layout, its tolerance), stored
 * with those of the same moment, and only then answered 2xx: the relay acknowledges only what its listen
 * will verify.
 *
 * A name that is no channel's is answered as a channel answers a delivery that does not verify, its body
 * read and checked against a secret no one has: what an anonymous sender is told, and how long it takes,
 * does not say which channels there are. For the same reason, what only a channel's own settings refuse
 * (its narrower tolerance, its layout) is said only to a sender whose signature matched.
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
    const v = await (ch ? verifierOf(state, ch) : decoyOf(state)).verify(request.headers, body, now);
    if (!ch) return { a: notVerified(request.headers, now, settings.tolerance), extra: { channel: name, size: held, reason: 'no_channel', message: 'no such channel' } };
    if (!v.ok) {
      // a signature that matched over a body that is no JSON object: its sender has the secret, nothing is hidden from it
      const a = v.reason === 'not_json_object' ? answers.refused(v) : notVerified(request.headers, now, settings.tolerance);
      return { a, extra: { channel: name, size: held, reason: v.reason, message: v.message } };
    }
    const narrower = ch.record.tolerance !== undefined && ch.record.tolerance < settings.tolerance ? examineHeaders(request.headers, now, ch.record.tolerance) : undefined;
    if (narrower && !narrower.ok)
      return { a: answers.refused(narrower), extra: { channel: name, size: held, reason: narrower.reason, message: `${narrower.message} (the tolerance of this channel's listen)` } };
    const headers = request.headerList().filter(([header]) => !HOP_BY_HOP.has(header.toLowerCase()));
    const size = state.footprint(sizeOf(headers, body));
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

/** The layout a channel's listen verifies with, when it is one this relay knows (else every one that signs the timestamp). */
const schemeOf = (scheme: string | undefined): Scheme => ((SCHEMES as readonly string[]).includes(scheme ?? '') ? (scheme as Scheme) : 'auto');

/**
 * A channel's verifier: its secrets, its listen's layout, the relay's tolerance (a narrower one is
 * checked once the signature matched). It never looks further into why a delivery failed: that would
 * cost an anonymous sender's request more than a verified one, and would answer channels apart.
 */
function verifierOf(state: RelayState, ch: LiveChannel): WebVerifier {
  ch.verifier ??= new WebVerifier({ secret: ch.record.secrets, tolerance: state.settings.tolerance, scheme: schemeOf(ch.record.scheme), diagnosePerMinute: 0 });
  return ch.verifier;
}

const decoys = new WeakMap<RelayState, WebVerifier>();

/** What a name that is no channel's is checked with: a secret made now, that no one has. */
function decoyOf(state: RelayState): WebVerifier {
  let v = decoys.get(state);
  if (!v) {
    const secret = `whsec_${btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(32))))}`;
    v = new WebVerifier({ secret, tolerance: state.settings.tolerance, diagnosePerMinute: 0 });
    decoys.set(state, v);
  }
  return v;
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
