import { describe, expect, it } from 'vitest';
import { api, endlessReceiver, KEY, serversClosedAfterAll } from '../../helpers/hostile-emulator.js';
import { memoryOf } from '../../helpers/memory.js';
import { startCli, type Running } from '../../helpers/process.js';

// What a hostile receiver of the emulator's deliveries can make the emulator hold: its memory, read from
// /proc, is the point (the built binary). The other hostile cases: test/hostile/emulator.hostile.test.ts.

async function emulator(args: string[] = []): Promise<{ proc: Running; url: string; pid: number }> {
  const proc = startCli(['emulator', '--port', '0', '--json', '--api-key', KEY, '--client-id', 'tester', ...args]);
  const ready = await proc.waitFor<{ base_url: string }>((v) => typeof v.base_url === 'string');
  return { proc, url: ready.base_url, pid: proc.child.pid! };
}

const servers = serversClosedAfterAll();

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
