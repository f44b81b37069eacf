import type { PairStore } from '../delivery/store.js';
import type { ReceiverEvent } from '../delivery/report.js';
import type { Sink } from '../sinks/sink.js';
import { BindError } from '../util/net.js';
import type { HostPort } from '../util/parse.js';
import { ListenFigures, sinkLabel } from './figures.js';
import type { ReceiveWatch } from './receive-watch.js';
import { Gauge, type Series } from './series.js';
import type { ReadyCheck, RunningObserveServer } from './serve.js';
import type { Tracing } from './sdk.js';

/**
 * What `listen` knows of itself, in one place: the figures of its run (for `--metrics`, the inspector page
 * and `wxhooks mcp`), its receiving watched (the steps timed with --metrics, a span per delivery with
 * OpenTelemetry), its readiness (the store asked, each broker and the relay link as listen's own lines
 * said them), and the port of its own that serves them. Made only when listen has --metrics, --inspect
 * or the OTEL_* variables: a plain listen loads none of it.
 */

export interface ListenWatchOptions {
  /** `--metrics ADDR`. */
  metrics?: HostPort;
  /** The OTEL_* variables ask for traces. */
  tracing: boolean;
  env: Record<string, string | undefined>;
  now: number;
  version: string;
  /** A warning line (traces that could not be sent). */
  warn(text: string): void;
}

/** What the port serves once listen runs: its store, its sinks, its receiver's bytes in flight, its run watch. */
export interface Serving {
  store: PairStore;
  sinks?: readonly Sink[];
  inflight?: { readonly used: number; readonly max: number };
  /** `--relay`: the link is a check too. */
  relay: boolean;
  /** `--watch-runs`: the notifications late now. */
  late?: () => { type: string; model: string }[];
}

/** A store probed for /readyz: a pair no delivery has, looked at (in PostgreSQL, a statement on its table). */
const PROBE = ['wxhooks-readyz', 'readyz'] as const;

export class ListenWatch {
  readonly figures: ListenFigures;
  /** Given to listen's receiving (src/receiver/receive.ts): with --metrics or traces only. */
  receive?: ReceiveWatch;
  private tracing?: Tracing;
  private server?: RunningObserveServer;
  private storeLost?: string;
  private readonly sinksLost = new Map<string, string>();
  private relayDown?: string = 'not connected yet';
  private serving?: Serving;

  constructor(private readonly o: ListenWatchOptions) {
    this.figures = new ListenFigures(o.now);
  }

  /** Loads what the flags ask for: the SDK (traces), the steps' watch (--metrics or traces). */
  async start(): Promise<this> {
    if (this.o.tracing) {
      const { startSdk } = await import('./sdk.js');
      this.tracing = await startSdk(this.o.env, { service: 'wxhooks-listen', version: this.o.version, warn: this.o.warn });
    }
    if (this.o.metrics || this.o.tracing) {
      const { receiveWatch } = await import('./receive-watch.js');
      this.receive = receiveWatch({ figures: this.o.metrics ? this.figures : undefined, tracing: this.o.tracing });
    }
    return this;
  }

  /** Where traces go, for listen's ready line. */
  get traces(): Tracing | undefined {
    return this.tracing;
  }

  /** One request's report (listen's onEvent). */
  event(e: ReceiverEvent): void {
    this.figures.event(e);
  }

  /** One of listen's own notices (its `event` field): what they say of the store and the brokers. */
  said(e: Record<string, unknown>): void {
    switch (e.event) {
      case 'store_lost':
        this.storeLost = `unreachable: ${String(e.reason ?? '?')}`;
        return;
      case 'store_restored':
        this.storeLost = undefined;
        return;
      case 'sink_lost':
        this.sinksLost.set(String(e.sink), `unreachable: ${String(e.reason ?? '?')}`);
        return;
      case 'sink_restored':
        this.sinksLost.delete(String(e.sink));
        return;
    }
  }

  /** The link with the relay (--relay): open (undefined), or why it is not. */
  relayLink(down: string | undefined): void {
    this.relayDown = down;
  }

  /** What /readyz asks: the store (probed now), each broker, the relay link. */
  checks(): ReadyCheck[] {
    const s = this.serving;
    if (!s) return [{ name: 'listen', check: () => 'starting' }];
    const checks: ReadyCheck[] = [
      {
        name: 'store',
        check: async () => {
          if (!s.store.peek) return this.storeLost;
          try {
            await s.store.peek(...PROBE);
            return undefined;
          } catch (err) {
            return err instanceof Error ? err.message : String(err);
          }
        },
      },
    ];
    for (const sink of s.sinks ?? []) checks.push({ name: `sink ${sink.where}`, check: () => (sink.connected ? undefined : (this.sinksLost.get(sink.where) ?? 'unreachable')) });
    if (s.relay) checks.push({ name: 'relay', check: () => this.relayDown });
    return checks;
  }

  /** Every series `/metrics` exposes: the run's, and what is read when asked (the bytes in flight, the brokers, the relay link). */
  series(): Series[] {
    const s = this.serving;
    const up = (v: boolean) => (v ? 1 : 0);
    return [
      ...this.figures.series(),
      new Gauge('wxhooks_inflight_bytes', 'Body bytes held now by requests being read and processed.', [], () => [[[], s?.inflight?.used ?? 0]]),
      new Gauge('wxhooks_inflight_limit_bytes', 'The body bytes all requests together may hold (--max-inflight).', [], () => [[[], s?.inflight?.max ?? 0]]),
      new Gauge('wxhooks_store_up', 'Whether the processed pairs could be reached when last used (1) or not (0).', [], () => [[[], up(this.storeLost === undefined)]]),
      new Gauge('wxhooks_sink_up', 'Whether each broker (--sink) is connected (1) or not (0).', ['sink'], () => (s?.sinks ?? []).map((k) => [[sinkLabel(k)], up(k.connected)])),
      ...(s?.relay ? [new Gauge('wxhooks_relay_link_up', "Whether listen's link to the relay (--relay) is open (1) or not (0).", [], () => [[[], up(this.relayDown === undefined)]])] : []),
    ];
  }

  /** Once listen takes deliveries: serves /healthz, /readyz and /metrics with --metrics; returns where. */
  async serve(s: Serving): Promise<RunningObserveServer | undefined> {
    this.serving = s;
    if (s.late) this.figures.lateNow = s.late;
    const at = this.o.metrics;
    if (!at) return undefined;
    const { startObserveServer } = await import('./serve.js');
    try {
      this.server = await startObserveServer({ ...at, door: 'listen', version: this.o.version, series: () => this.series(), checks: () => this.checks() });
    } catch (err) {
      if (err instanceof BindError)
        throw new BindError(err.message.replace(/^Port/, '--metrics: port'), { hint: 'Give --metrics another port (0 picks a free one).', reason: err.reason, port: err.port, host: err.host });
      throw err;
    }
    return this.server;
  }

  /** Stops serving, and sends the spans still pending (after the receiver's last delivery). */
  async close(): Promise<void> {
    await this.server?.close();
    await this.tracing?.stop();
  }
}

/** listen's watch, when its flags or the environment ask for one; nothing (and nothing loaded) otherwise. */
export async function watchListen(o: ListenWatchOptions & { inspect: boolean }): Promise<ListenWatch | undefined> {
  if (!o.metrics && !o.tracing && !o.inspect) return undefined;
  return new ListenWatch(o).start();
}
