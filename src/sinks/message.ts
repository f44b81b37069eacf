import type { Pair } from '../delivery/pair.js';
import type { DedupeSource } from '../delivery/report.js';
import type { VerifySuccess } from '../signing/rules.js';
import { isoMillis } from '../util/clock.js';

/**
 * The message a sink writes for each verified delivery, and reads back: one encoder and one decoder for
 * both brokers. A message is a list of named text fields and the body's bytes; NATS carries the fields
 * as headers and the body as the payload, Redis as the fields of a stream entry, the body in `body`.
 * docs/streams.md ("The message") shows the same table.
 */

/** The format written in the `wxhooks` field: a message without it is not ours; another value is a format this wxhooks does not read. */
export const MESSAGE_FORMAT = '1';

/** The fields, in the order they are written. The body comes after them (Redis: the field `body`). */
export const FIELDS = ['wxhooks', 'key', 'trigger', 'subscription', 'source', 'type', 'layout', 'timestamp', 'secret_index', 'received_at', 'headers'] as const;
/** After them, when the receiver traces (OpenTelemetry, src/observe/): the W3C trace context of its span, so that a consumer continues the trace. */
export const TRACE_FIELDS = ['traceparent', 'tracestate'] as const;
export type FieldName = (typeof FIELDS)[number] | (typeof TRACE_FIELDS)[number];
/** The Redis field that holds the body. */
export const BODY_FIELD = 'body';

/** A delivery's headers as received: a name, lowercase, and its value (or values). */
export type DeliveryHeaders = Record<string, string | string[]>;

/** What a sink publishes: a verified delivery, with what its verification found. */
export interface SinkDelivery {
  /** The pair's trigger: the body's `trigger_id`, else the Trigger-Id header, else a hash (see `source`). */
  trigger: string;
  subscription: string;
  /** Where the trigger was taken from. */
  source: DedupeSource;
  /** The delivery's `type`, when its body has one. */
  type?: string;
  /** The signature layout that matched. */
  layout: string;
  /** The signed Webhook-Timestamp, in Unix seconds. */
  timestamp: number;
  /** Which of the secrets matched (0 for a single secret). */
  secretIndex: number;
  /** When the receiver got it (ISO 8601, milliseconds, UTC). */
  receivedAt: string;
  headers: DeliveryHeaders;
  /** The body's exact bytes. */
  body: Uint8Array;
  /** The W3C trace context of the receiver's span (`traceparent`, `tracestate`), so that a consumer continues its trace. */
  trace?: Partial<Record<(typeof TRACE_FIELDS)[number], string>>;
}

/** A message read back: the delivery, and its pair's key. */
export interface SinkMessage extends SinkDelivery {
  /** The pair's key: `<subscription>/<trigger>`, each percent-encoded. Also the NATS `Nats-Msg-Id` and the Redis dedupe key's end. */
  key: string;
}

/** The fields and body of one message, as a broker carries them. */
export interface EncodedMessage {
  key: string;
  fields: [FieldName, string][];
  body: Uint8Array;
}

export type Decoded = { ok: true; message: SinkMessage } | { ok: false; reason: string };

/** The key of a pair: unambiguous whatever its ids hold, and safe in a header and a Redis key. */
export const pairKey = (trigger: string, subscription: string) => `${encodeURIComponent(subscription)}/${encodeURIComponent(trigger)}`;

const SOURCES: readonly DedupeSource[] = ['body', 'header', 'hash'];

/** What a verified delivery gives a sink: its verification, its pair (src/receiver/common.ts), its headers and bytes. */
export function sinkDelivery(v: VerifySuccess, pair: Pair, headers: Record<string, string | string[] | undefined>, body: Uint8Array, receivedAtMs: number): SinkDelivery {
  const kept: DeliveryHeaders = {};
  for (const [name, value] of Object.entries(headers)) if (value !== undefined) kept[name.toLowerCase()] = value;
  return {
    trigger: pair.trigger,
    subscription: pair.subscription,
    source: pair.source,
    type: typeof v.payload.type === 'string' ? v.payload.type : undefined,
    layout: v.layout,
    timestamp: v.timestamp,
    secretIndex: v.secretIndex,
    receivedAt: isoMillis(receivedAtMs),
    headers: kept,
    body,
  };
}

/**
 * The fields of a delivery's message. Free text (the ids, the type) is percent-encoded, so that every
 * value is one line of text whatever the service put in it: a NATS header cannot hold a line break.
 */
export function encodeMessage(d: SinkDelivery): EncodedMessage {
  const key = pairKey(d.trigger, d.subscription);
  const fields: [FieldName, string][] = [
    ['wxhooks', MESSAGE_FORMAT],
    ['key', key],
    ['trigger', encodeURIComponent(d.trigger)],
    ['subscription', encodeURIComponent(d.subscription)],
    ['source', d.source],
  ];
  if (d.type !== undefined) fields.push(['type', encodeURIComponent(d.type)]);
  fields.push(['layout', d.layout], ['timestamp', String(d.timestamp)], ['secret_index', String(d.secretIndex)], ['received_at', d.receivedAt], ['headers', JSON.stringify(d.headers)]);
  for (const name of TRACE_FIELDS) if (d.trace?.[name] !== undefined && /^[\x21-\x7e]{1,512}$/.test(d.trace[name]!)) fields.push([name, d.trace[name]!]);
  return { key, fields, body: d.body };
}

function unescaped(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

function headersFrom(text: string): DeliveryHeaders | undefined {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return undefined;
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) return undefined;
  for (const value of Object.values(parsed)) {
    if (typeof value !== 'string' && !(Array.isArray(value) && value.every((v) => typeof v === 'string'))) return undefined;
  }
  return parsed as DeliveryHeaders;
}

/**
 * A message read from a stream, or why it is not one of ours (in words, for the dead letter and the
 * consumer's report). `get` gives a field's value, undefined when it is absent.
 */
export function decodeMessage(get: (name: FieldName) => string | undefined, body: Uint8Array | undefined): Decoded {
  const refuse = (reason: string): Decoded => ({ ok: false, reason });
  const format = get('wxhooks');
  if (format === undefined) return refuse('not a wxhooks message: it has no "wxhooks" field');
  if (format !== MESSAGE_FORMAT) return refuse(`a wxhooks message in format "${format.slice(0, 20)}", and this wxhooks reads format ${MESSAGE_FORMAT}: was it written by a newer wxhooks?`);
  for (const name of FIELDS) {
    if (name !== 'type' && get(name) === undefined) return refuse(`its "${name}" field is missing`);
  }
  if (body === undefined) return refuse('it has no body');
  const trigger = unescaped(get('trigger')!);
  const subscription = unescaped(get('subscription')!);
  const rawType = get('type');
  const type = rawType === undefined ? undefined : unescaped(rawType);
  if (trigger === undefined || subscription === undefined || (rawType !== undefined && type === undefined)) return refuse('its trigger, subscription or type is not valid percent-encoding');
  const key = get('key')!;
  if (key !== pairKey(trigger, subscription)) return refuse('its key does not match its trigger and subscription');
  const source = get('source') as DedupeSource;
  if (!SOURCES.includes(source)) return refuse(`its source is "${source.slice(0, 20)}", not body, header or hash`);
  const timestamp = get('timestamp')!;
  const secretIndex = get('secret_index')!;
  if (!/^\d{1,16}$/.test(timestamp) || !/^\d{1,4}$/.test(secretIndex)) return refuse('its timestamp or secret_index is not a whole number');
  const receivedAt = get('received_at')!;
  if (Number.isNaN(Date.parse(receivedAt))) return refuse('its received_at is not a time');
  const headers = headersFrom(get('headers')!);
  if (!headers) return refuse('its headers are not a JSON object of strings');
  const message: SinkMessage = { key, trigger, subscription, source, type, layout: get('layout')!, timestamp: Number(timestamp), secretIndex: Number(secretIndex), receivedAt, headers, body };
  for (const name of TRACE_FIELDS) {
    const value = get(name);
    if (value !== undefined) (message.trace ??= {})[name] = value.slice(0, 512);
  }
  return { ok: true, message };
}
