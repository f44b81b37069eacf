import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openStore } from '../../src/index.js';
import { app, delivery, SECRET } from '../helpers/handler.js';
import { sharedPostgres, type SharedPostgres } from '../helpers/services.js';

// The handler library's PostgreSQL store (the rest of the library: test/handler.test.ts), on a database
// of this file's own on the run's server.

describe('openStore(postgres://): two instances of an app on one database', () => {
  let pg: SharedPostgres;
  beforeAll(async () => void (pg = await sharedPostgres()));
  afterAll(() => pg?.remove());

  it('a delivery sent to both, at once and again, is processed once', async () => {
    const stores = [await openStore(pg.url, { schema: 'handler_test' }), await openStore(pg.url, { schema: 'handler_test' })];
    try {
      const apps = stores.map((store) => app({ secret: SECRET, store }));
      const triggers = Array.from({ length: 20 }, (_, i) => `trg_pg_${i}`);
      const receipts = await Promise.all(triggers.flatMap((t) => apps.map((a) => a.webhooks.verifyAndReceive(delivery(t)))));
      // at once: one of the two processes it, the other finds it done or still held (409: the service retries)
      expect(receipts.filter((r) => r.outcome === 'accepted')).toHaveLength(20);
      const again = await Promise.all(triggers.map((t) => apps[1]!.webhooks.verifyAndReceive(delivery(t))));
      expect(again.every((r) => r.outcome === 'duplicate')).toBe(true);
      expect([...apps[0]!.seen, ...apps[1]!.seen].sort()).toEqual(triggers.map((t) => `${t} +6h`).sort());
    } finally {
      for (const s of stores) await s.close();
    }
  }, 60_000);
});
