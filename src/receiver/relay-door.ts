import type { IncomingHttpHeaders } from 'node:http';
import { DEFAULTS } from '../delivery/defaults.js';
import { MAX_WINDOW } from '../relay/protocol.js';
import { RelayClient, type RelayClientEvent, type RelayedDelivery, type RelayReady } from '../relay/client.js';
import { systemClock, type Clock } from '../util/clock.js';
import { InflightBudget } from '../util/bodies.js';
import type { ReceiverEvent } from './event.js';
import { makeReceive, type RawDelivery, type Received, type ReceiveOptions } from './receive.js';
import type { RunningReceiver } from './server.js';

/**
 * listen's second door: a relay (src/relay/) instead of a port of its own. Each delivery the relay hands
 * over is received exactly as one that came over HTTP (src/receiver/receive.ts: verified again, claimed,
 * saved, forwarded, its pair stored, reported), and acknowledged to the relay only when the answer would
 * have been a 2xx (its pair stored, or a duplicate), or when it did not verify (it never will: reported
 * and let go, so that it does not hold the queue). Anything else (a store or a forward that failed) is
 * not acknowledged: the relay hands it over again.
 */

/** What the relay door takes: listen's receiving (the same options as its HTTP door's), and the relay's link. */
export interface RelayDoorOptions extends Omit<ReceiveOptions, 'monotonic'> {
  relay: string;
  token: string;
  channel: string;
  /** The webhook's secret, given to the relay (it verifies at the edge with it). */
  secrets: string[];
  temporary: boolean;
  maxInflight?: number;
  /**
   * How many deliveries are handled at once. Default: 1 with --forward-to (the app is given them in the
   * order the relay received them), else DEFAULTS.relayConcurrency (nothing is sent on, so nothing depends
   * on their order but the report lines, which a direct listen under load has out of order too).
   */
  concurrency?: number;
  clock?: Clock;
  onEvent: (event: ReceiverEvent, raw?: RawDelivery) => void;
  /** What happens to the link: connected, lost, unreachable, back. */
  onLink: (event: RelayClientEvent) => void;
}

export interface RunningRelayDoor extends RunningReceiver {
  ready: RelayReady;
  /** Rejects when the relay refuses this listen for good after it started (another one took the channel). */
  failed: Promise<never>;
}

/** Whether a delivery is let go at the relay: its pair is stored (or was), or it will never verify. */
export const acknowledged = (r: Pick<Received, 'verified' | 'answer'>) => !r.verified || (r.answer.status >= 200 && r.answer.status < 300);

/** The relay's headers as Node gives a request's: lower-cased, a repeated one joined. */
function nodeHeaders(headers: [string, string][]): IncomingHttpHeaders {
  const out: Record<string, string> = {};
  for (const [k, v] of headers) {
    const name = k.toLowerCase();
    out[name] = out[name] === undefined ? v : `${out[name]}, ${v}`;
  }
  return out;
}

/** A channel's inbound path, for the reports (where the delivery was sent). */
const inboundPath = (url: string) => new URL(url).pathname;

export async function startRelayDoor(o: RelayDoorOptions): Promise<RunningRelayDoor> {
  const clock = o.clock ?? systemClock;
  const maxInflight = o.maxInflight ?? DEFAULTS.maxInflightBytes;
  const copies = o.saveDir ? 2 : 1;
  const budget = new InflightBudget(maxInflight);
  const { receive, close: closeReceive } = await makeReceive({ ...o, monotonic: () => clock.monotonic() });
  let working = 0;
  let idle: (() => void) | undefined;
  let path = '/';

  async function onDelivery(d: RelayedDelivery): Promise<boolean> {
    const body = Buffer.from(d.body.buffer, d.body.byteOffset, d.body.byteLength);
    const held = body.length * copies;
    // the relay sends no more than the window; --max-inflight bounds it again here (one always goes)
    const took = budget.take(held);
    if (!took && working > 0) {
      budget.refused++;
      return false;
    }
    working++;
    try {
      const r = await receive({ method: 'POST', path, url: path, headers: nodeHeaders(d.headers), body, now: d.receivedAt, began: clock.monotonic(), peer: 'relay' });
      const ok = acknowledged(r);
      if (ok && !r.verified)
        r.event.message = `${r.event.message ?? 'not verified'} (the relay verified it: is its secret another one than this listen's?); acknowledged, so that it does not hold the queue.`;
      o.onEvent(r.event, r.raw);
      return ok;
    } finally {
      if (took) budget.give(held);
      if (--working === 0) idle?.();
    }
  }

  const client = new RelayClient({
    url: o.relay,
    token: o.token,
    channel: o.channel,
    secrets: o.secrets,
    temporary: o.temporary,
    window: MAX_WINDOW,
    windowBytes: Math.max(1, Math.floor(maxInflight / copies)),
    concurrency: o.concurrency ?? (o.forwardTo ? 1 : DEFAULTS.relayConcurrency),
    clock,
    onDelivery,
    onEvent: o.onLink,
  });
  path = inboundPath(client.inboundUrl);
  let ready: RelayReady;
  try {
    ready = await client.start();
  } catch (err) {
    await client.close();
    await closeReceive();
    throw err;
  }
  const failed = client.done.then(() => new Promise<never>(() => undefined));
  failed.catch(() => undefined);
  return {
    url: client.inboundUrl,
    port: 0,
    ready,
    failed,
    get refusedOverBudget() {
      return budget.refused;
    },
    async close() {
      // those being handled finish, their pairs stored and acknowledged; a temporary channel goes with its webhook
      await client.close({ deleteChannel: o.temporary });
      if (working) await new Promise<void>((resolve) => (idle = resolve));
      await closeReceive();
    },
  };
}
