import { signDelivery } from '../../src/signing/index.js';
import type { ReceiverEvent } from '../../src/receiver/event.js';
import { startReceiver, type RawDelivery, type ReceiverOptions, type RunningReceiver } from '../../src/receiver/server.js';
import { Verifier } from '../../src/signing/verify.js';
import { FilePairStore } from '../../src/store/file-pairs.js';
import type { PairStore } from '../../src/delivery/store.js';
import { systemClock, type Clock } from '../../src/util/clock.js';
import { tempDir } from './cli.js';

export const TEST_SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');

/** A receiver in this process: real sockets on 127.0.0.1, a real store, every report kept. */
export interface TestReceiver {
  url: string;
  port: number;
  receiver: RunningReceiver;
  store: PairStore;
  events: ReceiverEvent[];
  raws: (RawDelivery | undefined)[];
  /** The first report (from index `from` on) that `match` accepts, as soon as it is made. */
  waitFor(match: (e: ReceiverEvent) => boolean, from?: number): Promise<ReceiverEvent>;
  close(): Promise<void>;
}

export interface TestReceiverOptions extends Partial<Omit<ReceiverOptions, 'verifier' | 'store' | 'onEvent'>> {
  secret?: string;
  /** The store (default: a file store in a new folder, on the same clock). */
  store?: PairStore;
  dir?: string;
  ttlMs?: number;
  diagnosePerMinute?: number;
  onEvent?: ReceiverOptions['onEvent'];
}

export async function startTestReceiver(o: TestReceiverOptions = {}): Promise<TestReceiver> {
  const clock: Clock = o.clock ?? systemClock;
  const store = o.store ?? (await FilePairStore.open({ dir: o.dir ?? tempDir(), ttlMs: o.ttlMs ?? 86_400_000, clock }));
  const events: ReceiverEvent[] = [];
  const raws: (RawDelivery | undefined)[] = [];
  const waiters = new Set<() => void>();
  const receiver = await startReceiver({
    port: 0,
    host: '127.0.0.1',
    path: '/',
    maxBody: 25 * 1024 * 1024,
    maxInflight: 256 * 1024 * 1024,
    forwardTimeoutMs: 10_000,
    readTimeoutMs: 10_000,
    keepsRaw: true,
    ...o,
    clock,
    verifier: new Verifier({ secret: o.secret ?? TEST_SECRET, diagnosePerMinute: o.diagnosePerMinute ?? Infinity }),
    store,
    onEvent(event, raw) {
      events.push(event);
      raws.push(raw);
      o.onEvent?.(event, raw);
      for (const wake of waiters) wake();
    },
  });
  return {
    url: `http://127.0.0.1:${receiver.port}/`,
    port: receiver.port,
    receiver,
    store,
    events,
    raws,
    waitFor(match, from = 0) {
      return new Promise((resolve) => {
        const look = () => {
          const found = events.slice(from).find(match);
          if (!found) return;
          waiters.delete(look);
          resolve(found);
        };
        waiters.add(look);
        look();
      });
    },
    async close() {
      await receiver.close();
      if (!o.store) await store.close();
    },
  };
}

/** A forecast_hour.available delivery's body and headers, signed as the service signs (at the clock's time, or now). */
export function signed(
  trigger: string,
  extra: { secret?: string; subscription?: string; data?: Record<string, unknown>; timestamp?: number; body?: Record<string, unknown> } = {},
): { headers: Record<string, string>; body: Buffer } {
  const body = Buffer.from(
    JSON.stringify({
      type: 'forecast_hour.available',
      webhook_id: '1',
      subscription_id: extra.subscription ?? '1',
      trigger_id: trigger,
      data: extra.data ?? { model: 'wm-6', forecast_hour: 0 },
      ...extra.body,
    }),
  );
  const headers = { 'content-type': 'application/json', ...(signDelivery({ secret: extra.secret ?? TEST_SECRET, body, triggerId: trigger, timestamp: extra.timestamp }) as Record<string, string>) };
  return { headers, body };
}
