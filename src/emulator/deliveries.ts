import { Agent, request } from 'undici';
import { filtersMatch } from '../delivery/forecast.js';
import { networkReason, readStart } from '../util/net.js';
import { buildPayload } from '../signing/payload.js';
import { newTriggerId, signDelivery } from '../signing/sign.js';
import { syntheticResponse, type PublishedEvent } from './responses.js';
import * as DEFAULTS from '../delivery/defaults.js';

export { filtersMatch };
import type { DeliveryAttempt, EmuSubscription, EmuWebhook, EmulatorState } from './state.js';

export type { PublishedEvent };

export interface Notification {
  webhook: EmuWebhook;
  subscription: EmuSubscription;
  type: string;
  triggerId: string;
  body: Buffer;
  test: boolean;
}

export interface SchedulerOptions {
  /** Delays before the retries (three by default: 5 s, 30 s, 2 min). */
  retryDelays: number[];
  /** An attempt with no answer by then has failed (10 s). */
  attemptTimeoutMs?: number;
  /** Attempts in flight at once, across every webhook (64). */
  concurrency?: number;
  /** `live`: the ids in a delivery's body are integers, as the live API gives them. */
  shape?: 'documented' | 'live';
  /** Called once per attempt, once it is recorded (the emulator's terminal shows each). */
  onAttempt?: (attempt: DeliveryAttempt) => void;
}

/** At most `limit` at once; the others wait their turn, in order. */
class Slots {
  private used = 0;
  private readonly queue: (() => void)[] = [];
  constructor(private readonly limit: number) {}

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.used >= this.limit) await new Promise<void>((resolve) => this.queue.push(resolve));
    else this.used++;
    try {
      return await work();
    } finally {
      const next = this.queue.shift();
      if (next) next();
      else this.used--;
    }
  }
}

export function payloadFor(hook: EmuWebhook, sub: EmuSubscription, event: PublishedEvent, triggerId: string, test: boolean, shape: SchedulerOptions['shape'] = 'documented'): Buffer {
  const data: Record<string, unknown> = { model: event.model, initialization_time: event.initialization_time };
  if (event.forecast_hour !== undefined) data.forecast_hour = event.forecast_hour;
  if (event.event_type !== undefined) data.event_type = event.event_type;
  if (sub.response_options) data.response = syntheticResponse(sub.response_options, event, triggerId);
  const id = (value: string) => (shape === 'live' ? Number(value) : value);
  return buildPayload({ type: event.type, webhookId: id(hook.id), subscriptionId: id(sub.id), triggerId, test, data });
}

/** Sends notifications: each attempt signed afresh, failures retried with growing delays, every attempt recorded. */
export class DeliveryScheduler {
  private readonly agent = new Agent({ keepAliveTimeout: 4_000 });
  private readonly timers = new Set<NodeJS.Timeout>();
  private readonly slots: Slots;
  private closed = false;

  constructor(
    private readonly state: EmulatorState,
    private readonly options: SchedulerOptions,
  ) {
    this.slots = new Slots(options.concurrency ?? DEFAULTS.emulatorConcurrency);
  }

  /** Every active subscription of the event's type whose filters match: one notification each, one trigger id for all. */
  notificationsFor(event: PublishedEvent): Notification[] {
    const triggerId = newTriggerId();
    const out: Notification[] = [];
    for (const hook of this.state.webhooks.values()) {
      if (!hook.active) continue;
      for (const sub of hook.subscriptions) {
        if (sub.type !== event.type || !filtersMatch(sub.filters, event)) continue;
        out.push({ webhook: hook, subscription: sub, type: event.type, triggerId, body: payloadFor(hook, sub, event, triggerId, false, this.options.shape), test: false });
      }
    }
    return out;
  }

  /**
   * One attempt: POST the bytes with fresh signature headers; never throws. It waits for a free slot
   * first (`concurrency`), and its time starts when its request is sent, not while it waits. The
   * outcome is the status line's; of the answer only its start is read, so a receiver that answers
   * without end costs nothing.
   */
  attempt(n: Notification, attemptNo: number): Promise<Omit<DeliveryAttempt, 'id'>> {
    return this.slots.run(async () => {
      const started = Date.now();
      const headers = {
        'content-type': 'application/json',
        'user-agent': 'wxhooks-emulator',
        ...signDelivery({ secret: n.webhook.secret, body: n.body, triggerId: n.triggerId }),
      };
      const base = {
        webhook_id: n.webhook.id,
        subscription_id: n.subscription.id,
        trigger_id: n.triggerId,
        type: n.type,
        test: n.test,
        attempt: attemptNo,
        url: n.webhook.url,
        started_at: new Date(started).toISOString(),
      };
      const timeout = this.options.attemptTimeoutMs ?? DEFAULTS.emulatorAttemptTimeoutMs;
      try {
        const res = await request(n.webhook.url, {
          method: 'POST',
          headers,
          body: n.body,
          dispatcher: this.agent,
          signal: AbortSignal.timeout(timeout),
          headersTimeout: timeout,
          bodyTimeout: timeout,
        });
        const ok = res.statusCode >= 200 && res.statusCode < 300;
        const text = (await readStart(res.body)).slice(0, 200);
        return { ...base, duration_ms: Date.now() - started, outcome: ok ? 'delivered' : 'failed', status: res.statusCode, response: text };
      } catch (err) {
        return { ...base, duration_ms: Date.now() - started, outcome: 'failed', error: networkReason(err, timeout) };
      }
    });
  }

  /**
   * Delivers a notification: the first attempt now (its result returned), then
   * up to three retries in the background with the configured delays.
   */
  async deliver(n: Notification, attemptNo = 1): Promise<DeliveryAttempt> {
    const result = await this.attempt(n, attemptNo);
    const retryIndex = attemptNo - 1;
    const delay = this.options.retryDelays[retryIndex];
    const retry = !n.test && result.outcome === 'failed' && delay !== undefined && !this.closed;
    const recorded = this.state.record(retry ? { ...result, next_attempt_at: new Date(Date.now() + delay).toISOString() } : result);
    this.options.onAttempt?.(recorded);
    if (retry) {
      const timer = setTimeout(() => {
        this.timers.delete(timer);
        // the webhook may have been deleted or switched off meanwhile
        const hook = this.state.webhooks.get(n.webhook.id);
        if (!hook?.active || !hook.subscriptions.some((s) => s.id === n.subscription.id)) return;
        void this.deliver({ ...n, webhook: hook }, attemptNo + 1);
      }, delay);
      this.timers.add(timer);
    }
    return recorded;
  }

  async close(): Promise<void> {
    this.closed = true;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    await this.agent.close().catch(() => undefined);
  }
}
