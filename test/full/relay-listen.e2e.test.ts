import { Agent } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, tempDir } from '../helpers/cli.js';
import { deliverSigned } from '../helpers/deliver.js';
import { startCli, startCliInProcess, type Cli } from '../helpers/process.js';
import { nodeFileRelay, send, workerdRelay, type RelayUnderTest } from '../helpers/relay.js';
import { sendJson, startServer, type TestServer } from '../helpers/server.js';

// `listen --relay` killed while draining: the emulator (the service) → a relay (the Node host in this
// process, or the Worker in workerd) → `listen --relay` (the built binary: kill -9 is the point) → an app
// (a server in this test), counted at the app by trigger id. (End to end in this process, and doctor
// --relay: test/relay-listen.e2e.test.ts; its flags and refusals: test/relay-cli.test.ts.)

const TOKEN = `relay-listen-token-${process.pid}-0123456789`;
const _INIT = '2026-11-24T00:00:00Z';

interface World {
  emu: Cli;
  env: Record<string, string>;
  relay: RelayUnderTest;
  app: TestServer;
  /** Each trigger id the app was given, in the order it was given them. */
  got: string[];
  hours: number[];
}

async function world(makeRelay: () => Promise<RelayUnderTest>): Promise<World> {
  const dir = tempDir();
  const emu = startCliInProcess(['emulator', '--port', '0', '--json', '--retry-delays', '100ms'], { WXHOOKS_CONFIG_DIR: dir });
  const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
  const relay = await makeRelay();
  const got: string[] = [];
  const hours: number[] = [];
  const app = await startServer((req, res) => {
    const b = req.json as { trigger_id: string; type: string; data: { forecast_hour?: number } };
    got.push(b.trigger_id);
    if (b.type === 'forecast_hour.available') hours.push(b.data.forecast_hour!);
    sendJson(res, 200, { ok: true });
  });
  return { emu, relay, app, got, hours, env: { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir, WXHOOKS_RELAY_TOKEN: TOKEN } };
}

const listen = (w: World, args: string[]) => startCli(['listen', '--relay', w.relay.url, '--json', '--forward-to', `${w.app.url}/hooks`, ...args], w.env);

const relayStatus = async (w: World) =>
  JSON.parse((await send(`${w.relay.url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` })).body) as { channels: { channel: string; queued: number; connected: boolean }[] };

/** Waits, by polling what the app got (no fixed sleep: each turn waits on the app's next request or 20 ms). */
async function until(what: () => boolean | Promise<boolean>, label: string, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await what())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function createWebhook(w: World, url: string): Promise<string> {
  const created = await runCli(['webhook', 'create', '--url', url, '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available', '--json'], { env: w.env });
  expect(created.code).toBe(0);
  return (JSON.parse(created.stdout) as { id: string }).id;
}

/**
 * SIGKILL while draining 2,000 queued deliveries, then a restart: none is lost, and at the app each comes
 * once, but for at most the one being forwarded at the kill (forwarded, its pair not yet stored: the
 * rule of every door, test/full/durability.e2e.test.ts: what was acknowledged is never forwarded twice).
 */
function drainTest(name: string, makeRelay: () => Promise<RelayUnderTest>) {
  describe(`listen --relay killed while draining (${name})`, () => {
    let w: World;
    beforeAll(async () => {
      w = await world(makeRelay);
    }, 60_000);
    afterAll(async () => {
      await w?.app.close();
      await w?.relay.close();
      await w?.emu.stop();
    });

    it('2,000 queued, SIGKILL mid-drain, restart: every one reaches the app, none twice (but the one in hand at the kill)', async () => {
      const id = await createWebhook(w, 'http://127.0.0.1:9/placeholder');
      const first = listen(w, ['--webhook', id]);
      const ready = await first.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
      expect(await first.stop('SIGINT')).toBe(130);
      const secret = (await runCli(['secret', 'show', id], { env: w.env })).stdout.trim();
      const N = 2000;
      const triggers = Array.from({ length: N }, (_, i) => `trg_drain_${process.pid}_${i}`);
      const agent = new Agent({ keepAlive: true, maxSockets: 8 });
      let next = 0;
      await Promise.all(
        Array.from({ length: 8 }, async () => {
          while (next < N) expect(await deliverSigned(ready.url, agent, secret, triggers[next++]!)).toBe(200);
        }),
      );
      agent.destroy();
      w.got.length = 0;
      const draining = listen(w, ['--webhook', id]);
      await until(() => w.got.length >= 500, 'a quarter of the backlog');
      draining.child.kill('SIGKILL');
      await draining.exited;
      const atKill = w.got.length;
      expect(atKill).toBeLessThan(N);
      const again = listen(w, ['--webhook', id]);
      try {
        await until(() => new Set(w.got).size === N, 'every delivery', 120_000);
        await until(async () => (await relayStatus(w)).channels.find((c) => ready.url.endsWith(c.channel))?.queued === 0, 'the relay to be empty');
      } finally {
        await again.stop('SIGINT');
      }
      const counts = new Map<string, number>();
      for (const t of w.got) counts.set(t, (counts.get(t) ?? 0) + 1);
      const twice = [...counts.values()].filter((n) => n > 1).length;
      expect(triggers.filter((t) => !counts.has(t))).toEqual([]);
      expect(twice).toBeLessThanOrEqual(1);
    }, 240_000);
  });
}

drainTest('the Node relay', () => nodeFileRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }));
drainTest('the Worker in workerd', () => workerdRelay({ token: TOKEN, maxBytes: 256 * 1024 * 1024 }));
