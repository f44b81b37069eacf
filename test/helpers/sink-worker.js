// A worker of a sink's consumer group in a process of its own, for the tests where the process is the
// point (several workers at once, a worker killed with SIGKILL). It runs the built module (dist/).
// argv[2]: JSON { url, group, secret, store?: { url, schema, leaseMs }, hang?: key, concurrency?, retryDelayMs?,
// claimTimeoutMs?, maxDeliveries? }. `hang`: the handler of that key never resolves on its first delivery.
// Each message is verified with `secret` as of when the broker stored it, its pair taken from what is
// signed (as a worker's own code would, with the library's signing functions).
// stdout, one JSON object a line: {"ready":name}; {"started":key,"deliveries":n} for `hang`'s key;
// {"done":key} when a handler resolved; {"outcome":…} for every consumer event but accepted.
// SIGTERM: stops (the handlers under way finish), then exits 0.
import { pairFrom } from '../../dist/delivery/pair.js';
import { verifyDelivery } from '../../dist/signing/index.js';
import { consume, MessageRefusedError } from '../../dist/sinks/index.js';

const o = JSON.parse(process.argv[2]);
let pending = '';
const out = (value) => {
  // lines of one turn written together: 20,000 writes of their own cost the test seconds
  if (!pending) {
    setImmediate(() => {
      process.stdout.write(pending);
      pending = '';
    });
  }
  pending += `${JSON.stringify(value)}\n`;
};
let store;
if (o.store) {
  const { PgStore } = await import('../../dist/store/postgres.js');
  store = await PgStore.open({ url: o.store.url, schema: o.store.schema, ttlMs: 3_600_000, leaseMs: o.store.leaseMs });
}
const consumer = await consume(o.url, {
  group: o.group,
  store,
  concurrency: o.concurrency,
  retryDelayMs: o.retryDelayMs,
  claimTimeoutMs: o.claimTimeoutMs,
  maxDeliveries: o.maxDeliveries,
  verify: (m) => {
    const v = verifyDelivery({ secret: o.secret, headers: m.headers, body: m.body, now: m.storedAt });
    if (!v.ok) throw new MessageRefusedError(v.message);
    return { pair: pairFrom(v), type: v.payload.type, timestamp: v.timestamp };
  },
  handler: async (m) => {
    if (m.key === o.hang && m.deliveries === 1) {
      out({ started: m.key, deliveries: m.deliveries });
      await new Promise(() => undefined);
    }
    out({ done: m.key, deliveries: m.deliveries });
  },
  onEvent: (e) => {
    if (e.outcome !== 'accepted') out({ outcome: e.outcome, key: e.key, id: e.id, deliveries: e.deliveries, reason: e.reason, error: e.error ? String(e.error.message ?? e.error) : undefined });
  },
});
out({ ready: consumer.name });
process.on('SIGTERM', async () => {
  await consumer.stop();
  await store?.close();
  process.stdout.write(pending, () => process.exit(0));
});
