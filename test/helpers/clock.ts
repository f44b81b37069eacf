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
