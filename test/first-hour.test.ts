import { readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { main } from '../src/cli.js';
import { startEmulator, type RunningEmulator } from '../src/emulator/server.js';
import { signDelivery } from '../src/signing/index.js';
import { tempDir } from './helpers/cli.js';
import { runInProcess, startInProcess, testIo, type InProcessRun } from './helpers/context.js';
import { emulatorFor } from './helpers/emulator.js';
import { startServer, type TestServer } from './helpers/server.js';

// The first hour of a newcomer (issue #34, sections 2 to 4), each point by its section: in-process where
// no process is needed, against real emulators and receivers on 127.0.0.1.

// eslint-disable-next-line no-control-regex
const visibleLength = (text: string) => text.replace(/\u001b\[[0-9;]*m/g, '').length;

/** The first stdout line (text) of a running command that holds `text`. */
const line = (run: InProcessRun, text: string) => run.waitFor<string>((l) => typeof l === 'string' && l.includes(text));

/** A webhook made through the CLI (its secret stored): its id and its subscriptions. */
async function created(env: Record<string, string>, url: string, ...types: string[]): Promise<{ id: string; subscriptions: { id: string; type: string }[] }> {
  const r = await runInProcess(['webhook', 'create', '--url', url, ...types.flatMap((t) => ['--subscribe', t]), '--json'], { env });
  expect(r.code, r.stderr).toBe(0);
  return JSON.parse(r.stdout) as { id: string; subscriptions: { id: string; type: string }[] };
}

/** An emulator command run in this process, and the environment its export line gives. */
async function emulatorCommand(args: string[], dir: string): Promise<{ run: InProcessRun; env: Record<string, string> }> {
  const run = startInProcess(['--no-color', 'emulator', ...args], { env: { WXHOOKS_CONFIG_DIR: dir } });
  const exported = await line(run, 'export WX_BASE_URL=');
  const [, url, key] = /WX_BASE_URL=(\S+) WX_API_KEY=(\S+)/.exec(exported)!;
  return { run, env: { WX_BASE_URL: url!, WX_API_KEY: key!, WXHOOKS_CONFIG_DIR: dir } };
}

describe('2. what the service did is visible', () => {
  let app: TestServer;
  let calls = 0;
  beforeAll(async () => {
    app = await startServer((_req, res) => {
      calls++;
      if (calls === 1) res.writeHead(500, { 'content-type': 'text/plain' }).end('database not ready');
      else res.writeHead(200).end('stored');
    });
  });
  afterAll(() => app.close());

  it('the emulator shows each delivery attempt on its terminal (webhook, subscription, trigger, the answer, the next retry); `emulator deliveries` lists them', async () => {
    const { run, env } = await emulatorCommand(['--port', '0', '--retry-delays', '50ms'], tempDir());
    try {
      const hook = await created(env, `${app.url}/hooks`, 'forecast_hour.available');
      const sub = hook.subscriptions[0]!.id;
      const trigger = await runInProcess(['trigger', 'forecast_hour.available', '--json'], { env });
      const triggerId = (JSON.parse(trigger.stdout) as { trigger_id: string }).trigger_id;
      const failed = await line(run, 'attempt 1:');
      expect(failed).toMatch(
        new RegExp(
          `✗ forecast_hour\\.available attempt 1: failed: the receiver answered 500 "database not ready" \\(\\d+ ms\\); retry 2 at \\d\\d:\\d\\d:\\d\\d.* {2}webhook ${hook.id} sub ${sub} ${triggerId}$`,
        ),
      );
      expect(await line(run, 'attempt 2:')).toMatch(new RegExp(`✓ forecast_hour\\.available attempt 2: delivered: 200 \\(\\d+ ms\\) {2}webhook ${hook.id} sub ${sub} ${triggerId}$`));

      const listed = await runInProcess(['emulator', 'deliveries'], { env });
      expect(listed.code, listed.stderr).toBe(0);
      const rows = listed.stdout
        .trim()
        .split('\n')
        .map((l) => l.split('\t'));
      expect(rows[0]).toEqual(['TIME', 'WEBHOOK', 'SUBSCRIPTION', 'TYPE', 'TRIGGER', 'ATTEMPT', 'RESULT', 'NEXT', 'ANSWER']);
      expect(rows.slice(1).map((r) => [r[1], r[2], r[4], r[5], r[6]!.replace(/ \(\d+ ms\)/, ''), r[8]])).toEqual([
        [hook.id, sub, triggerId, '1', 'failed 500', 'database not ready'],
        [hook.id, sub, triggerId, '2', 'delivered 200', 'stored'],
      ]);
      const json = JSON.parse((await runInProcess(['emulator', 'deliveries', '--failed', '--json'], { env })).stdout) as { deliveries: { attempt: number; status: number }[] };
      expect(json.deliveries).toMatchObject([{ attempt: 1, status: 500, outcome: 'failed', trigger_id: triggerId }]);
    } finally {
      await run.stop();
    }
  });

  it('a restarted emulator keeps its webhooks (in the store folder, by port), so their stored secrets stay good; --in-memory keeps nothing', async () => {
    const dir = join(tempDir(), 'store');
    const port = String(await freePort());
    const first = await emulatorCommand(['--port', port], dir);
    expect(statSync(dir).mode & 0o777).toBe(0o700); // made private, as the secrets' folder is
    const hook = await created(first.env, 'https://example.com/hooks', 'degree_days.available');
    expect(await first.run.stop()).toBe(130);

    const again = await emulatorCommand(['--port', port], dir);
    expect(again.run.io.stdout.text).toMatch(new RegExp(`webhooks kept in ${dir.replace(/[/.]/g, '\\$&')}/emulator-${port}\\.json: 1 from before`));
    const got = await runInProcess(['webhook', 'get', hook.id, '--json'], { env: again.env });
    expect(got.code, got.stderr).toBe(0);
    expect(JSON.parse(got.stdout)).toMatchObject({ id: hook.id, url: 'https://example.com/hooks' });
    await again.run.stop();

    const throwaway = await emulatorCommand(['--port', port, '--in-memory'], dir);
    expect(throwaway.run.io.stdout.text).toContain('webhooks in memory only');
    expect((await runInProcess(['webhook', 'get', hook.id], { env: throwaway.env })).code).toBe(4);
    await created(throwaway.env, 'https://example.com/other');
    await throwaway.run.stop();
    // and what the throwaway one made was not kept
    const last = await emulatorCommand(['--port', port], dir);
    expect((JSON.parse((await runInProcess(['webhook', 'list', '--json'], { env: last.env })).stdout) as { webhooks: unknown[] }).webhooks).toHaveLength(1);
    await last.run.stop();
  });

  it('a running listen --webhook ID takes the new secret of a re-created webhook, and says so', async () => {
    const port = await freePort();
    const dir = tempDir();
    let emu = await startEmulator({ port: 0 });
    const emuPort = emu.port;
    let env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: dir };
    const first = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available');
    const listen = startInProcess(['listen', '--webhook', first.id, '--port', String(port), '--json'], { env });
    try {
      await listen.waitFor<{ event?: string }>((v) => v?.event === 'listening');
      // the emulator started afresh (no state kept): the same id again, with a new secret, stored over the old one
      await emu.close();
      emu = await startEmulator({ port: emuPort, apiKey: emu.apiKey });
      env = { ...env, WX_API_KEY: emu.apiKey };
      const second = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available');
      expect(second.id).toBe(first.id);
      expect(await listen.waitFor<{ event?: string }>((v) => v?.event === 'secret_changed')).toEqual({ event: 'secret_changed', webhook_id: first.id });
      expect((await runInProcess(['trigger', 'forecast_hour.available'], { env })).code).toBe(0);
      const got = await listen.waitFor<{ outcome?: string }>((v) => typeof v?.outcome === 'string');
      expect(got).toMatchObject({ outcome: 'accepted', status: 200 });
    } finally {
      await listen.stop();
      await emu.close();
    }
  });

  it("listen --webhook of a webhook the service does not have: the command to make one names listen's own URL, and nothing tells to update it", async () => {
    const emu = await startEmulator({ port: 0 });
    const env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, WXHOOKS_CONFIG_DIR: tempDir() };
    try {
      expect((await runInProcess(['secret', 'set', '99'], { env, stdin: 'whsec_b2xkZXI=' })).code).toBe(0);
      const run = startInProcess(['listen', '--webhook', '99', '--port', '0'], { env });
      await run.waitForStderr('Create one that points here');
      const url = /Listening on (\S+),/.exec(run.io.stderr.text)![1]!;
      expect(run.io.stderr.text).toContain(`wxhooks webhook create --url ${url} --subscribe forecast_hour.available`);
      expect(run.io.stderr.text).not.toContain('PORT');
      expect(run.io.stderr.text).not.toContain('webhook update 99');
      await run.stop();
    } finally {
      await emu.close();
    }
  });

  it('trigger with a well-formed key the emulator refuses: the key was refused (exit 3), not "not an emulator"', async () => {
    const emu = await startEmulator({ port: 0 });
    try {
      const other = `wb_${Buffer.from(`emulator:${'0'.repeat(32)}`).toString('base64')}`;
      const r = await runInProcess(['trigger', 'forecast_hour.available'], { env: { WX_BASE_URL: emu.url, WX_API_KEY: other } });
      expect(r.code).toBe(3);
      expect(r.stderr).not.toContain('is not a wxhooks emulator');
      expect(r.stderr).toContain("the Bearer key is not this emulator's key");
    } finally {
      await emu.close();
    }
  });
});

describe('3. commands that do not fight the user', () => {
  let emu: RunningEmulator;
  let env: Record<string, string>;
  emulatorFor({}, (made) => ({ emu, env } = made));

  it('doctor, with listen running on the port: the chain is checked through it (exit 0), not "port already in use"', async () => {
    const port = await freePort();
    const hook = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available', 'degree_days.available');
    const listen = startInProcess(['listen', '--webhook', hook.id, '--port', String(port)], { env });
    try {
      await listen.waitForStderr('Ctrl-C to stop.');
      const r = await runInProcess(['doctor', '--webhook', hook.id, '--json'], { env });
      expect(r.code, r.stdout + r.stderr).toBe(0);
      const { checks } = JSON.parse(r.stdout) as { checks: { name: string; ok: boolean; detail: string }[] };
      const delivery = checks.filter((c) => c.name.startsWith('delivery'));
      expect(delivery.map((c) => c.name)).toEqual(['delivery: forecast_hour.available', 'delivery: degree_days.available']);
      for (const c of delivery)
        expect(c).toMatchObject({ ok: true, detail: expect.stringMatching(new RegExp(`reached the running \`wxhooks listen\` \\(pid ${process.pid}\\) on port ${port}, which verified it`)) });
      // and listen saw them, as test deliveries
      for (const type of ['forecast_hour.available', 'degree_days.available']) expect(await line(listen, type)).toMatch(/✓ 200 {2}\S+ test/);
    } finally {
      await listen.stop();
    }
  });

  it("listen --webhook on a port another listen holds: says so, with its pid, and that another port needs the webhook's URL updated", async () => {
    const port = await freePort();
    const hook = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available');
    // a second webhook to the same port (the same webhook twice is refused earlier: its processed-pairs file has one owner)
    const other = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available');
    const first = startInProcess(['listen', '--webhook', hook.id, '--port', String(port)], { env });
    try {
      await first.waitForStderr('Ctrl-C to stop.');
      const second = await runInProcess(['listen', '--webhook', other.id, '--port', String(port)], { env });
      expect(second.code).toBe(2);
      expect(second.stderr).toContain(`Port ${port} on 127.0.0.1 is already in use, by another \`wxhooks listen\` (pid ${process.pid}, for webhook ${hook.id}`);
      expect(second.stderr).toContain(`webhook ${other.id} delivers to http://127.0.0.1:${port}/, so a new port needs \`wxhooks webhook update ${other.id} --url http://127.0.0.1:NEW_PORT/\``);
      expect(second.stderr).not.toContain('0 picks a free one');
    } finally {
      await first.stop();
    }
  });

  it('ping WEBHOOK without a subscription id: a test delivery of each subscription; exit 7 when one failed', async () => {
    const port = await freePort();
    const hook = await created(env, `http://127.0.0.1:${port}/`, 'forecast_hour.available', 'initialization_time.available');
    const listen = startInProcess(['listen', '--webhook', hook.id, '--port', String(port)], { env });
    try {
      await listen.waitForStderr('Ctrl-C to stop.');
      const r = await runInProcess(['ping', hook.id], { env });
      expect(r.code, r.stderr).toBe(0);
      for (const s of hook.subscriptions) expect(r.stdout).toContain(`✓ ${s.type} (subscription ${s.id}): the receiver answered 2xx`);
    } finally {
      await listen.stop();
    }
    const down = await runInProcess(['ping', hook.id, '--json'], { env });
    expect(down.code).toBe(7);
    expect((JSON.parse(down.stdout) as { pings: { delivered: boolean }[] }).pings.map((p) => p.delivered)).toEqual([false, false]);
  });

  it('webhook create: the table under "Created webhook N" names its first column SUBSCRIPTION', async () => {
    const io = testIo({ env: { ...env, NO_COLOR: '1' }, tty: true });
    expect(await main(['node', 'wxhooks', 'webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'degree_days.available'], io)).toBe(0);
    const table = io.stdout.text.split('\n').slice(1, 3);
    expect(table[0]).toMatch(/^SUBSCRIPTION +TYPE +FILTERS/);
    expect(io.stdout.text).not.toMatch(/^ID /m);
  });
});

describe('4. fit the terminal', () => {
  let emu: RunningEmulator;
  let env: Record<string, string>;
  beforeAll(async () => {
    emu = await startEmulator({ port: 0 });
    env = { WX_BASE_URL: emu.url, WX_API_KEY: emu.apiKey, NO_COLOR: '1' };
  });
  afterAll(() => emu.close());

  for (const columns of [80, 200]) {
    it(`the secret box at ${columns} columns: no line wider than the terminal, the secret whole on a line of its own`, async () => {
      // a long store folder, as on a real machine: its path is in the box
      const dir = join(tempDir(), 'a-rather-long-folder-name-for-the-store-of-wxhooks-settings');
      const io = testIo({ env: { ...env, WXHOOKS_CONFIG_DIR: dir }, tty: true });
      io.stdout.columns = columns;
      expect(await main(['node', 'wxhooks', 'webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'degree_days.available'], io)).toBe(0);
      const lines = io.stdout.text.split('\n');
      for (const l of lines) expect(visibleLength(l), l).toBeLessThanOrEqual(columns);
      const box = lines.filter((l) => /^[┌│└]/.test(l));
      expect(new Set(box.map((l) => visibleLength(l))).size).toBe(1); // every border line as wide as the others
      expect(box.some((l) => /│ {3}whsec_[A-Za-z0-9+/]{43}= +│/.test(l))).toBe(true);
      if (columns === 200) expect(box.some((l) => l.includes(`Stored in ${dir}/secrets.json; see it again with`))).toBe(true);
    });

    it(`listen's lines at ${columns} columns: none wider than the terminal; the least needed fields go first`, async () => {
      const secret = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
      const port = await freePort();
      const run = startInProcess(['listen', '--secret-env', 'S', '--port', String(port)], { env: { S: secret, NO_COLOR: '1' }, tty: true });
      run.io.stdout.columns = columns;
      await run.waitForStderr('Ctrl-C to stop.');
      const body = Buffer.from(
        JSON.stringify({
          type: 'forecast_hour.available',
          webhook_id: '1234',
          subscription_id: '5678',
          trigger_id: 'trg_00mwqxjw4m1234567890abcdefgh',
          data: { model: 'wm-6', initialization_time: '2026-11-21T18:00:00Z', forecast_hour: 6 },
        }),
      );
      await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: signDelivery({ secret, body, triggerId: 'trg_00mwqxjw4m1234567890abcdefgh' }), body });
      const text = await line(run, 'forecast_hour.available');
      await run.stop();
      for (const l of run.io.stdout.text.split('\n')) expect(visibleLength(l), l).toBeLessThanOrEqual(columns);
      expect(text).toMatch(/✓ 200 {2}forecast_hour\.available/);
      expect(text).toContain('+6h');
      if (columns === 200) expect(text).toMatch(/webhook 1234 sub 5678 trg_00mwqxjw4m1234567890abcdefgh {2}wm-6 2026-11-21T18:00Z \+6h {2}\d+ B {2}standard$/);
      else expect(text).not.toContain('standard');
    });
  }

  it('the layout pinned on the first delivery is said with --verbose only', async () => {
    const secret = 'whsec_' + Buffer.alloc(32, 8).toString('base64');
    for (const verbose of [false, true]) {
      const port = await freePort();
      const run = startInProcess(['listen', '--secret-env', 'S', '--port', String(port), ...(verbose ? ['--verbose'] : [])], { env: { S: secret } });
      await run.waitForStderr('Ctrl-C to stop.');
      const body = Buffer.from(JSON.stringify({ type: 'degree_days.available', subscription_id: '1', trigger_id: 'trg_1' }));
      await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: signDelivery({ secret, body, triggerId: 'trg_1' }), body });
      await line(run, 'degree_days.available');
      await run.stop();
      if (verbose) expect(run.io.stdout.text).toContain('pinned for this session');
      else expect(run.io.stdout.text).not.toMatch(/pinned|layout;/);
    }
  });

  it('listen --help: the three commonest uses come first, before the options', async () => {
    const help = (await runInProcess(['--no-color', 'listen', '--help'])).stdout;
    const uses = help.indexOf('The commonest uses:');
    expect(uses).toBeGreaterThan(-1);
    expect(uses).toBeLessThan(help.indexOf('Where it listens:'));
    const first = help.slice(uses).split('\n').slice(1, 4);
    expect(first.map((l) => /wxhooks listen (.*?) {2,}#|wxhooks listen (.*)$/.exec(l)?.slice(1).find(Boolean))).toEqual([
      '--webhook 7',
      '--webhook 7 --forward-to http://localhost:3000/webhooks',
      '--public-url ngrok --check',
    ]);
  });
});

describe('the README', () => {
  it('its first two screens say: install, try it offline, then the real service; Install leads with the tarball, made before it is installed', () => {
    const readme = readFileSync(resolve(import.meta.dirname, '../README.md'), 'utf8');
    const screens = readme.split('\n').slice(0, 100).join('\n');
    const steps = ['npm install -g ./wxhooks-', 'npm run demo', 'wxhooks emulator', 'wxhooks auth status', 'examples/express.js'].map((s) => screens.indexOf(s));
    expect(
      steps.every((i) => i > -1),
      screens,
    ).toBe(true);
    expect(steps).toEqual([...steps].sort((a, b) => a - b));
    const install = /## Install\n[\s\S]*?```sh\n([\s\S]*?)```/.exec(readme)![1]!;
    expect(
      install
        .split('\n')
        .filter((l) => l.startsWith('npm'))
        .map((l) => l.split('#')[0]!.trim()),
    ).toEqual(['npm ci && npm pack', 'npm install -g ./wxhooks-0.1.0.tgz']);
  });
});
