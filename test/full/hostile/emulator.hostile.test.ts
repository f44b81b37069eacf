import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { memoryOf } from '../../helpers/memory.js';
import { startCli, type Running } from '../../helpers/process.js';

// What a hostile receiver of the emulator's deliveries can make the emulator hold: its memory, read from
// /proc, is the point (the built binary). The other hostile cases: test/hostile/emulator.hostile.test.ts.

const KEY = 'hostile_test_key_0123456789abcdef';

async function emulator(args: string[] = []): Promise<{ proc: Running; url: string; pid: number }> {
  const proc = startCli(['emulator', '--port', '0', '--json', '--api-key', KEY, '--client-id', 'tester', ...args]);
  const ready = await proc.waitFor<{ base_url: string }>((v) => typeof v.base_url === 'string');
  return { proc, url: ready.base_url, pid: proc.child.pid! };
}

const api = (url: string, path: string, init: { method?: string; body?: unknown; auth?: string } = {}) =>
  fetch(`${url}${path}`, {
    method: init.method ?? 'GET',
    headers: { authorization: init.auth ?? `Bearer ${KEY}`, 'content-type': 'application/json' },
    body: init.body === undefined ? undefined : typeof init.body === 'string' ? init.body : JSON.stringify(init.body),
  });

/** A receiver that answers 200 and then streams its answer without end, until the client goes away. */
async function endlessReceiver(): Promise<{ url: string; server: Server; closedByClient: () => number }> {
  let closed = 0;
  const server = createServer((req, res) => {
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    const chunk = Buffer.alloc(64 * 1024, 0x7a);
    const pump = () => {
      while (res.write(chunk));
    };
    res.on('drain', pump);
    res.on('close', () => closed++);
    pump();
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, server, closedByClient: () => closed };
}

const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

describe('hostile input: the emulator', () => {
  it('a receiver that answers 200 and streams without end: delivered (the status decides), its answer read only in part, memory bounded', async () => {
    const endless = await endlessReceiver();
    servers.push(endless.server);
    const emu = await emulator(['--retry-delays', '1s']);
    try {
      const created = await api(emu.url, '/webhooks/v1', { method: 'POST', body: { url: endless.url, subscriptions: { 'forecast_hour.available': {} } } });
      expect(created.status).toBe(201);
      const before = memoryOf(emu.pid).rss;
      const published = (await (await api(emu.url, '/emulator/v1/events', { method: 'POST', body: { type: 'forecast_hour.available' } })).json()) as {
        deliveries: { outcome: string; status?: number }[];
      };
      expect(published.deliveries[0]).toMatchObject({ outcome: 'delivered', status: 200 });
      // it stopped reading and let go: the receiver sees the connection closed
      while (endless.closedByClient() === 0) await new Promise((r) => setTimeout(r, 10));
      expect(memoryOf(emu.pid).rss - before).toBeLessThan(60); // MiB
    } finally {
      await emu.proc.stop();
    }
  });
});
