import { UsageError } from '../errors.js';

const UNITS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/**
 * Parses a duration such as `500ms`, `30s`, `2m`, `24h`; a bare number is in
 * `bareUnit` (seconds unless told). Throws a UsageError naming `what`.
 */
export function parseDuration(text: string, what: string, bareUnit: keyof typeof UNITS = 's'): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$/.exec(text);
  if (!m) {
    throw new UsageError(`${what} must be a duration such as 500ms, 30s, 2m or 1h, not "${text}".`);
  }
  return Math.round(Number(m[1]) * UNITS[m[2] ?? bareUnit]!);
}

/** A time limit: a duration of at least 1 ms (0 would not mean "no limit" but "fail at once"). */
export function parseTimeout(text: string, what: string): number {
  const ms = parseDuration(text, what);
  if (ms < 1) throw new UsageError(`${what} must be more than 0, not "${text}".`);
  return ms;
}

/** `1500` -> `1.5s`, `120000` -> `2m`. */
export function formatDuration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${+(ms / 1000).toFixed(1)}s`;
  if (ms < 3_600_000) return `${+(ms / 60_000).toFixed(1)}m`;
  return `${+(ms / 3_600_000).toFixed(1)}h`;
}
