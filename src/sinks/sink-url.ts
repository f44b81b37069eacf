import { DEFAULTS } from '../delivery/defaults.js';
import { UsageError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import { duration } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { addSensitive } from '../util/redact.js';

/**
 * A sink URL, parsed and checked once: `nats://[user:password@]host[:4222]/SUBJECT` or
 * `redis://[user:password@]host[:6379]/STREAM` (`rediss://` with TLS), with a few settings in the query.
 * Its credentials are registered with `redact` here, and `shown` is what every message uses.
 */

export type SinkKind = 'nats' | 'redis';

export interface SinkTarget {
  kind: SinkKind;
  /** The URL as it may be shown: its password (or token) replaced by `***`. */
  shown: string;
  host: string;
  port: number;
  username?: string;
  password?: string;
  /** rediss://: TLS. (NATS upgrades to TLS by itself when the server asks for it.) */
  tls: boolean;
  /** NATS: the subject published to; Redis: the stream's key. */
  name: string;
  /** NATS only: the stream's name, when one is to be created (else the one that holds the subject, or one named after it). */
  stream?: string;
  /** Redis only: the database number (`?db=N`, default 0). */
  db: number;
  dedupeMs: number;
  keepMs: number;
}

const DEFAULT_PORTS: Record<SinkKind, number> = { nats: 4222, redis: 6379 };
const KNOWN_PARAMS: Record<SinkKind, string[]> = { nats: ['stream', 'dedupe', 'keep'], redis: ['db', 'dedupe', 'keep'] };
const EXAMPLES = 'nats://host:4222/SUBJECT or redis://host:6379/STREAM';

/** A JetStream subject we publish to: dot-separated tokens, none empty, no wildcard, no whitespace. */
function subjectProblem(subject: string): string | undefined {
  if (!subject) return 'names no subject';
  if (/[\s*>]/.test(subject)) return 'has a wildcard (* or >) or whitespace in its subject: name one subject';
  if (subject.split('.').some((t) => t === '')) return 'has an empty token in its subject (a leading, trailing or doubled dot)';
  return undefined;
}

/** A JetStream stream name: no whitespace, dot, wildcard or path separator. */
const streamNameOk = (name: string) => name.length > 0 && name.length <= 255 && !/[\s.*>/\\]/.test(name);

/** The sink URL as it may be shown: its password replaced by `***` (a bare user of nats:// is a token: replaced too). */
export function shownSinkUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    else if (u.username && u.protocol === 'nats:') u.username = '***';
    return u.toString();
  } catch {
    return 'the sink URL';
  }
}

/** Parses and checks a sink URL: a usage error (exit 2) that says what is wrong, never showing the password. */
export function parseSinkUrl(text: string, what = '--sink'): SinkTarget {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UsageError(`${what} must be a URL such as ${EXAMPLES}, and this is not a URL.`);
  }
  const kind: SinkKind | undefined = u.protocol === 'nats:' ? 'nats' : u.protocol === 'redis:' || u.protocol === 'rediss:' ? 'redis' : undefined;
  const shown = shownSinkUrl(text);
  if (!kind) throw new UsageError(`${what} must be nats://, redis:// or rediss://, not ${printable(u.protocol)}//…`, { hint: `For example ${EXAMPLES}.` });
  if (!u.hostname) throw new UsageError(`${what} names no host: ${EXAMPLES}.`);
  const username = u.username ? decodeURIComponent(u.username) : undefined;
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  for (const secret of [password, u.password, kind === 'nats' && !password ? username : undefined]) addSensitive(secret);
  const path = u.pathname.replace(/^\//, '');
  let name: string;
  try {
    name = decodeURIComponent(path);
  } catch {
    throw new UsageError(`${what} ${shown}: its path is not valid percent-encoding.`);
  }
  if (kind === 'nats') {
    const problem = subjectProblem(name);
    if (problem) throw new UsageError(`${what} ${shown} ${problem}.`, { hint: 'The path is the subject deliveries are published to: nats://host:4222/wxhooks.deliveries' });
  } else if (!name) {
    throw new UsageError(`${what} ${shown} names no stream.`, { hint: "The path is the stream's key: redis://host:6379/wxhooks:deliveries (the database, if not 0, is ?db=N)." });
  }
  for (const key of u.searchParams.keys()) {
    if (!KNOWN_PARAMS[kind].includes(key)) throw new UsageError(`${what} ${shown}: unknown setting "${printable(key)}"; a ${kind} sink knows ${KNOWN_PARAMS[kind].join(', ')}.`);
  }
  const param = (key: string) => u.searchParams.get(key) ?? undefined;
  const dedupe = param('dedupe');
  const keep = param('keep');
  const dedupeMs = dedupe === undefined ? DEFAULTS.sinkDedupeMs : duration(dedupe, `${what}'s dedupe`);
  const keepMs = keep === undefined ? DEFAULTS.sinkKeepMs : duration(keep, `${what}'s keep`);
  if (dedupeMs < 1000) throw new UsageError(`${what}'s dedupe must be at least 1s, not "${dedupe}".`);
  if (keepMs < dedupeMs)
    throw new UsageError(
      `${what}'s keep (${keep ?? formatDuration(DEFAULTS.sinkKeepMs)}) must be at least its dedupe (${dedupe ?? formatDuration(DEFAULTS.sinkDedupeMs)}): a message's pair is remembered only while it is kept.`,
    );
  const stream = param('stream');
  if (stream !== undefined && !streamNameOk(stream)) throw new UsageError(`${what}'s stream "${printable(stream)}" is not a JetStream stream name (no dot, space, *, > or slash).`);
  const db = param('db');
  if (db !== undefined && !/^\d{1,5}$/.test(db)) throw new UsageError(`${what}'s db must be a database number, not "${printable(db)}".`);
  const port = u.port ? Number(u.port) : DEFAULT_PORTS[kind];
  return {
    kind,
    shown,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port,
    username,
    password,
    tls: u.protocol === 'rediss:',
    name,
    stream,
    db: db === undefined ? 0 : Number(db),
    dedupeMs,
    keepMs,
  };
}

/** The JetStream stream a subject gets when none holds it yet: the subject, its dots (and slashes) as underscores (`wxhooks.deliveries` → `wxhooks_deliveries`). */
export const streamNameFor = (subject: string) => subject.replace(/[./\\]/g, '_');
