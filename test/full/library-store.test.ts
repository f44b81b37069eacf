import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { startRedis, type Broker } from '../../scripts/harness.js';
import { signDelivery, Webhooks, type PairStore } from '../../src/index.js';
import { tempDir } from '../helpers/cli.js';
import { doc } from '../helpers/guide.js';

// docs/library.md's "A store of your own": its RedisPairStore, taken from the page as written, against a
// real Redis (the machine's redis-server, thrown away after), held to the PairStore contract and then
// given to Webhooks, as an app would.

type RedisClient = { connect(): Promise<RedisClient>; pTTL(key: string): Promise<number>; get(key: string): Promise<string | null>; close(): Promise<void> };
type StoreClass = new (redis: RedisClient, options?: { prefix?: string; ttlMs?: number; leaseMs?: number }) => PairStore;

let broker: Broker;
let RedisPairStore: StoreClass;
const clients: RedisClient[] = [];
const client = async () => {
  const { createClient } = (await import('redis')).default as unknown as { createClient(o: { url: string }): RedisClient };
  const c = await createClient({ url: broker.url }).connect();
  clients.push(c);
  return c;
};

beforeAll(async () => {
  broker = await startRedis();
  const page = doc('docs/library.md');
  const code = /```js\n(\/\/ A PairStore over Redis[\s\S]*?)```/.exec(page)![1]!;
  const file = join(tempDir(), 'redis-pair-store.mjs');
  writeFileSync(file, code);
  ({ RedisPairStore } = (await import(pathToFileURL(file).href)) as { RedisPairStore: StoreClass });
}, 60_000);
afterAll(async () => {
  for (const c of clients) await c.close().catch(() => undefined);
  await broker?.remove();
});

it('the store keeps the contract: won, then held by another; extended; released and won again; done after complete, for the TTL', async () => {
  const redis = await client();
  const a = new RedisPairStore(redis, { prefix: 't1:', leaseMs: 30_000, ttlMs: 3_600_000 });
  const b = new RedisPairStore(await client(), { prefix: 't1:', leaseMs: 30_000, ttlMs: 3_600_000 });
  expect(a.leaseMs).toBe(30_000);
  expect(await a.claim('trg_1', '7')).toBe('won');
  expect(await b.claim('trg_1', '7')).toBe('held'); // another instance, the same database
  const key = 't1:7/trg_1';
  expect(await redis.pTTL(key)).toBeLessThanOrEqual(30_000); // the lease: a holder that dies lets it run out
  expect(await b.extend('trg_1', '7')).toBe(false); // not b's claim
  expect(await a.extend('trg_1', '7')).toBe(true);
  await b.release('trg_1', '7'); // not b's to let go
  expect(await b.claim('trg_1', '7')).toBe('held');
  await a.release('trg_1', '7');
  expect(await redis.get(key)).toBeNull();
  expect(await b.claim('trg_1', '7')).toBe('won');
  await b.complete('trg_1', '7');
  expect(await a.claim('trg_1', '7')).toBe('done');
  expect(await redis.get(key)).toBe('done');
  expect(await redis.pTTL(key)).toBeGreaterThan(3_500_000);
  // ids as a store gets them: percent-encoded in the key, never able to reach another pair's
  expect(await a.claim('trg/2', '7/x')).toBe('won');
  expect(await redis.get('t1:7%2Fx/trg%2F2')).toMatch(/^claim:/);
});

it('given to Webhooks: a delivery sent twice runs its handler once; a handler that throws lets the retry run it again', async () => {
  const secret = 'whsec_' + Buffer.alloc(32, 5).toString('base64');
  const webhooks = new Webhooks({ secret, store: new RedisPairStore(await client(), { prefix: 't2:' }) });
  const ran: string[] = [];
  let fail = true;
  webhooks.on('forecast_hour.available', async (event) => {
    ran.push(event.id);
    if (event.id === 'trg_throws' && fail) {
      fail = false;
      throw new Error('the database blinked');
    }
  });
  webhooks.onError(() => undefined);
  const deliver = (trigger: string) => {
    const body = JSON.stringify({
      type: 'forecast_hour.available',
      webhook_id: '1',
      subscription_id: '1',
      trigger_id: trigger,
      created_at: new Date().toISOString(),
      test: false,
      data: { model: 'wm-6', initialization_time: '2026-11-22T00:00:00Z', forecast_hour: 6 },
    });
    return webhooks.verifyAndReceive({ headers: signDelivery({ secret, body, triggerId: trigger }), body });
  };
  expect(await deliver('trg_once')).toMatchObject({ status: 200, outcome: 'accepted' });
  expect(await deliver('trg_once')).toMatchObject({ status: 200, outcome: 'duplicate' });
  expect(await deliver('trg_throws')).toMatchObject({ status: 500, outcome: 'handler_failed' });
  expect(await deliver('trg_throws')).toMatchObject({ status: 200, outcome: 'accepted' });
  expect(ran).toEqual(['trg_once', 'trg_throws', 'trg_throws']);
});
