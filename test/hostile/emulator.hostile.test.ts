import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { api, endlessReceiver, KEY, serversClosedAfterAll } from '../helpers/hostile-emulator.js';
import { startCliInProcess, type Cli } from '../helpers/process.js';

// What a hostile client of the emulator, or a hostile receiver of its deliveries (and of `send`), can do;
// the emulator in this process. (Its memory, measured: test/full/hostile/emulator.hostile.test.ts.)

async function emulator(args: string[] = []): Promise<{ proc: Cli; url: string }> {
  const proc = startCliInProcess(['emulator', '--port', '0', '--json', '--api-key', KEY, '--client-id', 'tester', ...args]);
  const ready = await proc.waitFor<{ base_url: string }>((v) => typeof v.base_url === 'string');
  return { proc, url: ready.base_url };
}

const servers = serversClosedAfterAll();

describe('hostile input: the emulator', () => {
  it('filters nested 20,000 arrays deep: 400 before anything is stored; it stays up, and --data-file keeps saving', async () => {
    const dataFile = join(tempDir(), 'state.json');
    const emu = await emulator(['--data-file', dataFile]);
    try {
      const deep = `${'['.repeat(20_000)}${']'.repeat(20_000)}`;
      const res = await api(emu.url, '/webhooks/v1', { method: 'POST', body: `{"url":"https://example.com/","subscriptions":{"forecast_hour.available":{"filters":{"model":${deep}}}}}` });
      expect(res.status).toBe(400);
      expect(((await res.json()) as { error: { message: string } }).error.message).toContain('nests deeper than 64 levels');
      const ok = await api(emu.url, '/webhooks/v1', { method: 'POST', body: { url: 'https://example.com/after' } });
      expect(ok.status).toBe(201);
      expect((await api(emu.url, '/webhooks/v1')).status).toBe(200);
    } finally {
      await emu.proc.stop();
    }
  });

  it("a Bearer token of the key's length in non-ASCII characters is 401, not 500", async () => {
    const emu = await emulator();
    try {
      const res = await fetch(`${emu.url}/debug/v1/auth_status`, { headers: { authorization: `Bearer ${'é'.repeat(KEY.length)}` } });
      expect(res.status).toBe(401);
    } finally {
      await emu.proc.stop();
    }
  });

  it('send to a receiver that streams without end: exit 0 at once, the answer read only in part', async () => {
    const endless = await endlessReceiver();
    servers.push(endless.server);
    const started = Date.now();
    const r = await runCli(['send', '--to', endless.url, '--secret-env', 'S', '--json'], { env: { S: 'whsec_c2VjcmV0c2VjcmV0' }, timeoutMs: 15_000 });
    expect(r.code).toBe(0);
    expect(Date.now() - started).toBeLessThan(5000);
    expect(JSON.parse(r.stdout)).toMatchObject({ delivered: true, status: 200 });
  });

  it('a fan-out larger than --concurrency: an attempt waiting its turn is not timed out; its clock starts when it is sent', async () => {
    let inFlight = 0;
    let most = 0;
    const slow = createServer((req, res) => {
      inFlight++;
      most = Math.max(most, inFlight);
      req.resume();
      setTimeout(() => {
        inFlight--;
        res.writeHead(200).end();
      }, 150);
    });
    servers.push(slow);
    await new Promise<void>((r) => slow.listen(0, '127.0.0.1', r));
    const url = `http://127.0.0.1:${(slow.address() as AddressInfo).port}/`;
    const emu = await emulator(['--concurrency', '20', '--attempt-timeout', '1s', '--retry-delays', '30s']);
    try {
      for (let i = 0; i < 200; i++) await api(emu.url, '/webhooks/v1', { method: 'POST', body: { url: `${url}${i}`, subscriptions: { 'degree_days.available': {} } } });
      await api(emu.url, '/emulator/v1/events', { method: 'POST', body: { type: 'degree_days.available' } });
      // 200 × 150 ms at 20 at once: 1.5 s in all, longer than the 1 s each attempt has
      let attempts: { outcome: string; error?: string }[] = [];
      for (let i = 0; i < 100 && attempts.filter((a) => a.outcome === 'delivered').length < 200; i++) {
        await new Promise((r) => setTimeout(r, 100));
        attempts = ((await (await api(emu.url, '/emulator/v1/deliveries')).json()) as { deliveries: typeof attempts }).deliveries;
      }
      expect(attempts.filter((a) => a.outcome === 'failed')).toEqual([]);
      expect(attempts.filter((a) => a.outcome === 'delivered')).toHaveLength(200);
      expect(most).toBeLessThanOrEqual(20);
    } finally {
      await emu.proc.stop();
    }
  });

  it('held up: no credentials, a wrong key, a Basic with the wrong client: all 401, nothing served', async () => {
    const emu = await emulator();
    try {
      for (const auth of ['', 'Bearer wrong', `Basic ${Buffer.from(`someone:${KEY}`).toString('base64')}`, `Token ${KEY}`, `Bearer ${KEY}x`]) {
        const res = await api(emu.url, '/webhooks/v1', { auth });
        expect(res.status, auth).toBe(401);
      }
    } finally {
      await emu.proc.stop();
    }
  });
});
