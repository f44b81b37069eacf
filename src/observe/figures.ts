// What `listen` counts of its own run: every request's outcome, refusals by reason, the app's answers and
// their time, the forecast's delivery lag, and (with --metrics) the time of each step. One home for the
// metrics' names and labels; `/metrics`, the inspector page and `wxhooks mcp` read these same series.
// Imports only the import-free series (the inspector page bundles the types).

import { REFUSED_OUTCOMES } from '../delivery/outcomes.js';
import type { ReceiverEvent } from '../delivery/report.js';
import { BOUNDS, Counter, Gauge, Histogram, type Series } from './series.js';

/** What a request's report gives the figures: the fields of listen's report they read (a replay says what it replays). */
export type Reported = Pick<ReceiverEvent, 'time' | 'outcome' | 'status' | 'type' | 'model' | 'reason' | 'created_at' | 'forward'> & { replay_of?: number };

const REFUSED = new Set<string>(REFUSED_OUTCOMES);

/** The outcomes that are a verified delivery handed on (the first arrival: a retry's lag is not its lag). */
const FIRST_ARRIVAL = 'accepted';

/** A sink's label: its URL without its credentials (kind, host, port, stream): never a password or a token. */
export const sinkLabel = (s: { where: string }): string => s.where.replace(/\/\/[^@/]*@/, '//');

/** An app's answer by its class: `2xx` … `5xx`, or `error` (no answer: refused, timed out). */
export const statusClass = (f: { status?: number }): string => (f.status === undefined ? 'error' : `${Math.floor(f.status / 100)}xx`);

/** One distribution as the page and MCP show it: how many, and its median and 95th percentile (from the buckets). */
export interface Spread {
  count: number;
  p50: number | null;
  p95: number | null;
}

/** The figures of this run, as the inspector page and `wxhooks mcp`'s metrics tool show them (the units in the names). */
export interface RunFigures {
  /** When this run of listen started (ISO 8601). */
  since: string;
  /** Requests answered, by outcome (every outcome seen; replays apart). */
  outcomes: Record<string, number>;
  /** Requests refused, by reason (the verifier's reason, else the outcome: too_large, overloaded, …). */
  refusals: Record<string, number>;
  /** Your app's answers (`--forward-to`): by status class, and how long they took, in ms. */
  app: Spread & { by_class: Record<string, number> };
  /** The delivery lag of new verified deliveries that say when they were made (received minus created_at), in seconds. */
  lag: Spread;
  /** `--watch-runs`: late notifications said so far, and late now. */
  late: { said: number; now: number };
}

const round = (v: number | undefined, digits: number): number | null => (v === undefined ? null : Number(v.toFixed(digits)));

/** listen's series: those its reports give (always, when anything reads them), and those its steps give (with --metrics). */
export class ListenFigures {
  readonly started: number;
  readonly requests: Counter = new Counter('wxhooks_requests_total', 'Requests answered, by outcome (the outcome vocabulary) and delivery type (empty when it did not verify).', ['outcome', 'type']);
  readonly refusals: Counter = new Counter('wxhooks_refusals_total', "Requests refused before or at verification, by reason (the verifier's reason, else the outcome).", ['reason']);
  readonly forward: Histogram = new Histogram(
    'wxhooks_app_response_duration_seconds',
    "Your app's answers to forwarded deliveries, by status class (error: no answer), and how long they took.",
    ['status_class'],
    BOUNDS.call,
  );
  readonly lag: Histogram = new Histogram(
    'wxhooks_delivery_lag_seconds',
    "The forecast's delivery lag: received minus the notification's created_at, for new verified deliveries, by type and model.",
    ['type', 'model'],
    BOUNDS.lag,
  );
  readonly verify: Histogram = new Histogram('wxhooks_verification_duration_seconds', "How long a delivery's signature check took, by result (ok, failed).", ['result'], BOUNDS.verify);
  readonly store: Histogram = new Histogram('wxhooks_store_operation_duration_seconds', 'How long each operation on the processed pairs took, by operation.', ['operation'], BOUNDS.call);
  readonly storeErrors: Counter = new Counter('wxhooks_store_errors_total', 'Operations on the processed pairs that failed, by operation.', ['operation']);
  readonly sinks: Histogram = new Histogram('wxhooks_sink_publish_duration_seconds', 'How long a broker took to acknowledge a delivery (--sink), by sink.', ['sink'], BOUNDS.call);
  readonly sinkErrors: Counter = new Counter('wxhooks_sink_errors_total', 'Publishes a broker did not acknowledge, by sink and kind (unavailable, refused).', ['sink', 'kind']);
  readonly lateSaid: Counter = new Counter('wxhooks_late_notifications_total', '--watch-runs: notifications found late (available longer than --late-after, not delivered), by type and model.', [
    'type',
    'model',
  ]);
  /** Late now, as the last look of --watch-runs found them (set by listen once it watches). */
  lateNow: () => { type: string; model: string }[] = () => [];

  constructor(now: number) {
    this.started = now;
  }

  /** One request's report, as listen writes it. A replay is not a request the service made: not counted. */
  event(e: Reported): void {
    if (e.replay_of !== undefined || e.outcome === 'replayed') return;
    this.requests.inc([e.outcome, e.type ?? '']);
    if (REFUSED.has(e.outcome)) this.refusals.inc([e.reason ?? e.outcome]);
    if (e.forward) this.forward.observe([statusClass(e.forward)], e.forward.ms / 1000);
    if (e.outcome === FIRST_ARRIVAL && e.created_at !== undefined) {
      const lag = (Date.parse(e.time) - Date.parse(e.created_at)) / 1000;
      // a clock behind the service's gives a negative lag: counted as none
      if (!Number.isNaN(lag)) this.lag.observe([e.type ?? '', e.model ?? ''], Math.max(0, lag));
    }
  }

  /** A late notification said by --watch-runs. */
  late(l: { type: string; model: string }): void {
    this.lateSaid.inc([l.type, l.model]);
  }

  /** Every series, for `/metrics`. */
  series(): Series[] {
    const lateNow = new Gauge('wxhooks_late_notifications', '--watch-runs: notifications late at its last look, by type and model.', ['type', 'model'], () => {
      const n = new Map<string, [string[], number]>();
      for (const l of this.lateNow()) {
        const k = `${l.type}\u0001${l.model}`;
        const e = n.get(k) ?? [[l.type, l.model], 0];
        e[1]++;
        n.set(k, e);
      }
      return [...n.values()];
    });
    return [this.requests, this.refusals, this.forward, this.lag, this.verify, this.store, this.storeErrors, this.sinks, this.sinkErrors, this.lateSaid, lateNow];
  }

  /** The figures of this run, as the page and MCP show them: the same series, the quantiles from the same buckets. */
  figures(): RunFigures {
    const outcomes: Record<string, number> = {};
    for (const [[outcome], n] of this.requests.entries()) outcomes[outcome!] = (outcomes[outcome!] ?? 0) + n;
    const refusals: Record<string, number> = {};
    for (const [[reason], n] of this.refusals.entries()) refusals[reason!] = n;
    const app = this.forward.merged();
    const by_class: Record<string, number> = {};
    for (const [[c], b] of this.forward.entries()) by_class[c!] = b.count;
    const lag = this.lag.merged();
    return {
      since: new Date(this.started).toISOString(),
      outcomes,
      refusals,
      app: { count: app.count, p50: round(scaled(app.quantile(0.5), 1000), 1), p95: round(scaled(app.quantile(0.95), 1000), 1), by_class },
      lag: { count: lag.count, p50: round(lag.quantile(0.5), 1), p95: round(lag.quantile(0.95), 1) },
      late: { said: [...this.lateSaid.values.values()].reduce((a, b) => a + b, 0), now: this.lateNow().length },
    };
  }
}

const scaled = (v: number | undefined, by: number) => (v === undefined ? undefined : v * by);
