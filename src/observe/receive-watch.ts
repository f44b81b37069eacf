import type { Receiving } from '../delivery/receive.js';
import type { ReceiverEvent } from '../delivery/report.js';
import type { SinkDelivery } from '../sinks/message.js';
import { SinkRefusedError, type Sink } from '../sinks/sink.js';
import { sinkLabel, type ListenFigures } from './figures.js';
import { watchedReceiving } from './steps.js';
import { carried, inSpan, ROOT_CONTEXT, traceHeaders } from './trace.js';

/**
 * What listen's receiving (src/receiver/receive.ts) is watched with, when it is: `--metrics` times its
 * steps (the verification, the store, each broker), and OpenTelemetry (the OTEL_* variables) gives each
 * delivery a span of its own, a new trace: a `traceparent` a sender put on its request is only linked,
 * never continued (anyone can send one). The forward carries the trace to the app (`traceparent`), the
 * publish into the stream's message. Made only when listen has either: a plain listen has none of this.
 */
export interface ReceiveWatch {
  /** The verifier and the store, their steps timed and told to the span. */
  receiving<B extends Uint8Array>(r: Receiving<B>): Receiving<B>;
  /** Each delivery in a span of its own (with tracing), ended with its outcome. */
  receive<A extends Arrival, R extends Answered>(receive: (a: A) => R | Promise<R>): (a: A) => R | Promise<R>;
  /** The forward to the app, in a span whose context goes with it: `forward` is given the headers to add. */
  forward<T extends { ok: boolean; status?: number }>(to: string, forward: (headers: Record<string, string>) => Promise<T>): Promise<T>;
  /** The publish to the sinks, in a span whose context the message carries (`traceparent`). */
  publish<T>(message: SinkDelivery, publish: () => Promise<T>): Promise<T>;
  /** The sinks, each publish timed. */
  sinks(sinks: readonly Sink[]): Sink[];
}

/** What a delivery's arrival gives its span. */
interface Arrival {
  headers: Record<string, unknown>;
  body: { length: number };
  now: number;
}

/** What a delivery's end gives its span. */
interface Answered {
  verified: boolean;
  event: ReceiverEvent;
}

/** A publish timed into `figures`, and counted when the broker did not take it. */
function timedSink(sink: Sink, figures: ListenFigures): Sink {
  const label = sinkLabel(sink);
  return {
    kind: sink.kind,
    where: sink.where,
    stream: sink.stream,
    get connected() {
      return sink.connected;
    },
    close: () => sink.close(),
    publish(d: SinkDelivery) {
      const began = performance.now();
      return sink.publish(d).then(
        (r) => {
          figures.sinks.observe([label], (performance.now() - began) / 1000);
          return r;
        },
        (error: unknown) => {
          figures.sinkErrors.inc([label, error instanceof SinkRefusedError ? 'refused' : 'unavailable']);
          throw error;
        },
      );
    },
  };
}

/** The watch of listen's receiving: `figures` with --metrics, `tracing` with an SDK registered. */
export function receiveWatch(o: { figures?: ListenFigures; tracing: boolean }): ReceiveWatch {
  const { figures, tracing } = o;
  return {
    receiving: (r) => watchedReceiving(r, figures),
    receive(receive) {
      if (!tracing) return receive;
      return (a) =>
        inSpan(
          'wxhooks.receive',
          {
            kind: 'server',
            parent: ROOT_CONTEXT,
            link: carried(a.headers),
            startTime: a.now,
            attributes: { 'wxhooks.door': 'listen', 'http.request.body.size': a.body.length },
          },
          () => receive(a),
          (r) => {
            const e = r.event;
            return r.verified
              ? { outcome: e.outcome, status: e.status, type: e.type, trigger: e.trigger_id, subscription: e.subscription_id, webhook: e.webhook_id, layout: e.layout }
              : { outcome: e.outcome, status: e.status, reason: e.reason };
          },
        );
    },
    forward(to, forward) {
      if (!tracing) return forward({});
      const u = new URL(to);
      // the app's address and port only: a path or a query may hold a token of the user's
      return inSpan(
        'wxhooks.forward',
        { kind: 'client', attributes: { 'server.address': u.hostname, 'server.port': Number(u.port || (u.protocol === 'https:' ? 443 : 80)) } },
        () => forward(traceHeaders()),
        (r) => ({ outcome: r.ok ? 'forwarded' : 'forward_failed', status: r.status }),
      );
    },
    publish(message, publish) {
      if (!tracing) return publish();
      return inSpan(
        'wxhooks.publish',
        { kind: 'producer' },
        () => {
          Object.assign(message, { trace: traceHeaders() });
          return publish();
        },
        (p) => ({ outcome: (p as { sinkError?: unknown } | undefined)?.sinkError ? 'sink_failed' : 'published' }),
      );
    },
    sinks: (sinks) => (figures ? sinks.map((s) => timedSink(s, figures)) : [...sinks]),
  };
}
