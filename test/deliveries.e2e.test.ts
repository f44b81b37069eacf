import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDelivery, verifyDelivery } from '../src/signing/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { post } from './helpers/http.js';
import { startCliInProcess } from './helpers/process.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

// `deliveries list|show|replay` over a `listen --save-dir` folder.

const SECRET = 'whsec_' + Buffer.alloc(32, 4).toString('base64');
let saveDir: string;
/** The store folder of the listen that saved them: its key marks what it saved as verified. */
let store: string;
let app: TestServer;
let appStatus = 200;

beforeAll(async () => {
  saveDir = join(tempDir(), 'saved');
  mkdirSync(saveDir);
  store = tempDir();
  app = await startServer((_req, res) => sendJson(res, appStatus, { ok: appStatus < 300 }));
  const listen = startCliInProcess(['listen', '--port', '0', '--json', '--secret-env', 'S', '--save-dir', saveDir, '--exit-after', '3'], { S: SECRET, WXHOOKS_CONFIG_DIR: store });
  const { url } = await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
  for (const [type, trigger] of [
    ['forecast_hour.available', 'trg_a'],
    ['degree_days.available', 'trg_b'],
    ['forecast_hour.available', 'trg_c'],
  ]) {
    const body = Buffer.from(JSON.stringify({ type, trigger_id: trigger, subscription_id: '1', data: { model: 'wm-6' } }));
    expect((await post(url, signDelivery({ secret: SECRET, body, triggerId: trigger! }), body)).status).toBe(200);
  }
  expect(await listen.exited).toBe(0);
});
afterAll(() => app.close());

describe('deliveries', () => {
  it('list: every saved delivery, filtered by type or outcome', async () => {
    const all = await runCli(['deliveries', 'list', '--dir', saveDir, '--json'], { env: { WXHOOKS_CONFIG_DIR: store } });
    expect(all.code).toBe(0);
    const entries = (JSON.parse(all.stdout) as { deliveries: { trigger_id: string; outcome: string }[] }).deliveries;
    expect(entries.map((e) => e.trigger_id)).toEqual(['trg_a', 'trg_b', 'trg_c']);
    expect(entries.every((e) => e.outcome === 'verified')).toBe(true);
    const some = await runCli(['deliveries', 'list', '--dir', saveDir, '--type', 'degree_days.available'], { env: { WXHOOKS_CONFIG_DIR: store } });
    expect(some.stdout.trim().split('\n')).toHaveLength(2);
    expect(some.stdout).toContain('trg_b');
  });

  it('show: by Trigger-Id, its headers and body', async () => {
    const r = await runCli(['deliveries', 'show', 'trg_b', '--dir', saveDir]);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('degree_days.available');
    expect(r.stdout).toContain('webhook-signature: v1,');
    expect(r.stdout).toContain('"trigger_id": "trg_b"');
    const missing = await runCli(['deliveries', 'show', 'trg_none', '--dir', saveDir]);
    expect(missing.code).toBe(4);
  });

  it('replay: signed afresh with the same Trigger-Id, marked X-Wxhooks-Replay: 1; exit 7 when the app refuses it', async () => {
    const before = app.requests.length;
    const r = await runCli(['deliveries', 'replay', 'trg_c', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: { S: SECRET, WXHOOKS_CONFIG_DIR: store } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Replayed');
    const sent = app.requests[before]!;
    expect(sent.headers['x-wxhooks-replay']).toBe('1');
    expect(sent.headers['trigger-id']).toBe('trg_c');
    expect(verifyDelivery({ secret: SECRET, headers: sent.headers, body: sent.body })).toMatchObject({ ok: true });
    appStatus = 500;
    try {
      const refused = await runCli(['deliveries', 'replay', 'trg_c', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: { S: SECRET, WXHOOKS_CONFIG_DIR: store } });
      expect(refused.code).toBe(7);
    } finally {
      appStatus = 200;
    }
  });

  it('a folder copied to another machine (another store folder): listed as unverified until its signatures are checked; replayed when its signature verifies', async () => {
    const elsewhere = tempDir(); // another store folder: not the key that marked these files
    const plain = await runCli(['deliveries', 'list', '--dir', saveDir, '--json'], { env: { WXHOOKS_CONFIG_DIR: elsewhere } });
    expect(plain.code).toBe(0);
    expect((JSON.parse(plain.stdout) as { deliveries: { outcome: string }[] }).deliveries.map((e) => e.outcome)).toEqual(['unverified', 'unverified', 'unverified']);
    expect(plain.stderr).toContain('3 files in');
    expect(plain.stderr).toContain('Give --webhook ID or --secret-env VAR to check their own signatures');
    const checked = await runCli(['deliveries', 'list', '--dir', saveDir, '--json', '--secret-env', 'S'], { env: { S: SECRET, WXHOOKS_CONFIG_DIR: elsewhere } });
    expect((JSON.parse(checked.stdout) as { deliveries: { outcome: string }[] }).deliveries.map((e) => e.outcome)).toEqual(['verified', 'verified', 'verified']);
    expect(checked.stderr).toBe('');
    const before = app.requests.length;
    const r = await runCli(['deliveries', 'replay', 'trg_a', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: { S: SECRET, WXHOOKS_CONFIG_DIR: elsewhere } });
    expect(r.code, r.stderr).toBe(0);
    expect(app.requests[before]!.headers['trigger-id']).toBe('trg_a');
    // with another secret, its signature does not verify: not signed again (exit 9), nothing sent
    const other = await runCli(['deliveries', 'replay', 'trg_a', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], {
      env: { S: 'whsec_' + Buffer.alloc(32, 9).toString('base64'), WXHOOKS_CONFIG_DIR: elsewhere },
    });
    expect(other.code).toBe(9);
    expect(other.stderr).toContain("carries no mark of a delivery this store's listen verified");
    expect(other.stderr).toContain('its own signature does not verify with the secret given');
    expect(app.requests.length).toBe(before + 1);
  });
});
