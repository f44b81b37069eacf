import type { Clock } from '../../src/util/clock.js';

/** A clock a test moves by hand: `advance` moves both clocks (time passes), `step` the wall clock alone (someone sets it). */
export interface ManualClock extends Clock {
  advance(ms: number): void;
  step(ms: number): void;
}

export function manualClock(start = Date.UTC(2026, 10, 23, 12, 0, 0)): ManualClock {
  let wall = start;
  let mono = 1_000_000;
  return {
    now: () => wall,
    monotonic: () => mono,
    advance(ms) {
      wall += ms;
      mono += ms;
    },
    step(ms) {
      wall += ms;
    },
  };
}
