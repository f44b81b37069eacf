import type { SinkView } from './view.js';
import { parseSinkUrl, type SinkTarget } from './sink-url.js';
import type { ConsumeOptions, Sink, SinkConsumer, SinkOptions } from './sink.js';

/**
 * The sinks: verified deliveries published to a stream (NATS JetStream or Redis Streams) that many
 * workers consume. A broker's client is loaded only when a URL of its kind is given.
 */

export { parseSinkUrl, shownSinkUrl, type SinkKind, type SinkTarget } from './sink-url.js';
export { encodeMessage, decodeMessage, sinkDelivery, pairKey, FIELDS, MESSAGE_FORMAT, type SinkDelivery, type SinkMessage, type Decoded } from './message.js';
export { consumerSettings, MessageRefusedError, type ConsumedMessage, type ConsumerEvent, type ConsumerOutcome } from './consumer.js';
export { SinkRefusedError, SinkUnavailableError, type ConnectionListener, type ConsumeOptions, type PublishResult, type Sink, type SinkConsumer, type SinkOptions, type SinkStream } from './sink.js';
export type { SinkView, GroupView, EntryView } from './view.js';

/** Connects to the broker a sink URL names, and finds (or makes) its stream: exit 2 for a bad URL, 6 when the broker cannot be reached. */
export async function openSink(url: string, options: SinkOptions = {}): Promise<Sink> {
  return openSinkAt(parseSinkUrl(url), options);
}

/** The same, for a URL already parsed (`listen --sink`'s parser): exit 6 when the broker cannot be reached. */
export async function openSinkAt(t: SinkTarget, options: SinkOptions = {}): Promise<Sink> {
  return t.kind === 'nats' ? (await import('./nats.js')).openNatsSink(t, options) : (await import('./redis.js')).openRedisSink(t, options);
}

/** Starts a worker of a consumer group on the stream a sink URL names; resolves once it reads. */
export async function consume(url: string, options: ConsumeOptions): Promise<SinkConsumer> {
  const t = parseSinkUrl(url);
  return t.kind === 'nats' ? (await import('./nats.js')).openNatsConsumer(t, options) : (await import('./redis.js')).openRedisConsumer(t, options);
}

/** What the stream holds (its newest `limit` messages), its groups and what they have pending, its dead letters. */
export async function readSink(url: string, limit = 100): Promise<SinkView> {
  const t = parseSinkUrl(url);
  return t.kind === 'nats' ? (await import('./nats.js')).readNats(t, limit) : (await import('./redis.js')).readRedis(t, limit);
}
