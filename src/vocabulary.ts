/**
 * The service's vocabulary and the rules its values follow, in one place: the CLI checks what it is
 * about to send with them (a usage error, exit 2), and the emulator checks what it receives with the
 * same ones (a 400). Each check returns what is wrong, in words, or undefined. No imports: the handler
 * library's web entry and the inspector page use it too.
 */

/** The subscription types SERVICE.md names. Others are sent anyway, with a warning. */
export const SUBSCRIPTION_TYPES = ['initialization_time.available', 'forecast_hour.available', 'degree_days.available', 'tropical_cyclones.available', 'events.available'] as const;

export function isKnownType(type: string): boolean {
  return (SUBSCRIPTION_TYPES as readonly string[]).includes(type);
}

/** The response types of `response_options` SERVICE.md names, and those the emulator also draws. Others are sent anyway, with a warning. */
export const RESPONSE_TYPES = ['gridded', 'interpolated_point_forecast', 'event_context', 'tropical_cyclone_track', 'degree_days'] as const;

/** The known word nearest to `word` (at most a third of its letters off), to suggest: "did you mean …?". */
export function closest(word: string, known: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(word.length / 3)) + 1;
  for (const candidate of known) {
    const d = editDistance(word.toLowerCase(), candidate.toLowerCase());
    if (d < bestDistance) [best, bestDistance] = [candidate, d];
  }
  return best;
}

/** Levenshtein distance: the single-letter edits that turn `a` into `b`. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    const row = [i];
    for (let j = 1; j <= b.length; j++) row[j] = Math.min(previous[j]! + 1, row[j - 1]! + 1, previous[j - 1]! + (a[i - 1] === b[j - 1] ? 0 : 1));
    previous = row;
  }
  return previous[b.length]!;
}

/** What to say of a word that is not one of `known`: "did you mean X?", else the list. */
export function suggestion(word: string, known: readonly string[]): string {
  const near = closest(word, known);
  return near ? `did you mean ${near}?` : `known: ${known.join(', ')}`;
}

/** An absolute http or https URL (a delivery's, the service's, your app's): what is wrong with `text`, or undefined. */
export function urlProblem(text: string): string | undefined {
  // `localhost:3000` parses as a URL of the scheme "localhost:": it is a host and port without their scheme
  const bare = /^([a-z0-9.-]+|\[[0-9a-f:]+\]):\d+(\/.*)?$/i.exec(text);
  if (bare) return `has no scheme: did you mean http://${text}?`;
  let u: URL;
  try {
    u = new URL(text);
  } catch {
    return 'is not an absolute URL';
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') return `must be an http or https URL, not "${u.protocol}"`;
  return undefined;
}

const HOUR_OF_DAY = /^(\d{1,2}):(\d{2})$/;

/** `H:MM`, H 0-23 and MM 00-59, as the service writes cycle hours (`0:00`, `12:00`). */
export function hourOfDayProblem(text: string): string | undefined {
  const m = HOUR_OF_DAY.exec(text);
  if (!m || Number(m[1]) > 23 || Number(m[2]) > 59) return `"${text}" is not an hour of the day in H:MM form (H 0-23, MM 00-59)`;
  return undefined;
}

/**
 * An identifier that is safe in a URL path: not empty, and no `/`, `?`, `#`, `\`, whitespace, control
 * characters or `..`, so that a value like `../all` or `42?secret=x` can never reach another route.
 */
export function idProblem(text: string): string | undefined {
  if (text.length === 0) return 'is empty';
  // eslint-disable-next-line no-control-regex
  if (/[/?#\\]|\s|\.\.|[\u0000-\u001f\u007f]/.test(text)) return 'cannot contain "/", "?", "#", "\\", whitespace or ".."';
  return undefined;
}

/** How deep JSON may nest in what the service accepts: deeper is refused before it is stored or echoed. */
export const MAX_JSON_DEPTH = 64;

/** Whether a parsed JSON value nests deeper than `max` (without recursion, so it cannot overflow the stack). */
export function nestsDeeperThan(value: unknown, max: number = MAX_JSON_DEPTH): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (typeof v !== 'object' || v === null) continue;
    if (depth >= max) return true;
    for (const child of Array.isArray(v) ? v : Object.values(v)) stack.push([child, depth + 1]);
  }
  return false;
}

/** An ISO 8601 time in whole seconds, as the service writes them: `2026-11-21T06:00:00Z`. */
export function isoSeconds(time: Date | number | string): string {
  return new Date(time).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** The latest 6-hourly model cycle (00, 06, 12, 18 UTC) at or before `now`. */
export function latestCycle(now: Date = new Date()): string {
  const d = new Date(now);
  d.setUTCHours(Math.floor(d.getUTCHours() / 6) * 6, 0, 0, 0);
  return isoSeconds(d);
}
