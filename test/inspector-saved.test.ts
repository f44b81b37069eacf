import { readdirSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Context } from '../src/context.js';
import { serviceFor } from '../src/tasks/service.js';
import { tempDir } from './helpers/cli.js';
import { runInProcess, startInProcess } from './helpers/context.js';
import { signed } from './helpers/receiver.js';
import { startService, type FakeService } from './helpers/service.js';

// `listen --inspect --save-dir`: the inspector lists what was saved before this listen, then what this
// listen receives, each once. The folder used to be read back once the receiver already took requests
// (when the page started), so a delivery saved in between was listed twice (5 or 8 records for 4
// deliveries in about half the runs of test/guides.e2e.test.ts). Here the window is held open on
// purpose: --watch-runs asks for its service client once the receiver takes requests and before the page
// starts, and the test holds that until a delivery has been received and saved.

describe('listen --inspect --save-dir: each delivery listed once', () => {
  let svc: FakeService;
  beforeAll(async () => {
    svc = await startService('documented', tempDir('wxhooks-cfg-'));
  });
  afterAll(async () => {
    await svc?.stop();
  });

  it('a delivery saved while the page starts is listed once, after those saved before', async () => {
    const env = { ...svc.env, WXHOOKS_CONFIG_DIR: tempDir('wxhooks-cfg-') };
    const created = await runInProcess(['webhook', 'create', '--url', 'http://127.0.0.1:9/', '--subscribe', 'forecast_hour.available:model=wm-6', '--json'], { env });
    const { id, secret } = JSON.parse(created.stdout) as { id: string; secret: string };
    const save = tempDir('wxhooks-saved-');

    // a first listen saves one delivery, and stops
    const first = startInProcess(['listen', '--webhook', id, '--port', '0', '--save-dir', save, '--exit-after', '1', '--json'], { env });
    const at = await first.waitFor<{ event?: string; url?: string }>((l) => l.event === 'listening');
    const before = signed('trg_saved_before', { secret });
    expect((await fetch(at.url!, { method: 'POST', headers: before.headers, body: new Uint8Array(before.body) })).status).toBe(200);
    expect(await first.done).toBe(0);

    // the second service client listen asks for (the first looks the webhook up at the start; the second
    // is --watch-runs', once the receiver takes requests) is held until the test lets it go
    let release: () => void = () => undefined;
    const held = new Promise<void>((resolve) => (release = resolve));
    let holding: () => void = () => undefined;
    const isHolding = new Promise<void>((resolve) => (holding = resolve));
    let clients = 0;
    const serviceFactory: Context['serviceFactory'] = async (ctx) => {
      if (++clients === 2) {
        holding();
        await held;
      }
      return serviceFor({ ...ctx, serviceFactory: undefined });
    };
    const l = startInProcess(['listen', '--webhook', id, '--port', '0', '--inspect', '127.0.0.1:0', '--save-dir', save, '--watch-runs', '--json'], { env, serviceFactory });
    try {
      const listening = await l.waitFor<{ event?: string; url?: string }>((x) => x.event === 'listening');
      await isHolding;
      const d = signed('trg_saved_meanwhile', { secret });
      expect((await fetch(listening.url!, { method: 'POST', headers: d.headers, body: new Uint8Array(d.body) })).status).toBe(200);
      await l.waitFor<{ outcome?: string; trigger_id?: string }>((x) => x.outcome === 'accepted' && x.trigger_id === 'trg_saved_meanwhile');
      expect(readdirSync(save)).toHaveLength(2);
      release();

      const page = await l.waitFor<{ event?: string; url?: string }>((x) => x.event === 'inspector');
      const link = new URL(page.url!);
      const api = await fetch(new URL('/api/deliveries', link.origin), { headers: { 'x-wxhooks-token': link.searchParams.get('token')! } });
      const records = ((await api.json()) as { records: { id: number; trigger_id: string; outcome: string }[] }).records;
      expect(records.map((r) => [r.trigger_id, r.outcome])).toEqual([
        ['trg_saved_before', 'accepted'],
        ['trg_saved_meanwhile', 'accepted'],
      ]);
    } finally {
      release();
      await l.stop();
    }
  });
});
