import { createHash } from 'node:crypto';
import type { IncomingHttpHeaders } from 'node:http';
import type { Dispatcher } from 'undici';
import * as ANSWERS from '../delivery/answers.js';
import type { Answer } from '../delivery/answers.js';
import * as DEFAULTS from '../delivery/defaults.js';
import type { Pair } from '../delivery/pair.js';
import { verifyAndSettle, type Receiving } from '../delivery/receive.js';
import { handlerTimeoutFor, type Settled, type Timers } from '../delivery/runner.js';
import { forwarded, type Processed } from '../delivery/steps.js';
import type { PairStore } from '../delivery/store.js';
import type { VerifyFailure } from '../signing/rules.js';
import type { Verifier } from '../signing/verify.js';
import { isoMillis } from '../util/clock.js';
import type { ReceiverEvent } from './event.js';
import { forwardDelivery } from './forward.js';
import { deliveryEvent, failureEvent } from './report.js';
import { notRouted, routeFor, routesOf, type ForwardRoutes } from './routes.js';
import { saveDelivery, savedMeta } from './saved.js';
import { publishToSinks } from './sinks-step.js';
import { sinkDelivery, type SinkDelivery } from '../sinks/message.js';
import type { Sink } from '../sinks/sink.js';
import type { ReceiveWatch } from '../observe/receive-watch.js';

/**
 * What listen does with a delivery whose bytes are in, whichever door it came through (its HTTP server,
 * or a relay): the core verifies and settles it (src/delivery/receive.ts), with listen's handling as its
 * handle step (save, publish, forward); this says what to answer and what to report.
 */

/** A delivery as it arrived, its body whole. */
export interface Arrived {
  method: string;
  /** The request's path (the report's), and its URL as sent (what --save-dir keeps). */
  path: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** The wall clock its timestamp is checked against (ms): when it arrived. */
  now: number;
  /** The monotonic clock when it began to arrive, for the history's timing. */
  began: number;
  /** Who sent it (address:port), for the history. */
  peer?: string;
}

/** What arrived, as it arrived: for the history (`--history`, the inspector), which keeps what it needs of it. */
export interface RawDelivery {
  headers: IncomingHttpHeaders;
  body: Buffer;
  /** When the request began (the wall clock, ms), and how long it took to answer, in ms. */
  received: number;
  ms: number;
  /** Who sent it: the address and port of the connection. */
  peer?: string;
  /** Your app's answer as it came (its headers and the start of its body), when it was forwarded: the report keeps only its status and first line. */
  answer?: { headers: Record<string, string>; body: string };
}

/** What became of it: the answer (from the core's table), the report, and, for a history, what arrived. */
export interface Received {
  answer: Answer;
  event: ReceiverEvent;
  /** It was verified (else it was refused before any store saw it). */
  verified: boolean;
  raw?: RawDelivery;
}

export interface ReceiveOptions {
  verifier: Verifier;
  store: PairStore;
  /** Where verified deliveries are forwarded: one URL for every type, or routes by type (src/receiver/routes.ts). */
  forwardTo?: string | ForwardRoutes;
  forwardTimeoutMs?: number;
  /** `--sink`: each verified new delivery is published to every one, and answered 2xx only once each acknowledged it. */
  sinks?: readonly Sink[];
  saveDir?: string;
  respondStatus?: number;
  /** Whether what arrived is kept with the report (for a history). */
  keepsRaw?: boolean;
  timers?: Timers;
  monotonic: () => number;
  /** `--metrics`, OpenTelemetry: each step timed, each delivery a span (src/observe/receive-watch.ts); nothing of it otherwise. */
  watch?: ReceiveWatch;
}

/** The report of a verified delivery, told what became of it (its outcome, and why when it was not accepted). */
function reported(event: ReceiverEvent, s: Settled): ReceiverEvent {
  event.outcome = s.answer.outcome;
  event.status = s.answer.status;
  if (s.claim === 'stored_now') event.stored_later = true;
  if (s.claimFailed !== undefined) event.message = `${(s.claimFailed as Error).message} Answered 503, so the service retries it.`;
  if (s.stored && !s.stored.ok) {
    const e = s.stored.error as Error & { persistent?: boolean };
    event.message = `${e.message} Processed, not yet stored: its pair is kept, and its retry is answered 503 (not processed again) until it is written.`;
    if (e.persistent) event.fatal = true;
  }
  if (s.timedOut) event.message = 'not saved and forwarded in time: its claim let go, so the service retries it.';
  else if (s.handled && !s.handled.ok && s.handled.error !== undefined) event.message = `internal error: ${s.handled.error instanceof Error ? s.handled.error.message : String(s.handled.error)}`;
  if (s.leaseLost) event.message = `${event.message ? `${event.message} ` : ''}Its claim could not be extended while it was handled: another instance may have taken it over.`;
  return event;
}

const sha256 = (prefix: string, bytes: Uint8Array) => createHash('sha256').update(prefix).update(bytes).digest();

/** listen's receiving, made once per listen: `receive(arrived)` for each delivery, from any door. `close` lets its forwarding agent go. */
export async function makeReceive(o: ReceiveOptions): Promise<{ receive: (a: Arrived) => Received | Promise<Received>; close(): Promise<void> }> {
  const forwardTimeoutMs = o.forwardTimeoutMs ?? DEFAULTS.forwardTimeoutMs;
  // undici is loaded only when there is somewhere to forward to
  const routes = routesOf(o.forwardTo);
  const agent: Dispatcher | undefined = routes ? new (await import('undici')).Agent({ keepAliveTimeout: DEFAULTS.forwardKeepAliveMs, connections: DEFAULTS.forwardConnections }) : undefined;
  const w = o.watch;
  const sinks = w && o.sinks ? w.sinks(o.sinks) : o.sinks;
  const unwatched: Receiving<Buffer> = {
    store: o.store,
    verify: (headers, body, now) => o.verifier.verify(headers, body, now),
    sha256,
    /** The forward is bounded by --forward-timeout: the runner's own limit is only a backstop behind it. */
    timeoutMs: Math.max(handlerTimeoutFor(o.store.leaseMs), 2 * forwardTimeoutMs),
    timers: o.timers,
  };
  const receiving = w ? w.receiving(unwatched) : unwatched;

  /** Listen's handling of a delivery: saved, published to the sinks, then forwarded; the report told what each did. */
  async function processDelivery(a: Arrived, event: ReceiverEvent, pair: Pair, answers: { answer?: RawDelivery['answer'] }, message?: SinkDelivery) {
    const processed: Processed = {};
    if (o.saveDir) {
      try {
        processed.savedTo = await saveDelivery(o.saveDir, savedMeta(event.time, a.method, a.url, a.headers, event.layout), a.body, `${pair.trigger}-${pair.subscription}`);
        event.saved_to = processed.savedTo;
      } catch (err) {
        processed.saveError = (err as Error).message;
      }
    }
    if (processed.saveError === undefined && message) {
      const p = await (w ? w.publish(message, () => publishToSinks(sinks!, message)) : publishToSinks(sinks!, message));
      event.published = p.published;
      processed.sinkError = p.sinkError;
      if (p.sinkError) event.message = `${p.sinkError.refused ? 'refused for good by' : 'not taken by'} ${p.sinkError.why}`;
    }
    const to = routes && routeFor(routes, event.type);
    // a type the user chose not to route is processed and acknowledged, and its report says so (DECISIONS.md)
    if (processed.saveError === undefined && !processed.sinkError && routes && !to) event.not_forwarded = notRouted(event.type);
    if (processed.saveError === undefined && !processed.sinkError && to && agent) {
      processed.forward = await (w
        ? w.forward(to, (trace) => forwardDelivery(to, a.headers, a.body, forwardTimeoutMs, agent, trace))
        : forwardDelivery(to, a.headers, a.body, forwardTimeoutMs, agent));
      // the report (a line, NDJSON) keeps the app's status and first line; the history its whole answer
      const { answer, ...forward } = processed.forward;
      event.forward = forward;
      if (answer && o.keepsRaw) answers.answer = answer;
    }
    return forwarded(processed, o.respondStatus);
  }

  function receive(a: Arrived): Received | Promise<Received> {
    const time = isoMillis(a.now);
    // what arrived, for a listener that keeps it (a history): made only then
    const raw = (answer?: RawDelivery['answer']): RawDelivery | undefined =>
      o.keepsRaw ? { headers: a.headers, body: a.body, received: a.now, ms: Math.round(o.monotonic() - a.began), peer: a.peer, answer } : undefined;
    const refused = (failure: VerifyFailure, answer: Answer): Received => {
      const trigger = a.headers['trigger-id'];
      return { answer, verified: false, event: failureEvent(time, a.path, failure, answer.status, a.body.length, typeof trigger === 'string' ? trigger : undefined), raw: raw() };
    };
    return verifyAndSettle(
      receiving,
      a.headers,
      a.body,
      a.now,
      (v, pair, keyedPair) => {
        // the report and the pair are all that is kept of the parsed body: the rest (several times the body's
        // size, for a large forecast) is let go before the app is waited on
        const event = deliveryEvent(time, a.path, v, pair, a.body.length);
        // the message is keyed as the store keys the pair, so that a consumer's store agrees with listen's
        const message = o.sinks?.length ? sinkDelivery(v, keyedPair, a.headers, a.body, a.now) : undefined;
        const app: { answer?: RawDelivery['answer'] } = {};
        return { event, app, handle: () => (o.saveDir || agent || message ? processDelivery(a, event, keyedPair, app, message) : forwarded({}, o.respondStatus)) };
      },
      (d): Received => (d.verified ? { answer: d.answer, event: reported(d.work.event, d.settled), verified: true, raw: raw(d.work.app.answer) } : refused(d.failure, d.answer)),
      (err): Received => ({ answer: ANSWERS.internal, verified: true, event: { time, method: 'POST', path: a.path, outcome: 'error', status: 500, message: (err as Error).message } }),
    ) as Received | Promise<Received>;
  }

  return { receive: w ? w.receive(receive) : receive, close: async () => void (await agent?.close().catch(() => undefined)) };
}
