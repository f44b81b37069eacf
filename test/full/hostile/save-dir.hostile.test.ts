import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, chownSync, closeSync, ftruncateSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDelivery, verifyDelivery } from '../../../src/signing/index.js';
import { freePort } from '../../../scripts/harness.js';
import { BIN, cleanEnv, runCli, spawnCli, tempDir } from '../../helpers/cli.js';
import { post } from '../../helpers/http.js';
import { startCli, type Running } from '../../helpers/process.js';
import { sendJson, startServer, type TestServer } from '../../helpers/server.js';

// What is read back from a --save-dir, where another user (or anything) may put files: only what listen
// verified is signed again (#32.9), and only regular files of a bounded size are read (#32.17).

const SECRET = 'whsec_' + Buffer.alloc(32, 7).toString('base64');
const INIT = '2026-11-24T00:00:00Z';
const NOBODY = 65534;

let store: string;
let saveDir: string;
let app: TestServer;

/** A delivery signed with the webhook's secret, as the service sends it. */
function delivery(trigger: string, hour: number, pad = 0) {
  const body = Buffer.from(
    JSON.stringify({
      type: 'forecast_hour.available',
      webhook_id: '7',
      subscription_id: '1',
      trigger_id: trigger,
      data: { model: 'wm-6', initialization_time: INIT, forecast_hour: hour, pad: 'x'.repeat(pad) },
    }),
  );
  return { body, headers: signDelivery({ secret: SECRET, body, triggerId: trigger }) };
}

/** A file in the format listen saves, of a delivery listen never received (with a made-up mark). */
function plantedFile(trigger: string, hour: number): string {
  const body = JSON.stringify({
    type: 'forecast_hour.available',
    webhook_id: '7',
    subscription_id: '1',
    trigger_id: trigger,
    data: { model: 'wm-6', initialization_time: INIT, forecast_hour: hour, planted: true },
  });
  const saved = {
    wxhooks_delivery: 1,
    received_at: new Date().toISOString(),
    method: 'POST',
    path: '/',
    headers: { 'content-type': 'application/json', 'trigger-id': trigger, 'webhook-timestamp': String(Math.floor(Date.now() / 1000)), 'webhook-signature': 'v1,bm90IGEgc2lnbmF0dXJl' },
    body,
    layout: 'standard',
    verified_mark: 'bm90IHRoZSBzdG9yZSdzIG1hcms',
  };
  return JSON.stringify(saved, null, 2);
}

function plant(name: string, content: string): string {
  const file = join(saveDir, name);
  writeFileSync(file, content);
  chownSync(file, NOBODY, NOBODY);
  return file;
}

function startListen(inspectPort?: number): Running {
  return startCli(
    ['listen', '--port', '0', '--json', '--secret-env', 'S', '--save-dir', saveDir, '--forward-to', `${app.url}/hooks`, ...(inspectPort ? ['--inspect', `127.0.0.1:${inspectPort}`] : [])],
    { S: SECRET, WXHOOKS_CONFIG_DIR: store },
  );
}

const env = () => ({ S: SECRET, WXHOOKS_CONFIG_DIR: store });

beforeAll(async () => {
  store = tempDir();
  saveDir = join(tempDir(), 'saved');
  mkdirSync(saveDir);
  chmodSync(saveDir, 0o777); // a folder shared with others, as a team's capture folder may be
  app = await startServer((_req, res) => sendJson(res, 200, { ok: true }));
  const listen = startListen();
  const { url } = await listen.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening');
  for (const d of [delivery('trg_real', 0), delivery('trg_big', 12, 1100 * 1024)]) expect((await post(url, d.headers, d.body)).status).toBe(200);
  await listen.stop();
  app.requests.length = 0;
  plant(`${new Date().toISOString().replace(/[:.]/g, '-')}-trg_planted-1.json`, plantedFile('trg_planted', 6));
});
afterAll(() => app.close());

const savedFileOf = (trigger: string) => join(saveDir, readdirSync(saveDir).find((n) => n.includes(trigger))!);

describe('#32.9 a file planted in a --save-dir is never signed with the real secret', () => {
  it('deliveries replay of a planted file: refused (exit 9), saying why and what to do; the app gets nothing', async () => {
    const r = await runCli(['deliveries', 'replay', 'trg_planted', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env() });
    expect(app.requests.map((q) => verifyDelivery({ secret: SECRET, headers: q.headers, body: q.body }).ok)).toEqual([]);
    expect(r.code).toBe(9);
    expect(r.stderr).toContain("carries no mark of a delivery this store's listen verified");
    expect(r.stderr).toContain('its own signature does not verify with the secret given: it is not signed again.');
    expect(r.stderr).toContain('wxhooks verify FILE --webhook ID');
    // what listen saved is replayed as before
    const real = await runCli(['deliveries', 'replay', 'trg_real', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env() });
    expect(real.code, real.stderr).toBe(0);
    expect(app.requests.map((q) => q.headers['trigger-id'])).toEqual(['trg_real']);
    app.requests.length = 0;
  });

  it('a saved file whose body was changed (its mark kept) is no longer verified: listed so, and not replayed', async () => {
    const real = JSON.parse(readFileSync(savedFileOf('trg_real'), 'utf8')) as { body: string; verified_mark: string };
    const tampered = plant('tampered.json', JSON.stringify({ ...real, body: real.body.replace('"forecast_hour":0', '"forecast_hour":18') }));
    const r = await runCli(['deliveries', 'replay', 'tampered.json', '--dir', saveDir, '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env() });
    expect(r.code).toBe(9);
    expect(app.requests).toEqual([]);
    const listed = JSON.parse((await runCli(['deliveries', 'list', '--dir', saveDir, '--json'], { env: env() })).stdout) as { deliveries: { trigger_id: string; outcome: string; ref: string }[] };
    expect(listed.deliveries.map((d) => [d.ref === 'tampered.json' ? 'tampered' : d.trigger_id, d.outcome]).sort()).toEqual([
      ['tampered', 'unverified'],
      ['trg_big', 'verified'],
      ['trg_planted', 'unverified'],
      ['trg_real', 'verified'],
    ]);
    renameSync(tampered, `${tampered}.aside`);
  });

  it('runs --dir counts only what verified, and says how many files it left out', async () => {
    const r = await runCli(['runs', '--dir', saveDir, '--json'], { env: env() });
    expect(r.code).toBe(0);
    expect((JSON.parse(r.stdout) as { runs: { hours: number[] }[] }).runs).toMatchObject([{ hours: [0, 12] }]);
    expect(r.stderr).toContain('1 file in');
    expect(r.stderr).toContain('not counted');
  });

  it('send of a planted file: refused (exit 9); a body of your own still goes with --body', async () => {
    const r = await runCli(['send', savedFileOf('trg_planted'), '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env() });
    expect(r.code).toBe(9);
    expect(r.stderr).toContain('To sign a body of your own, give it with --body FILE.');
    expect(app.requests).toEqual([]);
    const own = await runCli(['send', savedFileOf('trg_real'), '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env() });
    expect(own.code, own.stderr).toBe(0);
    app.requests.length = 0;
  });

  it('after a restart, the inspector lists a planted file as not verified, and neither its replay nor its commands sign it; a saved file replaced since is not read back', async () => {
    execFileSync('mkfifo', [join(saveDir, 'a-fifo.json')]); // and the start-up fill does not hang on a FIFO (#32.17)
    const inspectPort = await freePort();
    const listen = startListen(inspectPort);
    try {
      const { url } = await listen
        .waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')
        .catch((err: Error) => {
          listen.child.kill('SIGKILL'); // hung at start (a FIFO), it would not stop for SIGINT
          throw err;
        });
      const token = new URL(url).searchParams.get('token')!;
      const api = (path: string, method = 'GET') => fetch(`http://127.0.0.1:${inspectPort}${path}`, { method, headers: { 'x-wxhooks-token': token } });
      const { records } = (await (await api('/api/deliveries')).json()) as { records: { id: number; outcome: string; trigger_id?: string; claimed_trigger_id?: string }[] };
      const planted = records.find((r) => r.claimed_trigger_id === 'trg_planted' || r.trigger_id === 'trg_planted')!;
      expect(planted).toMatchObject({ outcome: 'unverified', claimed_trigger_id: 'trg_planted' });
      expect(
        records
          .filter((r) => r.outcome === 'accepted')
          .map((r) => r.trigger_id)
          .sort(),
      ).toEqual(['trg_big', 'trg_real']);
      const replay = await api(`/api/deliveries/${planted.id}/replay`, 'POST');
      expect(replay.status).toBe(409);
      expect((await api(`/api/deliveries/${planted.id}/commands`)).status).toBe(409);
      // trg_big (1.1 MiB) is kept in part: its replay reads the saved file, which another user has replaced
      const big = records.find((r) => r.trigger_id === 'trg_big')!;
      const swapped = plant('swap.json', plantedFile('trg_big', 12));
      renameSync(swapped, savedFileOf('trg_big'));
      const bigReplay = await api(`/api/deliveries/${big.id}/replay`, 'POST');
      const answer = (await bigReplay.json()) as { error?: string };
      expect(bigReplay.status).toBe(409);
      expect(answer.error).toContain('carries no mark');
      expect((await api(`/api/deliveries/${big.id}/commands`)).status).toBe(409);
      expect(app.requests).toEqual([]);
    } finally {
      await listen.stop();
    }
  }, 60_000);
});

describe('#32.17 reading a save-dir: regular files only, their size checked before they are read', () => {
  let odd: string;
  beforeAll(() => {
    odd = join(tempDir(), 'odd');
    mkdirSync(odd);
    execFileSync('mkfifo', [join(odd, 'a-fifo.json')]);
    symlinkSync('/dev/zero', join(odd, 'b-zero.json'));
    const sparse = openSync(join(odd, 'c-sparse.json'), 'w');
    ftruncateSync(sparse, 600 * 1024 * 1024); // 600 MB that take no disk
    closeSync(sparse);
    mkdirSync(join(odd, 'd-folder.json'));
    writeFileSync(join(odd, 'e-text.json'), 'not json');
  });

  it('deliveries list finishes (a FIFO hung it, and SIGTERM with it), names each file passed over and why, and never reads the big ones (peak RSS measured)', async () => {
    const started = Date.now();
    const r = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      // GNU time reports the peak resident memory of the process (%M, KiB)
      const child = spawn('/usr/bin/time', ['-f', 'peak-rss-kib %M', process.execPath, BIN, 'deliveries', 'list', '--dir', odd], { env: cleanEnv({ WXHOOKS_CONFIG_DIR: store }), detached: true });
      let stderr = '';
      child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
      const timer = setTimeout(() => process.kill(-child.pid!, 'SIGKILL'), 20_000); // time and the CLI under it (hung on the FIFO, it ignored SIGTERM)
      child.on('close', (code) => {
        clearTimeout(timer);
        resolve({ code, stderr });
      });
    });
    expect(r.stderr).toContain('warning: 5 files in');
    expect(r.stderr).toContain('a-fifo.json: a FIFO (a named pipe), not a regular file');
    expect(r.stderr).toContain('b-zero.json: a symbolic link, which is not followed');
    expect(r.stderr).toContain('c-sparse.json: 600 MiB, over the 128 MiB a saved delivery may be');
    expect(r.stderr).toContain('d-folder.json: a folder, not a regular file');
    expect(r.stderr).toContain('e-text.json: not JSON');
    expect(r.code).toBe(0);
    const peak = Number(/peak-rss-kib (\d+)/.exec(r.stderr)![1]) / 1024;
    process.stdout.write(`deliveries list over a FIFO, /dev/zero and a 600 MB sparse file: ${Date.now() - started} ms, peak RSS ${peak.toFixed(0)} MiB\n`);
    expect(peak).toBeLessThan(200); // it was ~590 MiB more than this, reading them
  });

  it('runs --dir, and verify and send given one of them, refuse or pass over without hanging', async () => {
    const runs = await spawnCli(['runs', '--dir', odd], { env: { WXHOOKS_CONFIG_DIR: store }, timeoutMs: 15_000 });
    expect(runs.code).toBe(0);
    expect(runs.stderr).toContain('a-fifo.json: a FIFO');
    for (const [name, says] of [
      ['a-fifo.json', 'a FIFO (a named pipe), not a regular file'],
      ['c-sparse.json', '600 MiB, over the 128 MiB a saved delivery may be'],
    ]) {
      const verify = await spawnCli(['verify', join(odd, name!), '--secret-env', 'S'], { env: env(), timeoutMs: 15_000 });
      expect(verify.code).toBe(2);
      expect(verify.stderr).toContain(says);
      const send = await spawnCli(['send', join(odd, name!), '--to', `${app.url}/hooks`, '--secret-env', 'S'], { env: env(), timeoutMs: 15_000 });
      expect(send.code).toBe(2);
      expect(send.stderr).toContain(says);
    }
    // a file the user names through a link is theirs to name: followed, then checked (here, a device)
    const zero = await spawnCli(['verify', join(odd, 'b-zero.json'), '--secret-env', 'S'], { env: env(), timeoutMs: 15_000 });
    expect(zero.code).toBe(2);
    expect(zero.stderr).toContain('a device, not a regular file');
  });
});
