import { Agent, request } from 'node:http';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { History } from '../../src/receiver/history.js';
import { startInspector } from '../../src/receiver/inspector.js';
import { replayFromHistory } from '../../src/receiver/replay.js';
import { signDelivery } from '../../src/signing/index.js';
import { systemClock } from '../../src/util/clock.js';
import { tempDir } from '../helpers/cli.js';
import { manualClock } from '../helpers/clock.js';
import { runInProcess, startInProcess } from '../helpers/context.js';
import { post } from '../helpers/http.js';
import { checkingApp, fetchJson, forged } from '../helpers/public-url.js';
import { signed, startTestReceiver, TEST_SECRET } from '../helpers/receiver.js';

// `listen --public-url` puts the receiver on the internet: what an attacker who knows only the public URL
// (and anyone on this machine) can do to it, each case named after the probe's finding. (A process's
// memory measured, and PostgreSQL: test/full/hostile/public-url.hostile.test.ts.)

describe('1. replay signs only what verified', () => {
  it('a refused request that claims a real Trigger-Id: no replay of it (409, nothing sent), never counted as an attempt; the verified one replays, and the app finds it authentic', async () => {
    const app = await checkingApp();
    const history = new History();
    const r = await startTestReceiver({ onEvent: (e, raw) => history.add(e, raw) });
    const inspector = await startInspector({
      host: '127.0.0.1',
      port: 0,
      history,
      about: {},
      replay: async (id) => {
        const x = await replayFromHistory(history, id, { secret: TEST_SECRET, to: `${app.url}/hooks`, timeoutMs: 5000, clock: systemClock });
        return x.ok ? { status: 200, body: x.result } : { status: x.status, body: { error: x.error } };
      },
    });
    try {
      const real = signed('trg_real');
      expect((await post(r.url, real.headers, real.body)).status).toBe(200);
      const fake = forged('trg_real');
      expect((await post(r.url, fake.headers, fake.body)).status).toBe(401);
      const records = await history.since(0);
      const [good, bad] = records;
      expect(bad!.claimed_trigger_id).toBe('trg_real');
      expect(bad!.trigger_id).toBeUndefined();
      const headers = { 'x-wxhooks-token': inspector.token, host: new URL(inspector.url).host };
      const refusedReplay = await fetchJson(`http://127.0.0.1:${inspector.port}/api/deliveries/${bad!.id}/replay`, { method: 'POST', headers });
      expect(refusedReplay.status).toBe(409);
      expect(String(refusedReplay.body.error)).toContain('did not verify');
      expect(app.got).toEqual([]); // nothing was sent
      // the forged one is no attempt of the real delivery
      const detail = await fetchJson(`http://127.0.0.1:${inspector.port}/api/deliveries/${good!.id}`, { headers });
      expect((detail.body.attempts as { id: number }[]).map((a) => a.id)).toEqual([good!.id]);
      // the verified one replays, signed afresh, and the app checks it: authentic, the real model
      const replayed = await fetchJson(`http://127.0.0.1:${inspector.port}/api/deliveries/${good!.id}/replay`, { method: 'POST', headers });
      expect(replayed.status).toBe(200);
      expect(app.got).toEqual([{ trigger: 'trg_real', model: 'wm-6', verified: true }]);
    } finally {
      await inspector.close();
      await r.close();
      await app.close();
    }
  });
});

describe('3. a refused request costs no more than a verified one', () => {
  it('the further look for why (re-serialising the body, other layouts) is taken at most 5 times a minute, and the line says when it was not', async () => {
    const clock = manualClock(Date.now());
    const r = await startTestReceiver({ clock, diagnosePerMinute: 5 });
    try {
      const ts = Math.floor(clock.now() / 1000);
      const send = async (n: number) => {
        const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', trigger_id: `trg_r${n}`, subscription_id: '1', data: { model: 'wm-6' } }));
        const headers = signDelivery({ secret: TEST_SECRET, body, triggerId: `trg_r${n}`, timestamp: ts });
        // re-formatted on the way: the signature is of the compact bytes, these are indented
        const sent = Buffer.from(JSON.stringify(JSON.parse(body.toString()), null, 2));
        return (await post(r.url, headers, sent)).status;
      };
      for (let n = 0; n < 8; n++) expect(await send(n)).toBe(401);
      expect(r.events.map((e) => e.reason)).toEqual([...Array(5).fill('body_reformatted'), ...Array(3).fill('no_match')]);
      expect(r.events.slice(5).every((e) => e.diagnosis_skipped === true)).toBe(true);
      clock.advance(60_000);
      expect(await send(8)).toBe(401);
      expect(r.events.at(-1)!.reason).toBe('body_reformatted');
    } finally {
      await r.close();
    }
  });
});

describe('4. the inspector page and its token', () => {
  it('listen prints the link with its token; without it the page and every API refuse, and a bare / says where to look; a remote name is answered only when given', async () => {
    const port = await freePort();
    const run = startInProcess(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--inspect', '127.0.0.1:0'], { env: { S: TEST_SECRET } });
    try {
      const link = new URL((await run.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
      const token = link.searchParams.get('token')!;
      expect(token.length).toBeGreaterThan(20);
      const bare = await fetchJson(`http://127.0.0.1:${link.port}/`);
      expect(bare.status).toBe(401);
      expect(String(bare.body.text)).toContain('Open the link');
      expect(String(bare.body.text)).not.toContain(token);
      expect((await fetchJson(`http://127.0.0.1:${link.port}/?token=${token}`)).status).toBe(200);
      expect((await fetchJson(`http://127.0.0.1:${link.port}/api/deliveries`)).status).toBe(403);
      // anyone on this machine with a Host header of their choosing gets the page without its token, and nothing more
      const sneaky = await fetchJson(`http://127.0.0.1:${link.port}/`, { headers: { host: `localhost:${link.port}` } });
      expect(sneaky.status).toBe(401);
      expect((await fetchJson(`http://127.0.0.1:${link.port}/api/deliveries/1/replay`, { method: 'POST', headers: { host: `localhost:${link.port}` } })).status).toBe(403);
    } finally {
      await run.stop();
    }
    // remote mode: the names given are answered, with the token; others are not
    const remote = startInProcess(['listen', '--port', String(port), '--json', '--secret-env', 'S', '--inspect', '127.0.0.1:0', '--inspect-allow-remote', '--inspect-host', 'wx.example.test'], {
      env: { S: TEST_SECRET },
    });
    try {
      const link = new URL((await remote.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
      const token = link.searchParams.get('token')!;
      expect((await fetchJson(`http://127.0.0.1:${link.port}/api/deliveries?token=${token}`, { headers: { host: `wx.example.test:${link.port}` } })).status).toBe(200);
      expect((await fetchJson(`http://127.0.0.1:${link.port}/api/deliveries`, { headers: { host: `wx.example.test:${link.port}` } })).status).toBe(403);
      expect((await fetchJson(`http://127.0.0.1:${link.port}/api/deliveries?token=${token}`, { headers: { host: `evil.example:${link.port}` } })).status).toBe(421);
    } finally {
      await remote.stop();
    }
    const refused = await runInProcess(['listen', '--port', '0', '--secret-env', 'S', '--inspect', '127.0.0.1:0', '--inspect-host', 'wx.example.test'], { env: { S: TEST_SECRET } });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--inspect-host');
  });
});

describe('6. the emulator, as a target', () => {
  it('--data-file: 2,000 creates are written a few times a second, not once each; a clean exit writes the last of them', async () => {
    const { startEmulator } = await import('../../src/emulator/server.js');
    const file = `${tempDir()}/state.json`;
    const emu = await startEmulator({ port: 0, apiKey: 'emu_data_file_key_0123456789abcdef', dataFile: file });
    const agent = new Agent({ keepAlive: true, maxSockets: 8 });
    try {
      const started = Date.now();
      const create = (n: number) =>
        new Promise<number>((resolve) => {
          const req = request(
            {
              host: '127.0.0.1',
              port: emu.port,
              path: '/webhooks/v1',
              method: 'POST',
              agent,
              headers: { authorization: 'Bearer emu_data_file_key_0123456789abcdef', 'content-type': 'application/json' },
            },
            (res) => {
              res.resume();
              res.on('end', () => resolve(res.statusCode ?? 0));
            },
          );
          req.end(JSON.stringify({ url: `https://example.com/${n}` }));
        });
      for (let i = 0; i < 2000; i += 8) expect(await Promise.all(Array.from({ length: 8 }, (_, k) => create(i + k)))).toEqual(Array(8).fill(201));
      const seconds = (Date.now() - started) / 1000;
      expect(emu.state.writes).toBeLessThanOrEqual(Math.ceil(seconds * 4) + 2);
    } finally {
      agent.destroy();
      await emu.close();
    }
    const { readFileSync } = await import('node:fs');
    expect((JSON.parse(readFileSync(file, 'utf8')) as { webhooks: unknown[] }).webhooks).toHaveLength(2000);
  });
});
