import { context, trace } from '@opentelemetry/api';
import type { SpanEnd } from './trace.js';
import { inSpan } from './trace.js';

/**
 * The library's delivery span (`verifyAndReceive`, which the Node middleware, the web handler and an app's
 * own route all go through): a child of the app's active span (its HTTP instrumentation's, when it has
 * one; else a server span of its own), and the span the app's handlers run inside. With no SDK registered
 * it records nothing, and costs one span object a delivery (bench: the middleware with the API alone).
 */

/** What a receipt gives its span: its outcome and status, the delivery's ids once verified, why it was refused. */
interface Receipted {
  outcome: string;
  status: number;
  reason?: string;
  event?: { type: string; id: string; subscriptionId: string; payload: { webhook_id?: unknown }; signature: { layout: string } };
}

const ended = (r: Receipted): SpanEnd => {
  const e = r.event;
  if (!e) return { outcome: r.outcome, status: r.status, reason: r.reason };
  const webhook = e.payload.webhook_id;
  return {
    outcome: r.outcome,
    status: r.status,
    type: e.type,
    trigger: e.id,
    subscription: e.subscriptionId,
    webhook: typeof webhook === 'string' || typeof webhook === 'number' ? String(webhook) : undefined,
    layout: e.signature.layout,
  };
};

/** Runs one delivery's verifying and handling in the library's span. */
export function librarySpan<R extends Receipted>(size: number, receive: () => Promise<R>): Promise<R> {
  const entry = trace.getActiveSpan() === undefined;
  return inSpan('wxhooks.receive', { kind: entry ? 'server' : 'internal', parent: context.active(), attributes: { 'wxhooks.door': 'library', 'http.request.body.size': size } }, receive, ended);
}
