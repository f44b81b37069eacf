import { Agent, request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../../scripts/harness.js';
import { tempDir } from '../../helpers/cli.js';
import { memoryOf } from '../../helpers/memory.js';
import { startCli } from '../../helpers/process.js';
import { signDelivery } from '../../../src/signing/index.js';
import { TEST_SECRET } from '../../helpers/receiver.js';
import { holdingApp } from '../../helpers/server.js';

// `--max-inflight` bounds what listen holds at every value, its default included (#32.6): signed deliveries
// of 1 MiB, saved and forwarded, more at once than the flag admits.

const MiB = 1024 * 1024;

describe('#32.6 --max-inflight at its default', () => {
  it('300 signed 1 MiB deliveries at once, saved and forwarded, the app holding its answers: RSS stays within the default 256 MiB and a fixed amount; the rest are told 503', async () => {
    // The app holds every answer until each request is at the app or (holdingApp, as in public-url.hostile)
    // turned away (or 64 are at the app: listen forwards on 64 connections), so that what listen admitted
    // is held while the rest arrive.
    const N = 300;
    const app = await holdingApp(N);
    const port = await freePort();
    const proc = startCli(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--save-dir', tempDir(), '--forward-to', `${app.url}/hooks`], { S: TEST_SECRET });
    await proc.waitFor<{ event?: string }>((v) => v.event === 'listening');
    const agent = new Agent({ keepAlive: true, maxSockets: N });
    try {
      // a gridded forecast of 1 MiB: numbers, as the service sends them
      const row = Array.from({ length: 200 }, (_, j) => ((j * 13) % 4000) / 100);
      const values = Array.from({ length: Math.floor(MiB / (JSON.stringify(row).length + 1)) }, () => row);
      // (its JSON made once, and each body's around it: 300 of them made whole took seconds of a busy machine)
      const data = JSON.stringify({ model: 'wm-6', forecast_hour: 0, response: { type: 'gridded', values } });
      const deliveries = Array.from({ length: N }, (_, n) => {
        const trigger = `trg_mib_${n}`;
        const body = Buffer.from(`{"type":"forecast_hour.available","webhook_id":"1","subscription_id":"1","trigger_id":"${trigger}","data":${data}}`);
        return { body, headers: { 'content-type': 'application/json', ...(signDelivery({ secret: TEST_SECRET, body, triggerId: trigger }) as Record<string, string>) } };
      });
      const before = memoryOf(proc.child.pid!).rss;
      const statuses = await Promise.all(
        deliveries.map((d) => {
          return new Promise<number>((resolve) => {
            const req = request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent, headers: d.headers }, (res) => {
              res.resume();
              res.on('close', () => {
                if (res.statusCode !== 200) app.turnedAway();
                resolve(res.statusCode ?? 0);
              });
            });
            // told 503 while still sending, a client may find the connection closed under it: turned away too
            req.on('error', () => (app.turnedAway(), resolve(0)));
            req.end(d.body);
          });
        }),
      );
      const { peak } = memoryOf(proc.child.pid!);
      const count = (s: number) => statuses.filter((x) => x === s).length;
      process.stdout.write(
        `signed 1 MiB deliveries, saved and forwarded: ${count(200)} processed, ${count(503)} told 503, ${count(0)} cut off; RSS ${before.toFixed(0)} → peak ${peak.toFixed(0)} MiB; --max-inflight 256 MiB (default)\n`,
      );
      expect(count(200)).toBeGreaterThan(0);
      expect(count(503) + count(0)).toBeGreaterThan(0); // more than the flag admits were sent
      expect(peak - before).toBeLessThan(256 + 128); // the flag, and a fixed amount: V8 and the socket buffers not yet collected (329-367 MiB on a loaded machine)
    } finally {
      agent.destroy();
      await proc.stop();
      await app.close();
    }
  }, 90_000);
});
