import { decodeMessage, type FieldName } from './message.js';

/** What `wxhooks deliveries list --sink URL` shows (and prints with --json): the stream, its groups, its dead letters. */
export interface SinkView {
  /** The sink URL without its password. */
  sink: string;
  /** The kind of sink (`nats`, `redis`). */
  broker: string;
  stream: {
    name: string;
    subject?: string;
    messages: number;
    bytes?: number;
    /** The first and last ids in it (JetStream sequences, Redis entry ids). */
    first?: string;
    last?: string;
  };
  dead_letters: { name: string; messages: number };
  groups: GroupView[];
  /** The newest messages, oldest first. */
  deliveries: EntryView[];
}

export interface GroupView {
  name: string;
  /** Handed to a worker, not yet acknowledged. */
  pending: number;
  /** Not yet handed to any worker (null when the broker cannot tell). */
  waiting: number | null;
  /** JetStream: messages delivered more than once. */
  redelivered?: number;
  /** Redis: the workers the group knows. */
  consumers?: number;
  /** Redis: the pending messages, oldest first (at most the view's limit). */
  pending_entries?: { id: string; consumer: string; idle_ms: number; deliveries: number }[];
}

export interface EntryView {
  id: string;
  received_at?: string;
  type?: string;
  trigger_id?: string;
  subscription_id?: string;
  layout?: string;
  /** The body's size in bytes. */
  size: number;
  /** Set for a message that is not one of ours: why (a consumer moves it to the dead letters). */
  not_ours?: string;
}

/** One message, as the view lists it. */
export function entryOf(id: string, get: (name: FieldName) => string | undefined, body: Uint8Array | undefined): EntryView {
  const d = decodeMessage(get, body);
  if (!d.ok) return { id, size: body?.length ?? 0, not_ours: d.reason };
  const m = d.message;
  return { id, received_at: m.receivedAt, type: m.type, trigger_id: m.trigger, subscription_id: m.subscription, layout: m.layout, size: m.body.length };
}
