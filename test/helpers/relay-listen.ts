import { afterAll, beforeAll, expect } from 'vitest';
import { runCli, tempDir } from './cli.js';
import { startCliInProcess, type Cli } from './process.js';
import { send, type RelayUnderTest } from './relay.js';
import { sendJson, startServer, type TestServer } from './server.js';

// The world of the `listen --relay` tests of both tiers (test/relay-listen.e2e.test.ts, in this process;
// test/full/relay-listen.e2e.test.ts, killed while draining): the emulator, a relay, an app that counts
// what it is given; and what they ask of it. Each file starts `listen --relay` its own way.

export const TOKEN = `relay-listen-token-${process.pid}-0123456789`;

export interface World {
  emu: Cli;
  env: Record<string, string>;
  relay: RelayUnderTest;
  app: TestServer;
  /** Each trigger id the app was given, in the order it was given them. */
  got: string[];
  hours: number[];
}

export async function world(makeRelay: () => Promise<RelayUnderTest>): Promise<World> {
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

/** A world for the tests of one describe block: made before them (and given to `set`), stopped after them. */
export function worldFor(makeRelay: () => Promise<RelayUnderTest>, set: (w: World) => void): void {
  let w: World | undefined;
  beforeAll(async () => {
    w = await world(makeRelay);
    set(w);
  }, 60_000);
  afterAll(async () => {
    await w?.app.close();
    await w?.relay.close();
    await w?.emu.stop();
  });
}

export const relayStatus = async (w: World) =>
  JSON.parse((await send(`${w.relay.url}/status`, 'GET', { authorization: `Bearer ${TOKEN}` })).body) as { channels: { channel: string; queued: number; refused: number; connected: boolean }[] };

/** Waits, by polling what the app got (no fixed sleep: each turn waits on the app's next request or 20 ms). */
export async function until(what: () => boolean | Promise<boolean>, label: string, limitMs = 60_000): Promise<void> {
  const deadline = Date.now() + limitMs;
  while (!(await what())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${label}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function createWebhook(w: World, url: string): Promise<string> {
  const created = await runCli(['webhook', 'create', '--url', url, '--subscribe', 'forecast_hour.available', '--subscribe', 'initialization_time.available', '--json'], { env: w.env });
  expect(created.code).toBe(0);
  return (JSON.parse(created.stdout) as { id: string }).id;
}
