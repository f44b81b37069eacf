import { Chalk } from 'chalk';
import { describe, expect, it } from 'vitest';
import { attemptLine } from '../src/output/attempts.js';
import { formatEvent } from '../src/output/listen.js';
import { printable } from '../src/util/printable.js';
import { table } from '../src/output/render.js';
import type { ReceiverEvent } from '../src/receiver/event.js';

const plain = new Chalk({ level: 0 });
const accepted: ReceiverEvent = {
  time: '2026-11-21T23:40:59.123Z',
  outcome: 'accepted',
  status: 200,
  size: 2048,
  type: 'forecast_hour.available',
  webhook_id: '7',
  subscription_id: '3',
  trigger_id: 'trg_1',
  model: 'wm-6',
  initialization_time: '2026-11-21T06:00:00Z',
  forecast_hour: 12,
  layout: 'standard',
};

describe('the listen line', () => {
  it('shows what a person needs on an accepted delivery', () => {
    expect(formatEvent(accepted, plain)).toBe('23:40:59 ✓ 200  forecast_hour.available  webhook 7 sub 3 trg_1  wm-6 2026-11-21T06:00Z +12h  2.0 KB  standard');
  });

  it('--sink: where the stream put it, and a broker that had its pair already; a sink that did not take it, and that the service retries', () => {
    const published = [
      { sink: 'nats://***@h:4222/a', id: '41', duplicate: false },
      { sink: 'redis://:***@h:6379/s', id: '1795-0', duplicate: true },
    ];
    expect(formatEvent({ ...accepted, published }, plain)).toMatch(/standard {2}→ stream 41, 1795-0 \(had it\)$/);
    expect(formatEvent({ ...accepted, published, forward: { ok: true, status: 200, ms: 3 } }, plain)).toContain('→ stream 41, 1795-0 (had it)  → app 200 (3 ms)');
    const failed = formatEvent({ ...accepted, outcome: 'sink_failed', status: 503, message: 'not taken by nats://***@h:4222/a: the connection is down' }, plain);
    expect(failed).toContain('✗ 503');
    expect(failed).toContain('the connection is down');
    expect(failed).toContain('not marked processed: the service will retry it');
  });

  it('says what the dedupe key was when the layout does not sign the Trigger-Id', () => {
    expect(formatEvent({ ...accepted, layout: 'stripe', dedupe_key: 'hash' }, plain)).toContain('(dedupe on a hash of the signed timestamp and body: the layout does not sign the Trigger-Id)');
  });

  it('shows control characters from a delivery escaped, so no field can move the cursor or forge a line', () => {
    const hostile: ReceiverEvent = {
      ...accepted,
      type: 'forecast_hour.available\n23:41:00 ✓ 200  forged',
      subscription_id: '\u001b[2J',
      trigger_id: '\u001b]8;;http://evil\u0007link\u001b]8;;\u0007',
      model: 'wm\u009b6',
    };
    const line = formatEvent(hostile, plain);
    expect(line).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/);
    expect(line.split('\n')).toHaveLength(1);
    expect(line).toContain('forecast_hour.available\\n23:41:00');
    expect(line).toContain('sub \\x1b[2J');
    expect(line).toContain('\\x1b]8;;http://evil\\x07link');
    expect(line).toContain('wm\\u009b6');
    const refused = formatEvent({ time: accepted.time, outcome: 'unverified', status: 401, message: 'Webhook-Timestamp "\u009b2J" is not a Unix time', hint: 'a\u001bb' }, plain);
    expect(refused).toContain('"\\u009b2J"');
    expect(refused).toContain('a\\x1bb');
  });
});

describe('printable and tables', () => {
  it('escapes C0, C1 and DEL, and leaves other text alone', () => {
    expect(printable('a\u0000b\tc\u007f\u0085é雪🌧')).toBe('a\\x00b\\tc\\x7f\\u0085é雪🌧');
  });

  it('a table keeps one field per cell, whatever the cell holds', () => {
    const piped = table(['A', 'B'], [['x\ty', 'line\nbreak\u001b[31m']], false);
    expect(piped).toBe('A\tB\nx\\ty\tline\\nbreak\\x1b[31m\n');
  });
});

describe("a refused request's claimed Trigger-Id (#32.5)", () => {
  it('is cut at the source, so every place it goes (the --json line included) has it cut', async () => {
    const { failureEvent } = await import('../src/receiver/report.js');
    const { CLAIM_KEPT } = await import('../src/store/history-limits.js');
    const f = { ok: false as const, reason: 'no_match' as const, message: 'no signature matched', hint: 'check the secret' };
    const long = failureEvent('2026-11-25T00:00:00.000Z', '/', f as never, 401, 2, `trg_${'x'.repeat(16_000)}`);
    expect(long.claimed_trigger_id).toBe(`trg_${'x'.repeat(CLAIM_KEPT - 4)}…`);
    expect(JSON.stringify(long).length).toBeLessThan(1000);
    expect(failureEvent('2026-11-25T00:00:00.000Z', '/', f as never, 401, 2, 'trg_short').claimed_trigger_id).toBe('trg_short');
  });
});

describe("the emulator's attempt line", () => {
  const failed = {
    webhook_id: '12',
    subscription_id: '34',
    trigger_id: 'trg_01JD3Q4S9V8X2M5N7P0R6T1W4Y',
    type: 'forecast_hour.available',
    attempt: 1,
    outcome: 'failed' as const,
    status: 500,
    response: 'database not ready',
    duration_ms: 3,
    started_at: '2026-11-21T21:38:41.000Z',
    next_attempt_at: '2026-11-21T21:38:46.000Z',
    url: 'http://127.0.0.1:8787/',
  };

  it("fitted to 80 columns, keeps the receiver's status and what comes next; the ids go last, and are cut first", () => {
    const line = attemptLine(failed, plain, 80, Date.parse('2026-11-21T21:38:41.500Z'));
    expect(line.length).toBeLessThanOrEqual(80);
    expect(line).toContain('attempt 1: failed: the receiver answered 500');
    expect(line.startsWith('21:38:41 ✗ forecast_hour.available attempt 1:')).toBe(true);
    expect(line).not.toContain(failed.trigger_id);
  });

  it('on a wide terminal, the whole line: the answer, the retry, then the ids', () => {
    expect(attemptLine(failed, plain, 200, Date.parse('2026-11-21T21:38:41.500Z'))).toBe(
      '21:38:41 ✗ forecast_hour.available attempt 1: failed: the receiver answered 500 "database not ready" (3 ms); retry 2 at 21:38:46 (in 5s)  webhook 12 sub 34 trg_01JD3Q4S9V8X2M5N7P0R6T1W4Y',
    );
  });
});
