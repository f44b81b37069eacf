import { context, propagation, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Link, type Span, type TextMapGetter } from '@opentelemetry/api';
import { isPromise } from '../util/then.js';

/**
 * OpenTelemetry spans of a delivery, through `@opentelemetry/api` alone: a no-op (one span object that
 * records nothing) unless the app (or `wxhooks listen`, with the OTEL_* variables) registered an SDK.
 * Runtime-neutral: the web handler uses it too. What a span holds: the outcome, the status, the ids of a
 * verified delivery, the layout, the reason of a refusal, the size; never a secret, never the body, never
 * an id an unverified request claims.
 *
 *   wxhooks.receive    a delivery at a door (listen; the library's middleware, web handler, verifyAndReceive)
 *     verified / refused, claim, completed / released     its steps, as events
 *     wxhooks.forward  listen --forward-to: its context goes to the app as `traceparent`
 *     wxhooks.publish  listen --sink: its context goes into the message (`traceparent`)
 *   wxhooks.consume    a stream's message at `webhooks.consume()`: a child of the publish, across the stream
 */

/** Asked for each span, not kept: an SDK registered later (or again, after another stopped) is the one used. */
const tracer = () => trace.getTracer('wxhooks');

/** What a delivery's span says when it ends. */
export interface SpanEnd {
  outcome: string;
  status?: number;
  /** Of a verified delivery only. */
  type?: string;
  trigger?: string;
  subscription?: string;
  webhook?: string;
  layout?: string;
  /** Why it was refused (the verifier's reason), or given back. */
  reason?: string;
}

/** The W3C trace context's headers of the span that is active now (`traceparent`, `tracestate`): nothing when none is. */
export function traceHeaders(ctx: Context = context.active()): Record<string, string> {
  const carrier: Record<string, string> = {};
  propagation.inject(ctx, carrier);
  return carrier;
}

const headerGetter: TextMapGetter<{ get(name: string): string | null } | Record<string, unknown>> = {
  keys: (c) => (typeof c.get === 'function' ? [] : Object.keys(c)),
  get(c, key) {
    const v = typeof c.get === 'function' ? (c as { get(name: string): string | null }).get(key) : (c as Record<string, unknown>)[key];
    return typeof v === 'string' || Array.isArray(v) ? (v as string | string[]) : (v ?? undefined) === undefined ? undefined : String(v);
  },
};

/** The context a `traceparent` (and `tracestate`) carries: a header object, a fetch Headers, or a message's fields. */
export function carried(headers: { get(name: string): string | null } | Record<string, unknown>, parent: Context = ROOT_CONTEXT): Context {
  return propagation.extract(parent, headers, headerGetter);
}

/** What a span is told at its end: the outcome, the ids, the status (an ERROR status for 5xx and for what failed inside). */
export function endSpan(span: Span, e: SpanEnd): void {
  if (span.isRecording()) {
    const a: Attributes = { 'wxhooks.outcome': e.outcome };
    if (e.status !== undefined) a['http.response.status_code'] = e.status;
    if (e.type !== undefined) a['wxhooks.delivery.type'] = e.type;
    if (e.trigger !== undefined) a['wxhooks.trigger_id'] = e.trigger;
    if (e.subscription !== undefined) a['wxhooks.subscription_id'] = e.subscription;
    if (e.webhook !== undefined) a['wxhooks.webhook_id'] = e.webhook;
    if (e.layout !== undefined) a['wxhooks.layout'] = e.layout;
    if (e.reason !== undefined) a['wxhooks.reason'] = e.reason;
    span.setAttributes(a);
    if ((e.status !== undefined && e.status >= 500) || e.outcome === 'error') span.setStatus({ code: SpanStatusCode.ERROR, message: e.outcome });
  }
  span.end();
}

export interface SpanStart {
  kind: 'server' | 'client' | 'producer' | 'consumer' | 'internal';
  /** The context it is a child of (default: the active one). */
  parent?: Context;
  /** A context it is linked to, not a child of (a trace an unauthenticated sender said it continues). */
  link?: Context;
  /** When it began (ms since 1970), when earlier than now. */
  startTime?: number;
  attributes?: Attributes;
}

const kindOf = (kind: SpanStart['kind']): SpanKind => SpanKind[kind.toUpperCase() as Uppercase<SpanStart['kind']>];

/**
 * Runs `work` inside a new span (the active span while it runs, and in whatever it starts: the app's
 * handlers, the forward, the publish), and ends it with what `end` makes of the result, or as an error
 * when it throws. With no SDK registered the span records nothing, and `work` runs as it would without it.
 */
export function inSpan<R>(name: string, start: SpanStart, work: (span: Span) => R, end: (r: Awaited<R>) => SpanEnd): R {
  const parent = start.parent ?? context.active();
  const linked = start.link && trace.getSpanContext(start.link);
  const links: Link[] | undefined = linked && trace.isSpanContextValid(linked) ? [{ context: linked }] : undefined;
  const span = tracer().startSpan(name, { kind: kindOf(start.kind), links, startTime: start.startTime, attributes: start.attributes }, parent);
  if (!span.isRecording() && !trace.isSpanContextValid(span.spanContext())) {
    // no SDK: the work runs as it would without a span (the middleware's cost with the API alone)
    return work(span);
  }
  const failed = (error: unknown): never => {
    span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.name : 'error' });
    span.setAttribute('wxhooks.outcome', 'error');
    span.end();
    throw error;
  };
  let r: R;
  try {
    r = context.with(trace.setSpan(parent, span), work, undefined, span);
  } catch (error) {
    return failed(error);
  }
  if (!isPromise(r)) {
    endSpan(span, end(r as Awaited<R>));
    return r;
  }
  return r.then((v) => {
    endSpan(span, end(v as Awaited<R>));
    return v;
  }, failed) as R;
}

/** A span begun (ended by the caller: a stream's message, whose work is several calls). */
export function startSpan(name: string, start: SpanStart): Span {
  return tracer().startSpan(name, { kind: kindOf(start.kind), startTime: start.startTime, attributes: start.attributes }, start.parent ?? context.active());
}

/** Runs `work` with `span` active (when there is one worth carrying: an SDK registered). */
export function inSpanOf<T>(span: Span | undefined, work: () => T): T {
  if (!span || (!span.isRecording() && !trace.isSpanContextValid(span.spanContext()))) return work();
  return context.with(trace.setSpan(context.active(), span), work);
}

/** Adds a step to the delivery's span (the active one), when one records: `verified`, `claim`, `completed`, … */
export function step(name: string, attributes?: Attributes): void {
  const span = trace.getActiveSpan();
  if (span?.isRecording()) span.addEvent(name, attributes);
}

/** Whether the active span records (an SDK is registered and sampled it): the steps are worth timing for it. */
export function recording(): boolean {
  return trace.getActiveSpan()?.isRecording() === true;
}

export { ROOT_CONTEXT, type Context, type Span };
