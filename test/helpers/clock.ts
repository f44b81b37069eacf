import type { Timers } from '../../src/delivery/runner.js';
import type { Clock } from '../../src/util/clock.js';

/** A clock a test moves by hand: `advance` moves both clocks (time passes), `step` the wall clock alone (someone sets it). */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  step(ms: number): void;
}

export function manualClock(start = Date.UTC(2026, 10, 23, 12, 0, 0)): ManualClock {
  let wall = start;
  let mono = 1_000_000;
  let waiting: { at: number; resolve: () => void }[] = [];
  return {
    now: () => wall,
    monotonic: () => mono,
    after: (ms) => new Promise<void>((resolve) => waiting.push({ at: mono + ms, resolve })),
    advance(ms) {
      wall += ms;
      mono += ms;
      const due = waiting.filter((w) => w.at <= mono);
      waiting = waiting.filter((w) => w.at > mono);
      due.forEach((w) => w.resolve());
    },
    step(ms) {
      wall += ms;
    },
  };
}

/**
 * Timers a test moves (the runner's: claims extended, handlers timed out): `advance` fires what falls due,
 * in order, letting promises settle after each, and tells `onTime` the time it reached.
 */
export function manualTimers(onTime?: (now: number) => void): Timers & { advance(ms: number): Promise<void>; pending(): number } {
  let now = 0;
  let next = 0;
  const due = new Map<number, { at: number; fn: () => void }>();
  return {
    set(fn, ms) {
      due.set(++next, { at: now + ms, fn });
      return next;
    },
    clear: (handle) => void due.delete(handle as number),
    pending: () => due.size,
    async advance(ms) {
      const until = now + ms;
      for (;;) {
        const first = [...due.entries()].sort((a, b) => a[1].at - b[1].at)[0];
        if (!first || first[1].at > until) break;
        due.delete(first[0]);
        now = first[1].at;
        onTime?.(now);
        first[1].fn();
        await new Promise((r) => setImmediate(r));
      }
      now = until;
      onTime?.(now);
    },
  };
}
