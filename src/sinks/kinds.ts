import { NATS } from './nats.js';
import { REDIS } from './redis.js';
import type { SinkDefinition } from './sink.js';

/**
 * The registry of sinks: every broker wxhooks publishes to, keyed by kind, in the order help lists them.
 * The URL parser, `listen --sink`'s help, `deliveries list --sink` and the tests' broker table read it.
 * A new broker is its own file (a `defineSink`, as nats.ts ends with) and its line here.
 */
export const SINKS: readonly [typeof NATS, typeof REDIS] = [NATS, REDIS] as const satisfies readonly SinkDefinition[];

/** A kind's name: `nats`, `redis`. */
export type SinkKind = (typeof SINKS)[number]['kind'];

export const SINK_KINDS: readonly SinkKind[] = SINKS.map((s) => s.kind);

/** The kind of sink a URL scheme (without its colon) names, if any. */
export const sinkForScheme = (scheme: string): SinkDefinition | undefined => SINKS.find((s) => Object.hasOwn(s.schemes, scheme));

/** The kind of sink of this name (a parsed URL's `kind`). */
export function sinkNamed(kind: string): SinkDefinition {
  const found = SINKS.find((s) => s.kind === kind);
  if (!found) throw new TypeError(`no sink of kind "${kind}"`);
  return found;
}

/** The URL shapes, as help and messages show them: `nats://host:4222/SUBJECT or redis://host:6379/STREAM`. */
export const sinkExamples = (separator = ' or '): string => SINKS.map((s) => s.example).join(separator);

/** Every scheme a sink URL may have, as `nats://`. */
export const sinkSchemes = (): string[] => SINKS.flatMap((s) => Object.keys(s.schemes).map((scheme) => `${scheme}://`));

/** `listen --sink`'s help: each broker, and its URL's shape. */
export const sinkFlagHelp = () =>
  `publish each verified delivery to ${SINKS.map((s) => `${s.label} (${s.example})`).join(' or ')}, answered 2xx only once the broker has it; a broker set to drop what no worker has read is refused unless the URL says ?drops=accept (repeatable)`;
