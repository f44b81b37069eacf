import { UsageError } from '../errors.js';
import { sinkNamed } from './kinds.js';
import { parseSinkUrl } from './sink-url.js';
import type { ConsumeOptions, Sink, SinkConsumer, SinkOptions, SinkTarget } from './sink.js';
import type { VerifiedMessage } from './consumer.js';
import type { SinkView } from './view.js';
import * as DEFAULTS from '../delivery/defaults.js';

/**
 * The sinks: verified deliveries published to a stream (NATS JetStream, Redis Streams: the registry,
 * kinds.ts) that many workers consume. A broker's client is loaded only when a URL of its kind is used.
 */

export { parseSinkUrl, shownSinkUrl } from './sink-url.js';
export { SINKS, SINK_KINDS, sinkExamples, sinkFlagHelp, type SinkKind } from './kinds.js';
export { encodeMessage, decodeMessage, sinkDelivery, pairKey, FIELDS, MESSAGE_FORMAT, type SinkDelivery, type SinkMessage, type Decoded } from './message.js';
export {
  consumerSettings,
  envelopeDisagreement,
  MessageRefusedError,
  type ConsumedMessage,
  type ConsumerEvent,
  type ConsumerOutcome,
  type DeadLetterCause,
  type VerifiedMessage,
} from './consumer.js';
export {
  SinkRefusedError,
  SinkUnavailableError,
  type ConnectionListener,
  type ConsumeOptions,
  type DropRisk,
  type PublishResult,
  type Sink,
  type SinkConsumer,
  type SinkDefinition,
  type SinkOptions,
  type SinkStream,
  type SinkTarget,
} from './sink.js';
export type { SinkView, GroupView, EntryView } from './view.js';

/** Connects to the broker a sink URL names, and finds (or makes) its stream: exit 2 for a bad URL or a broker set to drop, 6 when it cannot be reached. */
export async function openSink(url: string, options: SinkOptions = {}): Promise<Sink> {
  return openSinkAt(parseSinkUrl(url), options);
}

/**
 * The same, for a URL already parsed (`listen --sink`'s parser): exit 6 when the broker cannot be reached;
 * exit 2 when, as configured, it can drop what no worker has read (an evicting Redis, a NATS stream that
 * discards its oldest), unless the URL says `?drops=accept` (then `sink.stream.drops` says what).
 */
export async function openSinkAt(t: SinkTarget, options: SinkOptions = {}): Promise<Sink> {
  const sink = await sinkNamed(t.kind).publisher(t, options);
  const drops = sink.stream.drops;
  if (drops.length && !t.acceptDrops) {
    await sink.close();
    throw new UsageError(`The sink ${t.shown} may drop what no worker has read: ${drops.map((d) => d.what).join('; ')}.`, {
      hint: `Change it: ${drops.map((d) => d.fix).join('; ')}. Or, to run with it anyway, add drops=accept to the sink URL's query (?drops=accept): each start then says so.`,
    });
  }
  return sink;
}

/** Starts a worker of a consumer group on the stream a sink URL names; resolves once it reads. */
export async function consume<V extends VerifiedMessage>(url: string, options: ConsumeOptions<V>): Promise<SinkConsumer> {
  const t = parseSinkUrl(url);
  return sinkNamed(t.kind).consumer(t, options as ConsumeOptions);
}

/** What the stream holds (its newest `limit` messages), its groups and what they have pending, its dead letters. */
export async function readSink(url: string, limit: number = DEFAULTS.sinkListLimit): Promise<SinkView> {
  const t = parseSinkUrl(url);
  return sinkNamed(t.kind).read(t, limit);
}
