import { Chalk } from 'chalk';
import { describe, expect, it } from 'vitest';
import { formatEvent } from '../src/output/listen.js';
import { PLAIN } from '../src/output/style.js';
import type { ReceiverEvent } from '../src/receiver/event.js';

/** Events with every combination of the fields formatEvent looks at being there, empty or missing. */
function* events(): Generator<ReceiverEvent> {
  const outcomes = ['accepted', 'refused_by_flag', 'duplicate', 'in_progress', 'forward_failed', 'unverified', 'too_large', 'not_found', 'error'] as const;
  const pick = <T>(xs: readonly T[], i: number) => xs[i % xs.length]!;
  for (let i = 0; i < 4000; i++) {
    yield {
      time: '2026-11-21T23:40:59.123Z',
      outcome: pick(outcomes, i),
      status: pick([200, 202, 409, 502], i >> 2),
      method: 'POST',
      path: '/',
      type: pick([undefined, '', 'forecast_hour.available'], i >> 3),
      webhook_id: pick([undefined, '', '7'], i >> 4),
      subscription_id: pick([undefined, '3'], i >> 5),
      trigger_id: pick([undefined, 'trg_x'], i >> 6),
      model: pick([undefined, 'wm-6'], i >> 7),
      initialization_time: pick([undefined, '2026-11-21T00:00:00Z'], i >> 8),
      forecast_hour: pick([undefined, 0, 12], i >> 9),
      size: pick([undefined, 10, 5000, 3e6], i >> 1),
      layout: pick([undefined, 'standard'] as const, i >> 10),
      test: pick([undefined, true], i >> 11),
      forward: pick([undefined, { ok: true, status: 200, body: 'ok', ms: 3 }, { ok: false, error: 'refused', ms: 1 }], i >> 3),
      pinned: pick([undefined, true], i >> 5),
      message: pick([undefined, 'bad signature'], i >> 6),
    };
  }
}

describe('the listen line without colours', () => {
  it('is the same with PLAIN as with chalk at level 0, for every kind of event', () => {
    const chalk = new Chalk({ level: 0 });
    let compared = 0;
    for (const e of events()) {
      expect(formatEvent(e, PLAIN)).toBe(formatEvent(e, chalk));
      compared++;
    }
    expect(compared).toBe(4000);
  });

  it('shows what a person needs on an accepted delivery', () => {
    const line = formatEvent(
      { time: '2026-11-21T23:40:59.123Z', outcome: 'accepted', status: 200, size: 2048, type: 'forecast_hour.available', webhook_id: '7', subscription_id: '3', trigger_id: 'trg_1', model: 'wm-6', initialization_time: '2026-11-21T06:00:00Z', forecast_hour: 12, layout: 'standard' },
      PLAIN,
    );
    expect(line).toBe('23:40:59 ✓ 200  forecast_hour.available  webhook 7 sub 3 trg_1  wm-6 2026-11-21T06:00Z +12h  2.0 KB  standard');
  });
});
