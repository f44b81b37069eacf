import { Counter, Gauge, type Series } from './series.js';
import type { RunningObserveServer } from './serve.js';
import type { Tracing } from './sdk.js';
import type { HostPort } from '../util/parse.js';

/**
 * `relay serve` seen from outside: its requests by outcome, each channel's backlog (what waits for its
 * listen: count, bytes, the oldest's age, the refused kept), the bytes being read against --max-inflight,
 * /readyz (its storage asked), and with OpenTelemetry a span per request. Channels are bounded by
 * --max-channels, so a label per channel is bounded too; a request's channel is said only once it was
 * taken (an anonymous sender names any path it likes).
 */

/** A channel as the relay's backlog says it (src/relay/relay.ts's ChannelStatus). */
interface Backlog {
  channels: { channel: string; connected: boolean; queued: number; refused: number; bytes: number; oldest_at: string | null }[];
  inFlight: { used: number; max: number };
}

export interface RelayWatchOptions {
  metrics?: HostPort;
  tracing: boolean;
  env: Record<string, string | undefined>;
  version: string;
  now: () => number;
  warn(text: string): void;
}

/** A request's route, without the channel it names (anyone can name any). */
const routeOf = (path: string) => path.replace(/^\/(in|connect|channels)\/[^/]+/, '/$1/{channel}');

export class RelayWatch {
  readonly requests: Counter = new Counter('wxhooks_relay_requests_total', 'Requests the relay answered, by outcome.', ['outcome']);
  private tracing?: Tracing;
  private server?: RunningObserveServer;
  /** Given to the relay's host: each request in a span of its own (with an SDK). */
  traced?: <A extends { status: number; outcome: string }>(path: string, answer: () => Promise<A>) => Promise<A>;

  constructor(private readonly o: RelayWatchOptions) {}

  async start(): Promise<this> {
    if (!this.o.tracing) return this;
    const { startSdk } = await import('./sdk.js');
    this.tracing = await startSdk(this.o.env, { service: 'wxhooks-relay', version: this.o.version, warn: this.o.warn });
    const { inSpan, ROOT_CONTEXT } = await import('./trace.js');
    this.traced = (path, answer) =>
      inSpan('wxhooks.relay.receive', { kind: 'server', parent: ROOT_CONTEXT, attributes: { 'wxhooks.door': 'relay', 'url.path': routeOf(path) } }, answer, (a) => ({
        outcome: a.outcome,
        status: a.status,
      }));
    return this;
  }

  get traces(): Tracing | undefined {
    return this.tracing;
  }

  /** One line of the relay's log: a request's (counted), or a channel's. */
  event(e: { outcome?: string; event?: string }): void {
    if (e.outcome !== undefined && e.event === undefined) this.requests.inc([e.outcome]);
  }

  series(backlog: () => Promise<Backlog>): Series[] {
    // one read of the storage per scrape, shared by the gauges that read it
    let read: Promise<Backlog> | undefined;
    const once = () => (read ??= backlog().finally(() => setTimeout(() => (read = undefined), 0)));
    const per = (pick: (c: Backlog['channels'][number]) => number) => async (): Promise<[string[], number][]> => (await once()).channels.map((c) => [[c.channel], pick(c)]);
    const now = this.o.now;
    return [
      this.requests,
      new Gauge(
        'wxhooks_relay_backlog_messages',
        'Deliveries waiting for their listen, by channel.',
        ['channel'],
        per((c) => c.queued),
      ),
      new Gauge(
        'wxhooks_relay_backlog_bytes',
        'The bytes (on disk) of what each channel keeps: waiting and refused, by channel.',
        ['channel'],
        per((c) => c.bytes),
      ),
      new Gauge(
        'wxhooks_relay_backlog_oldest_age_seconds',
        'How long the oldest delivery waiting has waited, by channel (0: none waits).',
        ['channel'],
        per((c) => (c.oldest_at ? Math.max(0, (now() - Date.parse(c.oldest_at)) / 1000) : 0)),
      ),
      new Gauge(
        'wxhooks_relay_refused_kept',
        'Deliveries a listen could not verify, kept apart until dropped, by channel.',
        ['channel'],
        per((c) => c.refused),
      ),
      new Gauge(
        'wxhooks_relay_listen_connected',
        'Whether a listen is connected to the channel (1) or not (0).',
        ['channel'],
        per((c) => (c.connected ? 1 : 0)),
      ),
      new Gauge('wxhooks_inflight_bytes', 'Body bytes held now by requests being read.', [], async () => [[[], (await once()).inFlight.used]]),
      new Gauge('wxhooks_inflight_limit_bytes', 'The body bytes all requests together may hold (--max-inflight).', [], async () => [[[], (await once()).inFlight.max]]),
    ];
  }

  /** Serves /healthz, /readyz (the storage asked) and /metrics, with --metrics; returns where. */
  async serve(relay: { backlog(): Promise<Backlog> }, storage: string): Promise<RunningObserveServer | undefined> {
    if (!this.o.metrics) return undefined;
    const { startObserveServer } = await import('./serve.js');
    const series = this.series(() => relay.backlog());
    this.server = await startObserveServer({
      ...this.o.metrics,
      door: 'relay',
      version: this.o.version,
      series: () => series,
      checks: () => [{ name: `storage ${storage}`, check: async () => void (await relay.backlog()) }],
    });
    return this.server;
  }

  async close(): Promise<void> {
    await this.server?.close();
    await this.tracing?.stop();
  }
}

/** The relay's watch, when --metrics or the OTEL_* variables ask for one. */
export async function watchRelay(o: RelayWatchOptions): Promise<RelayWatch | undefined> {
  if (!o.metrics && !o.tracing) return undefined;
  return new RelayWatch(o).start();
}
