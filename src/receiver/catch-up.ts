import type { CatchUp } from '../api/catch-up.js';
import { CATCH_UP_HEADER } from '../delivery/forecast.js';
import { isDelivered, type Outcome } from '../delivery/outcomes.js';
import type { PairStore } from '../delivery/store.js';
import { signDelivery } from '../signing/sign.js';
import { Verifier } from '../signing/verify.js';
import type { Sink } from '../sinks/sink.js';
import type { Clock } from '../util/clock.js';
import { networkReason, readStart } from '../util/net.js';
import { makeReceive } from './receive.js';
import type { ForwardRoutes } from './routes.js';

/**
 * Handing catch-ups over, exactly once: to the `listen` that receives the webhook's deliveries when one
 * runs (posted to it, signed as the service signs, so that it verifies them, keeps each forecast once in
 * its store with the service's own deliveries, and forwards, routes, publishes, saves and shows them as it
 * does every delivery), or else here, through listen's own receiving (src/receiver/receive.ts) over the
 * store, to `--forward-to` and `--sink`. Either way a catch-up and the service's delivery of a forecast are
 * one notification: whichever comes first is handed over, the other is a duplicate.
 *
 * A catch-up is signed with the webhook's secret: its bytes were built by wxhooks from what the
 * authenticated webhook and forecast APIs answered, never from what a sender sent (DECISIONS.md, "Signing a catch-up").
 */

/** What became of one catch-up: the outcome listen (or the receiving here) reported, and why when it was not handed over. */
export interface HandedOver {
  catchUp: CatchUp;
  /** `accepted`: handed over now; `duplicate`: it had been already (by the service, or an earlier catch-up); anything else: not handed over. */
  outcome: Outcome | 'failed';
  status?: number;
  message?: string;
}

/** The headers of a catch-up, signed with the webhook's secret at `now` (whole seconds), and marked as one. */
export function signCatchUp(c: CatchUp, secret: string, now: number): Record<string, string> {
  const signed = signDelivery({ secret, body: c.body, triggerId: c.triggerId, timestamp: Math.floor(now / 1000) });
  return {
    'content-type': 'application/json',
    'trigger-id': signed['Trigger-Id'],
    'webhook-timestamp': signed['Webhook-Timestamp'],
    'webhook-signature': signed['Webhook-Signature'],
    [CATCH_UP_HEADER]: '1',
  };
}

/** What a listen's answer says became of a delivery (its body is the answers table's: src/delivery/answers.ts). */
function outcomeOf(status: number, text: string): { outcome: HandedOver['outcome']; message?: string } {
  let body: { ok?: boolean; duplicate?: boolean; error?: string; reason?: string } = {};
  try {
    body = JSON.parse(text) as typeof body;
  } catch {
    // not one of listen's answers: said as it came
  }
  if (status >= 200 && status < 300) return { outcome: body.duplicate ? 'duplicate' : 'accepted' };
  const message = body.error ?? (text.slice(0, 200) || `answered ${status}`);
  if (status === 409) return { outcome: 'in_progress', message };
  if (status === 502) return { outcome: body.reason === 'sink_refused' ? 'sink_failed' : 'forward_failed', message };
  if (status === 503) return { outcome: body.reason === 'sink_unavailable' ? 'sink_failed' : body.reason === 'overloaded' ? 'overloaded' : 'store_failed', message };
  if (status === 401) return { outcome: 'unverified', message: `${message} (does the listen verify with another secret than the one stored for this webhook?)` };
  return { outcome: 'failed', message: `listen answered ${status}: ${message}` };
}

/** Posts each catch-up to a running listen's receiver, one after another (in the order of the forecast), and says what it answered. */
export async function handToListen(url: string, catchUps: readonly CatchUp[], o: { secret: string; clock: Clock; timeoutMs: number }): Promise<HandedOver[]> {
  const { request } = await import('undici');
  const out: HandedOver[] = [];
  for (const c of catchUps) {
    try {
      const res = await request(url, {
        method: 'POST',
        headers: signCatchUp(c, o.secret, o.clock.now()),
        body: c.body,
        signal: AbortSignal.timeout(o.timeoutMs),
        headersTimeout: o.timeoutMs,
        bodyTimeout: o.timeoutMs,
      });
      const said = outcomeOf(res.statusCode, await readStart(res.body, 4096));
      out.push({ catchUp: c, status: res.statusCode, ...said });
    } catch (err) {
      out.push({ catchUp: c, outcome: 'failed', message: `the listen at ${url} could not be reached: ${networkReason(err, o.timeoutMs)}` });
    }
  }
  return out;
}

export interface HandHereOptions {
  store: PairStore;
  secret: string;
  clock: Clock;
  forwardTo?: string | ForwardRoutes;
  forwardTimeoutMs?: number;
  sinks?: readonly Sink[];
}

/** Hands each catch-up over here, through listen's own receiving over the store: once, to --forward-to and --sink. */
export async function handHere(catchUps: readonly CatchUp[], o: HandHereOptions): Promise<HandedOver[]> {
  const verifier = new Verifier({ secret: [o.secret], diagnosePerMinute: 0 });
  const { receive, close } = await makeReceive({ verifier, store: o.store, forwardTo: o.forwardTo, forwardTimeoutMs: o.forwardTimeoutMs, sinks: o.sinks, monotonic: () => o.clock.monotonic() });
  const out: HandedOver[] = [];
  try {
    for (const c of catchUps) {
      const now = o.clock.now();
      const r = await receive({ method: 'POST', path: '/', url: '/', headers: signCatchUp(c, o.secret, now), body: c.body, now, began: o.clock.monotonic() });
      const e = r.event;
      const why = e.forward?.error ?? (e.forward && !e.forward.ok ? `your app answered ${e.forward.status}` : undefined) ?? e.message;
      out.push({ catchUp: c, outcome: r.answer.outcome, status: r.answer.status, ...(isDelivered(r.answer.outcome) ? {} : { message: why }) });
    }
  } finally {
    await close();
  }
  return out;
}
