import type { Subscription, Webhook } from '../api/normalize.js';
import type { Service } from '../api/service.js';
import { checkShows } from '../delivery/outcomes.js';
import { DeliveryFailedError, WxError } from '../errors.js';
import { formatDuration } from '../util/duration.js';
import type { ReceiverEvent } from './event.js';

/** What the reports of a running receiver said, for `--check` and `doctor` to wait on. */
export class EventLog {
  private readonly events: ReceiverEvent[] = [];
  private pushed = 0;
  private readonly waiters = new Set<() => void>();

  push(event: ReceiverEvent): void {
    this.pushed++;
    this.events.push(event);
    // kept short: a check looks only at what arrives after its ping (trimmed by half, so rarely)
    if (this.events.length > 2000) this.events.splice(0, 1000);
    for (const wake of this.waiters) wake();
  }

  /** The first event from index `from` on that `match` accepts, waiting for it at most `timeoutMs`. */
  /** How many events have been pushed in all (a position that trimming does not move). */
  get count(): number {
    return this.pushed;
  }

  async find(match: (e: ReceiverEvent) => boolean, from: number, timeoutMs: number): Promise<ReceiverEvent | undefined> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.slice(Math.max(0, from - (this.pushed - this.events.length))).find(match);
      if (found || Date.now() >= deadline) return found;
      await new Promise<void>((resolve) => {
        const wake = () => {
          this.waiters.delete(wake);
          clearTimeout(timer);
          resolve();
        };
        const timer = setTimeout(wake, deadline - Date.now());
        this.waiters.add(wake);
      });
    }
  }
}

/** What a ping through the service showed of one link of the chain. */
export type ChainResult = 'verified' | 'not_verified' | 'not_arrived' | 'refused';

export interface SubscriptionCheck {
  subscription_id: string;
  type: string;
  result: ChainResult;
  detail: string;
  hint?: string;
}

/**
 * Pings each subscription of the webhook through the service, one at a time, and says for each which of
 * these happened: the service refused the ping; it accepted it but no delivery reached this receiver
 * within `timeoutMs` (the URL does not lead here); a delivery arrived but did not verify; it verified.
 */
export async function checkChain(service: Service, hook: Webhook, log: EventLog, timeoutMs: number, where: { port: number; path: string }): Promise<SubscriptionCheck[]> {
  const out: SubscriptionCheck[] = [];
  for (const sub of hook.subscriptions) out.push(await checkOne(service, hook, sub, log, timeoutMs, where));
  return out;
}

async function checkOne(service: Service, hook: Webhook, sub: Subscription, log: EventLog, timeoutMs: number, where: { port: number; path: string }): Promise<SubscriptionCheck> {
  const from = log.count;
  let refused: WxError | undefined;
  try {
    await service.ping(hook.id, sub.id);
  } catch (err) {
    if (!(err instanceof WxError)) throw err;
    refused = err;
  }
  // what each outcome shows of the chain is its row's (src/delivery/outcomes.ts: `check`)
  const relevant = (e: ReceiverEvent) => (checkShows(e.outcome) === 'verified' && e.subscription_id === sub.id) || checkShows(e.outcome) === 'not_verified';
  // a refused ping has already had its one attempt: what it sent here, if anything, has been reported
  const arrived = await log.find(relevant, from, refused ? 300 : timeoutMs);
  const base = { subscription_id: sub.id, type: sub.type };
  if (arrived && checkShows(arrived.outcome) === 'verified') {
    return { ...base, result: 'verified', detail: `a test delivery arrived and verified (layout ${arrived.layout ?? '?'})` };
  }
  if (arrived) {
    const detail =
      arrived.outcome === 'not_found' || arrived.outcome === 'method_not_allowed'
        ? `a delivery arrived at ${arrived.method} ${arrived.path}, but this receiver serves POST ${where.path}`
        : `a delivery arrived but did not verify: ${arrived.message ?? arrived.reason ?? arrived.outcome}`;
    return {
      ...base,
      result: 'not_verified',
      detail,
      hint: arrived.hint ?? (arrived.outcome === 'not_found' ? `Point the webhook at …${where.path}, or listen with --path ${arrived.path}.` : undefined),
    };
  }
  if (refused) {
    // a failed delivery (the service's answer to a ping whose delivery failed) is not a refused ping
    const undelivered = refused instanceof DeliveryFailedError;
    return {
      ...base,
      result: 'refused',
      detail: undelivered
        ? `the service took the ping but could not deliver it: ${refused.serviceMessage ?? refused.message}`
        : `the service refused the ping: ${refused.serviceMessage ?? refused.message}`,
      hint: refused.status !== undefined && refused.status >= 500 ? "A 5xx from a ping means the service could not deliver to the webhook's URL." : refused.hint,
    };
  }
  return {
    ...base,
    result: 'not_arrived',
    detail: `the ping was accepted, but no delivery reached this receiver within ${formatDuration(timeoutMs)}`,
    hint: `The webhook's URL (${hook.url}) does not lead here: is the tunnel up, and forwarding to port ${where.port}?`,
  };
}
