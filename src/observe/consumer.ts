import type { PairStore } from '../delivery/store.js';
import type { ConsumedMessage, ConsumerEvent, VerifiedMessage } from '../sinks/consumer.js';
import type { ConnectionListener, ConsumeOptions, SinkConsumer } from '../sinks/sink.js';
import { hostPort } from '../util/parse.js';
import { BOUNDS, Counter, Gauge, Histogram, type Series } from './series.js';
import { watchedStore } from './steps.js';
import { carried, endSpan, inSpanOf, ROOT_CONTEXT, startSpan, type Span } from './trace.js';

/**
 * A stream worker (`webhooks.consume`) seen from outside: a span per message, the child of the receiver's
 * publish (the message's `traceparent`), which the app's handlers run inside; its figures (messages by
 * outcome, dead letters by cause, retries, in flight, how long a message waited in the stream, the
 * handlers' time); and, with the `metrics` option, /healthz, /readyz (the broker, the store) and
 * /metrics on a port of its own (prom-client and the server loaded only then).
 */

/** The outcomes after which a message's work is over (in_progress and store_failed are tried again here). */
const FINAL = new Set(['accepted', 'duplicate', 'dead_lettered', 'handler_failed', 'handler_timed_out']);

export class ConsumerWatch {
  readonly messages: Counter = new Counter('wxhooks_consumer_messages_total', "Messages a worker finished with, by group and outcome (the consumer's outcomes).", ['group', 'outcome']);
  readonly deadLetters: Counter = new Counter('wxhooks_consumer_dead_letters_total', 'Messages moved to the dead letters, by group and cause.', ['group', 'cause']);
  readonly retries: Counter = new Counter('wxhooks_consumer_retries_total', 'Messages given back or kept to be tried again, by group and outcome.', ['group', 'outcome']);
  readonly lag: Histogram = new Histogram('wxhooks_consumer_lag_seconds', 'How long a message waited in the stream (the broker stored it, a worker took it), by group.', ['group'], BOUNDS.stream);
  readonly handlers: Histogram = new Histogram('wxhooks_consumer_handler_duration_seconds', "How long the app's handlers took, by group and outcome.", ['group', 'outcome'], BOUNDS.call);
  private inflight = 0;
  private brokerLost?: string;
  /** Each message's span, from its check to its end, by the broker's id. */
  private readonly spans = new Map<string, Span>();

  constructor(
    readonly group: string,
    private readonly store: PairStore | undefined,
    private readonly now: () => number = Date.now,
  ) {}

  /** The consumer's options, each hook watched: the check starts the message's span, the handlers run in it, the report ends it. */
  options<V extends VerifiedMessage>(o: ConsumeOptions<V>): ConsumeOptions<V> {
    const g = [this.group];
    return {
      ...o,
      store: o.store && watchedStore(o.store),
      verify: o.verify && ((m: ConsumedMessage) => inSpanOf(this.begin(m), () => o.verify!(m))),
      handler: (m, verified, signal) => {
        this.inflight++;
        const done = () => void this.inflight--;
        try {
          const r = inSpanOf(this.spans.get(m.id), () => o.handler(m, verified, signal));
          if (r && typeof (r as PromiseLike<unknown>).then === 'function') (r as Promise<unknown>).then(done, done);
          else done();
          return r;
        } catch (error) {
          done();
          throw error;
        }
      },
      onEvent: (e: ConsumerEvent) => {
        if (FINAL.has(e.outcome)) this.messages.inc([...g, e.outcome]);
        if (e.outcome === 'dead_lettered') this.deadLetters.inc([...g, e.cause ?? 'unknown']);
        else if (e.retryInMs !== undefined) this.retries.inc([...g, e.outcome]);
        if (e.ms !== undefined) this.handlers.observe([...g, e.outcome], e.ms / 1000);
        this.ended(e);
        o.onEvent?.(e);
      },
      onConnection: ((state, reason) => {
        this.brokerLost = state === 'lost' ? `unreachable: ${reason ?? '?'}` : undefined;
        o.onConnection?.(state, reason);
      }) satisfies ConnectionListener,
    };
  }

  /** A message taken: its span begun (a child of the receiver's publish, when the message carries its trace), its wait measured. */
  private begin(m: ConsumedMessage): Span {
    this.lag.observe([this.group], Math.max(0, this.now() - m.storedAt) / 1000);
    this.spans.get(m.id)?.end();
    const span = startSpan('wxhooks.consume', {
      kind: 'consumer',
      parent: m.trace ? carried(m.trace, ROOT_CONTEXT) : ROOT_CONTEXT,
      attributes: { 'wxhooks.door': 'consumer', 'messaging.consumer.group.name': this.group, 'messaging.message.id': m.id, 'wxhooks.deliveries': m.deliveries },
    });
    this.spans.set(m.id, span);
    return span;
  }

  private ended(e: ConsumerEvent): void {
    const span = this.spans.get(e.id);
    if (!span) return;
    if (!FINAL.has(e.outcome)) {
      span.addEvent(e.outcome, e.retryInMs !== undefined ? { 'wxhooks.retry_in_ms': e.retryInMs } : undefined);
      return;
    }
    this.spans.delete(e.id);
    const [subscription, trigger] = (e.key ?? '').split('/').map((p) => decodeURIComponent(p));
    endSpan(span, {
      outcome: e.outcome,
      type: e.type,
      ...(e.key ? { trigger, subscription } : {}),
      reason: e.cause,
      status: e.outcome === 'handler_failed' || e.outcome === 'handler_timed_out' ? 500 : undefined,
    });
  }

  /** Every series `/metrics` exposes. */
  series(): Series[] {
    return [
      this.messages,
      this.deadLetters,
      this.retries,
      this.lag,
      this.handlers,
      new Gauge('wxhooks_consumer_inflight', 'Messages whose handlers are running now, by group.', ['group'], () => [[[this.group], this.inflight]]),
      new Gauge('wxhooks_consumer_broker_up', 'Whether the broker is connected (1) or not (0), by group.', ['group'], () => [[[this.group], this.brokerLost === undefined ? 1 : 0]]),
    ];
  }

  /** The worker started: with `metrics`, its port served; its stop closes the port and ends the spans still open. */
  async started(consumer: SinkConsumer, metrics: string | number | undefined, version: string): Promise<SinkConsumer> {
    let close: () => Promise<void> = async () => undefined;
    if (metrics !== undefined) {
      const at = hostPort(String(metrics), 'metrics');
      const { startObserveServer } = await import('./serve.js');
      const server = await startObserveServer({
        ...at,
        door: 'consumer',
        version,
        series: () => this.series(),
        checks: () => [
          { name: 'broker', check: () => this.brokerLost },
          ...(this.store?.peek ? [{ name: 'store', check: async () => void (await this.store!.peek!('wxhooks-readyz', 'readyz')) }] : []),
        ],
      });
      close = () => server.close();
      Object.defineProperty(consumer, 'metricsUrl', { value: server.url, enumerable: true });
    }
    const stop = consumer.stop.bind(consumer);
    return Object.assign(consumer, {
      stop: async (options?: { timeoutMs?: number }) => {
        await stop(options);
        for (const span of this.spans.values()) span.end();
        this.spans.clear();
        await close();
      },
    });
  }
}
