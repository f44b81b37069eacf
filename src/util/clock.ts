/**
 * The time, from one place: the wall clock for what is shown and written down, and a monotonic clock for
 * how long something took or how long ago it happened, which never jumps when the wall clock is set.
 * Everything that keeps time takes one of these, so a test passes its own and moves it.
 */
export interface Clock {
  /** The wall clock: milliseconds since the epoch. */
  now(): number;
  /** Milliseconds from an arbitrary origin, never going back, unmoved by a change of the wall clock. */
  monotonic(): number;
  /** Resolves once `ms` have passed on the monotonic clock (a deadline such as `--within`); it keeps no process alive. */
  after(ms: number): Promise<void>;
}

/** Timers, as every runtime has them; a test passes its own and moves them. */
export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

/** The runtime's own timers; in Node they keep no process alive. */
export const systemTimers: Timers = {
  set(fn, ms) {
    const t = setTimeout(fn, ms) as unknown as { unref?: () => void };
    t.unref?.();
    return t;
  },
  clear: (handle) => clearTimeout(handle as Parameters<typeof clearTimeout>[0]),
};

/** The machine's clocks. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  after: (ms) => new Promise((resolve) => setTimeout(resolve, ms).unref()),
};

let cachedSecond = -1;
let cachedPrefix = '';
let cachedMs = -1;
let cachedText = '';

/**
 * `new Date(ms).toISOString()`, for a receiver that stamps every request: the date and time up to the
 * second are formatted once per second (V8 formats a Date through printf, ~4,000 instructions a call),
 * and the whole text once per millisecond (under load, many requests share one).
 */
export function isoMillis(ms: number): string {
  if (ms === cachedMs) return cachedText;
  const second = Math.floor(ms / 1000);
  if (second !== cachedSecond) {
    cachedPrefix = new Date(second * 1000).toISOString().slice(0, -4); // "2026-11-21T23:24:59."
    cachedSecond = second;
  }
  const milli = ms - second * 1000;
  cachedMs = ms;
  cachedText = `${cachedPrefix}${milli < 10 ? '00' : milli < 100 ? '0' : ''}${milli}Z`;
  return cachedText;
}
