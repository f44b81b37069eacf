import { SCHEMES, type Scheme } from '../signing/layouts.js';
import { examineHeaders } from '../signing/rules.js';
import { WebVerifier } from '../signing/verify-web.js';
import * as ANSWERS from '../delivery/answers.js';
import { declaredLength, door, type DoorIO } from '../delivery/door.js';
import { webBody } from '../util/bodies.js';
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

/** A delivery coming in on a channel: the host's request, the channel it names, and when it arrived (the clock its timestamp is checked against). */
export interface InboundRequest {
  channel: string;
  request: RelayRequest;
  at: number;
}

/** What a delivery was answered, and what its log line says besides. */
export interface Inbound {
  a: Answer;
  extra?: Partial<RelayRequestEvent>;
}

/** Headers about the connection it came on, not the delivery (RFC 9110 §7.6.1): not kept. */
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade']);

/** What a delivery counts against the byte budget: its body and its headers. */
const sizeOf = (headers: [string, string][], body: Uint8Array) => headers.reduce((n, [k, v]) => n + k.length + v.length + 4, body.length);

/**
 * The relay's door: the core's sequence (src/delivery/door.ts) over a request as a host gives it (its
 * body's chunks from the host's runtime: nodeBody, webBody), with the relay's own refusals on the headers
 * (`refusedEarly`) and its own delivery (`stored`: verified with the channel's secrets, then stored). One
 * body budget (the state's `InflightBudget`), one reader of a declared length, the core's answers to a
 * body too large or past the bytes in flight. Made once per relay; resolves each request's answer.
 */
export function inboundDoor(state: RelayState): (req: InboundRequest, answered: (a: Answer) => void) => void {
  const io: DoorIO<InboundRequest, (a: Answer) => void, Uint8Array> = {
    method: (r) => r.request.method,
    path: (r) => r.request.path,
    headers: (r) => r.request.headers,
    length: (r) => r.request.length,
    stream: (r, _answered, sink) => r.request.stream(sink),
    alloc: webBody.alloc,
    write(_r, answered, answer, how) {
      // a body not read to its end (refused on its headers, or part-way): the connection closes after the answer
      answered(how === 'read' ? answer : { ...answer, close: true });
      return true;
    },
  };
  return door(io, {
    maxBody: state.settings.maxBody,
    budget: state.budget,
    refuseEarly: (headers, r) => refusedEarly(state, r, headers),
    deliver: (r, body) => stored(state, r, body),
    answerOf: (d) => d.a,
    ended(r, end) {
      const { method, path } = r.request;
      const a: Answer = end.step === 'delivered' ? end.delivered.a : end.step === 'failed' ? ANSWERS.internal : end.answer;
      const extra: Partial<RelayRequestEvent> =
        end.step === 'delivered'
          ? (end.delivered.extra ?? {})
          : end.step === 'failed'
            ? { message: (end.error as Error)?.message ?? String(end.error) }
            : end.step === 'body'
              ? 'size' in end.refused
                ? { size: end.refused.size }
                : {}
              : { message: said(a) };
      state.emit({ outcome: a.outcome, status: a.status, method, path, channel: r.channel, ...extra });
    },
  });
}

/**
 * What a delivery's headers decide, before its body is read: the edge's checks (checkHeaders: the same
 * whether the channel exists or not), then whether a body of the length it declares could still be kept.
 */
function refusedEarly(state: RelayState, r: InboundRequest, headers: RelayRequest['headers']): Answer | undefined {
  const { settings } = state;
  const declared = declaredLength(r.request.length);
  const early = checkHeaders(headers, r.at, settings.tolerance, settings.maxBody, declared);
  if (early) return early;
  if (declared !== undefined && state.used + state.reserved + declared > settings.maxBytes) return answers.full();
  return undefined;
}

/** A delivery whose body is in: verified with its channel's secrets (or, for a name that is no channel's, a secret no one has), then stored. */
async function stored(state: RelayState, r: InboundRequest, body: Uint8Array): Promise<Inbound> {
  const { channel: name, request, at: now } = r;
  const ch = state.channels.get(name);
  const { settings } = state;
  const held = body.length;
  const v = await (ch ? verifierOf(state, ch) : decoyOf(state)).verify(request.headers, body, now);
  if (!ch) return { a: notVerified(request.headers, now, settings.tolerance), extra: { size: held, reason: 'no_channel', message: 'no such channel' } };
  if (!v.ok) {
    // a signature that matched over a body that is no JSON object: its sender has the secret, nothing is hidden from it
    const a = v.reason === 'not_json_object' ? answers.refused(v) : notVerified(request.headers, now, settings.tolerance);
    return { a, extra: { size: held, reason: v.reason, message: v.message } };
  }
  const narrower = ch.record.tolerance !== undefined && ch.record.tolerance < settings.tolerance ? examineHeaders(request.headers, now, ch.record.tolerance) : undefined;
  if (narrower && !narrower.ok) return { a: answers.refused(narrower), extra: { size: held, reason: narrower.reason, message: `${narrower.message} (the tolerance of this channel's listen)` } };
  const headers = request.headerList().filter(([header]) => !HOP_BY_HOP.has(header.toLowerCase()));
  const size = state.footprint(sizeOf(headers, body));
  if (state.used + state.reserved + size > settings.maxBytes) return { a: answers.full(), extra: { size: held } };
  state.reserved += size;
  try {
    const seq = await append(state, ch, { receivedAt: now, headers, body, size });
    state.used += size;
    return { a: answers.stored(), extra: { size: held, seq } };
  } catch (err) {
    return { a: answers.notStored(), extra: { size: held, message: `not stored: ${(err as Error).message}` } };
  } finally {
    state.reserved -= size;
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
