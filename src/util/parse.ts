import bytes from 'bytes';
import { UsageError } from '../errors.js';
import { idProblem, isoSeconds, urlProblem } from '../vocabulary.js';
import { printable } from './printable.js';

/**
 * The parsers of option values, one per kind of value, each with its limits: every flag of a kind
 * goes through the same one (src/commands/options.ts attaches them to commander), so the same flag has
 * the same limits in every command and a command's options hold numbers, not strings. A parser takes
 * the text and the flag's name (for the message) and returns the value, or throws a usage error.
 */
export type Parser<T> = (text: string, what: string) => T;

/** A whole number from `min` to `max`. */
export const integer =
  (min: number, max: number = Number.MAX_SAFE_INTEGER): Parser<number> =>
  (text, what) => {
    const n = Number(text);
    if (!/^\d+$/.test(text) || n < min || n > max) {
      throw new UsageError(`${what} must be a whole number from ${min}${max < Number.MAX_SAFE_INTEGER ? ` to ${max}` : ''}, not "${text}".`);
    }
    return n;
  };

export const port: Parser<number> = integer(0, 65535);

/** Seconds a timestamp may be off the clock: 1 s to 366 days (0 would accept only the very second). */
export const toleranceSeconds: Parser<number> = integer(1, 366 * 86_400);

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** A duration such as `500ms`, `30s`, `2m`, `24h`, in milliseconds; a bare number is seconds. 0 is allowed. */
export const duration: Parser<number> = (text, what) => {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) throw new UsageError(`${what} must be a duration such as 500ms, 30s, 2m or 1h, not "${text}".`);
  return Math.round(Number(m[1]) * UNITS[m[2] ?? 's']!);
};

/** A time limit: a duration of at least 1 ms (0 would not mean "no limit" but "fail at once"). */
export const timeLimit: Parser<number> = (text, what) => {
  const ms = duration(text, what);
  if (ms < 1) throw new UsageError(`${what} must be more than 0, not "${text}".`);
  return ms;
};

/** Durations separated by commas, such as `5s,30s,2m`. */
export const durations: Parser<number[]> = (text, what) => text.split(',').map((part) => duration(part.trim(), what));

/** A size such as `25MiB`, `512KB` or `1048576` (bytes), more than 0. */
export const size: Parser<number> = (text, what) => {
  const trimmed = text.trim();
  const n = /^\d+$/.test(trimmed) ? Number(trimmed) : bytes.parse(trimmed.replace(/ib$/i, 'b'));
  if (n === null || !Number.isFinite(n) || n <= 0) throw new UsageError(`${what} must be a size such as 25MiB, 512KB or 1048576, not "${text}".`);
  return n;
};

/** A point in time, as an ISO 8601 time or Unix seconds; in milliseconds. */
export const time: Parser<number> = (text, what) => {
  if (/^\d{9,11}$/.test(text)) return Number(text) * 1000;
  const t = /^\d{4}-\d{2}-\d{2}/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(t)) throw new UsageError(`${what} must be an ISO 8601 time (2026-11-21T06:00:00Z) or Unix seconds, not "${text}".`);
  return t;
};

/** An ISO 8601 time (date and time), given back in whole seconds as the service writes them: `2026-11-21T00:00:00Z`. */
export const isoTime: Parser<string> = (text, what) => {
  const t = /^\d{4}-\d{2}-\d{2}T/.test(text) ? Date.parse(text) : Number.NaN;
  if (Number.isNaN(t)) throw new UsageError(`${what} must be an ISO 8601 time such as 2026-11-21T00:00:00Z, not "${text}".`);
  return isoSeconds(t);
};

/** Unix seconds, as a signature's timestamp. */
export const unixSeconds: Parser<number> = integer(0, 9_999_999_999_999);

/** An identifier that is safe in a URL path (see idProblem). */
export const identifier: Parser<string> = (text, what) => {
  const problem = idProblem(text);
  if (problem) {
    throw new UsageError(`${what} "${printable(text)}" ${problem}.`, {
      hint: 'Copy the id from `wxhooks webhook list`.',
    });
  }
  return text;
};

/** An absolute http(s) URL. */
export const url: Parser<string> = (text, what) => {
  const problem = urlProblem(text);
  if (problem) throw new UsageError(`${what} ${problem}: "${text}".`, { hint: 'For example https://example.com/webhooks.' });
  return text;
};

/** The highest forecast hour a range may name (16 days). */
export const MAX_FORECAST_HOUR = 384;

/**
 * Forecast hours: comma-separated parts, each an hour (`12`), a range (`0-24`) or a range with a step
 * (`0-240/6`). Sorted, each once. An empty part, a reversed range, a step of 0 or an hour past 384 is
 * refused, naming the part.
 */
export const hours: Parser<number[]> = (text, what) => {
  const out = new Set<number>();
  for (const raw of text.split(',')) {
    const part = raw.trim();
    const m = /^(\d+)(?:-(\d+)(?:\/(\d+))?)?$/.exec(part);
    const bad = (why: string) => new UsageError(`${what}: "${part}" ${why}.`, { hint: 'Parts are an hour (12), a range (0-24) or a range with a step (0-240/6), separated by commas.' });
    if (!m) throw bad(part ? 'is not an hour, A-B or A-B/STEP' : 'is empty');
    const from = Number(m[1]);
    const to = m[2] === undefined ? from : Number(m[2]);
    const step = m[3] === undefined ? 1 : Number(m[3]);
    if (to < from) throw bad('is reversed (its first hour is after its last)');
    if (step < 1) throw bad('has a step of 0');
    if (to > MAX_FORECAST_HOUR) throw bad(`goes past hour ${MAX_FORECAST_HOUR}`);
    for (let h = from; h <= to; h += step) out.add(h);
  }
  return [...out].sort((a, b) => a - b);
};

export interface HostPort {
  host: string;
  port: number;
}

/** `[HOST:]PORT` (an IPv6 address in brackets); the host is 127.0.0.1 unless given. */
export const hostPort: Parser<HostPort> = (text, what) => {
  const m = /^(?:(.*):)?(\d+)$/.exec(text);
  if (!m) throw new UsageError(`${what} takes [HOST:]PORT, such as 8789 or 127.0.0.1:8789, not "${text}".`);
  return { host: m[1]?.replace(/^\[|\]$/g, '') || '127.0.0.1', port: port(m[2]!, `${what}'s port`) };
};

/** A repeatable option's values, in the order given. */
export const collect = (value: string, previous: string[] = []): string[] => [...previous, value];
