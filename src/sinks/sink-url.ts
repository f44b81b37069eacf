import * as DEFAULTS from '../delivery/defaults.js';
import { UsageError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import { duration } from '../util/parse.js';
import { printable } from '../util/printable.js';
import { addSensitive } from '../util/redact.js';
import { sinkExamples, sinkForScheme, sinkSchemes, type SinkKind } from './kinds.js';
import type { SinkTarget } from './sink.js';

/**
 * A sink URL, parsed and checked once: `SCHEME://[user:password@]host[:port]/PATH?settings`, its scheme,
 * default port, path and own settings those of the kind the registry (kinds.ts) has for the scheme, and
 * the settings every kind takes (`dedupe`, `keep`, `drops`) read here. Its credentials are registered with
 * `redact` here, and `shown` is what every message uses.
 */

export type { SinkKind, SinkTarget };

/** The settings every kind takes, beside its own. */
const SHARED = ['dedupe', 'keep', 'drops'] as const;

/** The sink URL as it may be shown: its password replaced by `***` (a bare user of a kind whose user is a token: replaced too). */
export function shownSinkUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    else if (u.username && sinkForScheme(u.protocol.slice(0, -1))?.userIsToken) u.username = '***';
    return u.toString();
  } catch {
    return 'the sink URL';
  }
}

/** `?drops=`: refuse (the default) a broker that may drop what no worker has read, or accept it. */
function dropsSetting(value: string | undefined, what: string): boolean {
  if (value === undefined || value === 'refuse') return false;
  if (value === 'accept') return true;
  throw new UsageError(`${what}'s drops must be "accept" (run on a broker that may drop what no worker has read, said at start) or "refuse" (the default), not "${printable(value)}".`);
}

/** Parses and checks a sink URL: a usage error (exit 2) that says what is wrong, never showing the password. */
export function parseSinkUrl(text: string, what = '--sink'): SinkTarget {
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    throw new UsageError(`${what} must be a URL such as ${sinkExamples()}, and this is not a URL.`);
  }
  const scheme = u.protocol.slice(0, -1);
  const kind = sinkForScheme(scheme);
  const shown = shownSinkUrl(text);
  if (!kind)
    throw new UsageError(
      `${what} must be ${sinkSchemes()
        .join(', ')
        .replace(/, ([^,]*)$/, ' or $1')}, not ${printable(scheme)}://…`,
      { hint: `For example ${sinkExamples()}.` },
    );
  if (!u.hostname) throw new UsageError(`${what} names no host: ${sinkExamples()}.`);
  const username = u.username ? decodeURIComponent(u.username) : undefined;
  const password = u.password ? decodeURIComponent(u.password) : undefined;
  for (const secret of [password, u.password, kind.userIsToken && !password ? username : undefined]) addSensitive(secret);
  let name: string;
  try {
    name = decodeURIComponent(u.pathname.replace(/^\//, ''));
  } catch {
    throw new UsageError(`${what} ${shown}: its path is not valid percent-encoding.`);
  }
  const wrong = kind.pathProblem(name);
  if (wrong) throw new UsageError(`${what} ${shown} ${wrong.problem}.`, { hint: wrong.hint });
  const known = [...kind.settings.names, ...SHARED];
  for (const key of u.searchParams.keys()) {
    if (!known.includes(key)) throw new UsageError(`${what} ${shown}: unknown setting "${printable(key)}"; a ${kind.kind} sink knows ${known.join(', ')}.`);
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
  return {
    kind: kind.kind,
    shown,
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : kind.defaultPort,
    username,
    password,
    tls: kind.schemes[scheme]!.tls,
    name,
    dedupeMs,
    keepMs,
    acceptDrops: dropsSetting(param('drops'), what),
    settings: kind.settings.parse(param, what),
  };
}

/** `--sink`, repeatable: each URL parsed (and its password registered with redact) as it is read. */
export const sinkUrls = (text: string, what: string, previous: SinkTarget[] = []): SinkTarget[] => [...previous, parseSinkUrl(text, what)];
