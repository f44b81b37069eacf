import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DELIVERED_OUTCOMES, OUTCOME_NAMES } from '../../src/delivery/outcomes.js';
import { verified, type ReceiverEvent } from '../../src/delivery/report.js';
import { RunTracker, runView, type RunView } from '../../src/delivery/runs.js';
import { PgStore } from '../../src/store/postgres.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';

// The model-run rules live in two languages: TypeScript (src/delivery/runs.ts: the history, `runs`,
// the page, `listen --until-run`) and the SQL of the shared store's history (`historyRuns`). The same
// rows go to both, and they must agree: which deliveries make a run, its hours, its initialisation
// event, and the test deliveries left out.

const INIT = '2026-11-22T00:00:00Z';
const LATER = '2026-11-22T06:00:00Z';
const fh = (model: string, hour: unknown, extra: Partial<ReceiverEvent> = {}): ReceiverEvent =>
  ({ time: INIT, outcome: 'accepted', status: 200, type: 'forecast_hour.available', model, initialization_time: INIT, forecast_hour: hour, layout: 'standard', ...extra }) as ReceiverEvent;

/** Rows that press on each rule: what counts (accepted, duplicate, verified), what never does (tests, refused, forwards that failed, other types), and fields missing or of the wrong kind. */
const ROWS: ReceiverEvent[] = [
  fh('wm-6', 0),
  fh('wm-6', 6),
  fh('wm-6', 6, { outcome: 'duplicate' }),
  fh('wm-6', 12, { outcome: 'forward_failed', status: 502 }), // not processed: not part of the run
  fh('wm-6', 18, { outcome: 'refused_by_flag', status: 500 }),
  fh('wm-6', 24, { outcome: 'store_failed', status: 503 }),
  fh('wm-6', 30, { test: true }), // a ping
  fh('wm-6', 36, { test: true, outcome: 'duplicate' }),
  fh('wm-6', 42, { layout: undefined, outcome: 'unverified', status: 401 }), // never verified
  fh('wm-6', '48'), // an hour that is not a number: the run, not the hour
  fh('wm-6', 54, { initialization_time: LATER }),
  { ...fh('wm-6', 0), type: 'initialization_time.available', forecast_hour: undefined },
  { ...fh('wm-6', 0), type: 'initialization_time.available', forecast_hour: undefined, initialization_time: LATER, test: true },
  fh('wm-9', 0, { type: 'degree_days.available' }), // another type: no run
  fh('wm-7', 3),
  { ...fh('wm-7', 9), initialization_time: undefined }, // no initialisation time: no run
  { ...fh('', 9) }, // an empty model
  { ...fh('wm-8', 9), model: undefined },
  { ...fh('wm-6', 60), test: false },
  // every outcome of the vocabulary, one hour each: the SQL counts as delivered what DELIVERED_OUTCOMES says
  ...OUTCOME_NAMES.map((outcome, i) => fh('wm-5', 100 + i, { outcome })),
];

/** The TypeScript rules over the rows, as the in-memory history applies them. */
function byTypeScript(rows: ReceiverEvent[]): { runs: RunView[]; tests: number } {
  const tracker = new RunTracker();
  let tests = 0;
  for (const r of rows) {
    if (!verified(r) || !DELIVERED_OUTCOMES.includes(r.outcome)) continue;
    if (r.test) tests++;
    tracker.add(r);
  }
  return { runs: tracker.runs().map(runView), tests };
}

const sorted = (runs: RunView[]) =>
  [...runs].map((r) => ({ ...r, hours: [...r.hours].sort((a, b) => a - b) })).sort((a, b) => `${a.model} ${a.initialization_time}`.localeCompare(`${b.model} ${b.initialization_time}`));

describe('the model-run rules in SQL and in TypeScript', () => {
  let db: SharedPostgres;
  let store: PgStore;
  beforeAll(async () => {
    db = await sharedPostgres();
    store = await PgStore.open({ url: db.url, schema: 'runs_rules', ttlMs: 86_400_000, leaseMs: 60_000, history: { rows: 1000, bytes: 1 << 20, refusedRows: 100, partBytes: 4096 } });
    const admin = new pg.Client({ connectionString: db.url });
    await admin.connect();
    try {
      for (const r of ROWS) {
        await admin.query(`INSERT INTO runs_rules.deliveries (instance, verified, outcome, type, trigger_id, record) VALUES ('test', $1, $2, $3, 'trg', $4)`, [
          verified(r),
          r.outcome,
          r.type ?? null,
          JSON.stringify(r),
        ]);
      }
    } finally {
      await admin.end();
    }
  });
  afterAll(async () => {
    await store?.close();
    await db?.remove();
  });

  it('give the same runs, hours, initialisation events and count of test deliveries', async () => {
    const sql = await store.historyRuns();
    const ts = byTypeScript(ROWS);
    expect(sorted(sql.runs)).toEqual(sorted(ts.runs));
    expect(sql.tests).toBe(ts.tests);
    // and what they agree on is what the rules say
    expect(sorted(ts.runs)).toEqual([
      { model: 'wm-5', initialization_time: INIT, hours: DELIVERED_OUTCOMES.map((o) => 100 + OUTCOME_NAMES.indexOf(o)), init_event: false },
      { model: 'wm-6', initialization_time: INIT, hours: [0, 6, 60], init_event: true },
      { model: 'wm-6', initialization_time: LATER, hours: [54], init_event: false },
      { model: 'wm-7', initialization_time: INIT, hours: [3], init_event: false },
    ]);
    expect(ts.tests).toBe(3);
  });
});
