import { createRequire } from 'node:module';
import { readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { startEmulator, type RunningEmulator } from '../src/emulator/server.js';
import { signDelivery } from '../src/signing/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { runInProcess, startInProcess } from './helpers/context.js';
import { emulatorFor } from './helpers/emulator.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';

// What a newcomer at a terminal, and the service's own Python client, ran into (issue #27): each point
// named by its number there, in-process where no process is needed. The official client's requests are
// sent here as it sends them (method, path, query, body, headers), to the emulator, which answers as the
// live service would.

let emu: RunningEmulator;
let env: Record<string, string>;
emulatorFor({ retryDelays: [100] }, (made) => ({ emu, env } = made));

/** A request as the official client makes it. */
async function asTheClient(method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const res = await fetch(`${emu.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${emu.apiKey}`, 'content-type': 'application/json', 'user-agent': 'python-requests/2.32' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
}

describe('the official client against the emulator', () => {
  it('1. filters.event_type as a string, as its README and add-subscription send it: accepted, and it filters', async () => {
    const created = await asTheClient('POST', '/webhooks/v1', { url: 'https://example.com/hooks' });
    expect(created.status).toBe(201);
    const id = created.json.webhook_id as string;
    const added = await asTheClient('PATCH', `/webhooks/v1/${id}/subscriptions`, { subscription_type: 'events.available', filters: { event_type: 'heatwave' } });
    expect(added.status).toBe(200);
    const sub = (added.json.subscriptions as Record<string, { filters: unknown }>)['events.available']!;
    expect(sub.filters).toEqual({ event_type: 'heatwave' });
    expect((await asTheClient('PATCH', `/webhooks/v1/${id}/subscriptions/1`, { filters: { event_type: ['heatwave', 'front'] } })).status).toBe(200);
    expect((await asTheClient('PATCH', `/webhooks/v1/${id}/subscriptions/1`, { filters: { event_type: 7 } })).json).toMatchObject({
      error: { message: 'filters.event_type must be a string or a list of strings' },
    });
  });

  it('2. ?active=True and ?active=False (Python booleans), and 1/0: the same as true/false', async () => {
    for (const [value, active] of [
      ['True', true],
      ['False', false],
      ['1', true],
      ['0', false],
      ['true', true],
    ] as const) {
      const r = await asTheClient('GET', `/webhooks/v1?active=${value}`);
      expect(r.status, value).toBe(200);
      expect(
        (r.json.webhooks as { active: boolean }[]).every((w) => w.active === active),
        value,
      ).toBe(true);
    }
    expect((await asTheClient('GET', '/webhooks/v1?active=yes')).status).toBe(400);
  });

  it('3. a 35-character legacy key that starts with wb_, with a client id: legacy Basic with a token, accepted by a strict server (the emulator checks the token)', async () => {
    const key = `wb_${'k'.repeat(32)}`;
    expect(key).toHaveLength(35);
    const legacy = await startEmulator({ port: 0, apiKey: key, clientId: 'acme' });
    try {
      const r = await runInProcess(['auth', 'status', '--json'], { env: { WX_BASE_URL: legacy.url, WB_API_KEY: key, WB_CLIENT_ID: 'acme' } });
      expect(r.code).toBe(0);
      expect(JSON.parse(r.stdout)).toMatchObject({ authed: true, client_id: 'acme', credentials: { scheme: 'basic', client_id: 'acme', client_id_from: 'WB_CLIENT_ID' } });
      // the key as Bearer is refused by this server: what was sent was the token
      const bearer = await runInProcess(['auth', 'status'], { env: { WX_BASE_URL: legacy.url, WB_API_KEY: key, WB_CLIENT_ID: 'acme' } });
      expect(bearer.stdout).toContain('Basic (legacy');
      // without a client id it is still no current key: exit 2, saying so
      const alone = await runInProcess(['auth', 'status'], { env: { WX_BASE_URL: legacy.url, WB_API_KEY: key } });
      expect(alone.code).toBe(2);
      expect(alone.stderr).toContain('a legacy key (32 or 35 characters) goes with a client id');
    } finally {
      await legacy.close();
    }
    // and the emulator takes it with --client-id (it refused to start with it)
    const started = startInProcess(['emulator', '--port', '0', '--json', '--api-key', key, '--client-id', 'acme'], { env: { WXHOOKS_CONFIG_DIR: tempDir() } });
    expect(await started.waitFor<{ api_key?: string }>((v) => typeof v === 'object' && v.api_key === key)).toMatchObject({ client_id: 'acme' });
    await started.stop();
  });
});

describe('steps that work as written', () => {
  it("4. the emulator's closing hint: create the webhook first (it stores the secret), then listen for it", async () => {
    const run = startInProcess(['emulator', '--port', '0'], { env: { WXHOOKS_CONFIG_DIR: tempDir() } });
    await run.waitFor<string>((l) => typeof l === 'string' && l.includes('trigger'));
    const text = run.io.stdout.text;
    expect(text.indexOf('webhook create')).toBeGreaterThan(-1);
    expect(text.indexOf('webhook create')).toBeLessThan(text.indexOf('listen --webhook 1'));
    await run.stop();
  });

  it('7. the emulator keeps its key across restarts (the export line stays good); --new-key makes another', async () => {
    const dir = tempDir();
    const keyOf = async (args: string[] = []) => {
      const run = startInProcess(['emulator', '--port', '0', '--json', ...args], { env: { WXHOOKS_CONFIG_DIR: dir } });
      const { api_key } = await run.waitFor<{ api_key: string }>((v) => typeof v === 'object' && 'api_key' in v);
      await run.stop();
      return api_key;
    };
    const first = await keyOf();
    expect(await keyOf()).toBe(first);
    const fresh = await keyOf(['--new-key']);
    expect(fresh).not.toBe(first);
    expect(await keyOf()).toBe(fresh);
  });

  it('8 and 18. listen --webhook ID: a webhook the service does not have is said, with how to make one; one that points here is not told to be pointed here', async () => {
    const port = await freePort();
    const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available', '--json'], { env });
    const { id } = JSON.parse(created.stdout) as { id: string };
    const here = startInProcess(['listen', '--webhook', id, '--port', String(port)], { env });
    await here.waitForStderr('Ready.');
    expect(here.io.stderr.text).not.toContain('Point the webhook here');
    await here.stop();
    // the store still holds a secret for webhook 99 of an older emulator
    expect((await runCli(['secret', 'set', '99'], { env, stdin: 'whsec_b2xkZXI=' })).code).toBe(0);
    const gone = startInProcess(['listen', '--webhook', '99', '--port', '0'], { env });
    await gone.waitForStderr('Ready.');
    expect(gone.io.stderr.text).toContain('the service has no webhook 99');
    expect(gone.io.stderr.text).toContain('wxhooks webhook create --url');
    await gone.stop();
  });
});

describe('a wrong answer where an error belongs', () => {
  let notService: TestServer;
  beforeAll(async () => {
    notService = await startServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('stored');
    });
  });
  afterAll(() => notService.close());

  it('9. against something that is not the service (an app answering 200 "stored"): webhook list and auth status exit 6, "not the service"', async () => {
    const e = { ...env, WX_BASE_URL: notService.url };
    for (const args of [
      ['webhook', 'list'],
      ['auth', 'status'],
    ]) {
      const r = await runInProcess(args, { env: e });
      expect(r.code, args.join(' ')).toBe(6);
      expect(r.stderr).toContain('This is not the service');
      expect(r.stdout).not.toContain('No webhooks found');
    }
  });

  it("10. against listen's own port: the 404 says the base URL may be wrong", async () => {
    const run = startInProcess(['listen', '--secret-env', 'S', '--port', '0', '--json'], { env: { S: 'whsec_eA==' } });
    const { url } = await run.waitFor<{ url: string }>((v) => typeof v === 'object' && v !== null && 'url' in v);
    const r = await runInProcess(['webhook', 'list'], { env: { ...env, WX_BASE_URL: url } });
    expect(r.code).toBe(4);
    expect(r.stderr).toContain('The base URL may be wrong');
    await run.stop();
  });
});

describe('mistakes caught', () => {
  it('11. --subscribe with a comma where ";" belongs: exit 2, saying ";" separates the keys', async () => {
    const r = await runInProcess(['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:model=wm-6,hours=0:00'], { env });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('keys are separated by ";", not ","');
  });

  it('12. listen --until with a type that does not exist: exit 2, with the nearest type', async () => {
    const r = await runInProcess(['listen', '--secret-env', 'S', '--until', 'initialization_time.availble'], { env: { S: 'whsec_eA==' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('did you mean initialization_time.available?');
    const init = await runInProcess(['listen', '--secret-env', 'S', '--until', 'init'], { env: { S: 'whsec_eA==' } });
    expect(init.code).toBe(2);
  });

  it('13 and 14. an unknown response type is warned of (and sent); a webhook with no subscription is warned of', async () => {
    const r = await runInProcess(['webhook', 'create', '--url', 'https://example.com/', '--subscribe', 'forecast_hour.available:response=griddd'], { env });
    expect(r.code).toBe(0);
    expect(r.stderr).toContain('"griddd" is not a response type wxhooks knows (did you mean gridded?)');
    const bare = await runInProcess(['webhook', 'create', '--url', 'https://example.com/'], { env });
    expect(bare.code).toBe(0);
    expect(bare.stderr).toContain('no subscription, so nothing will ever be delivered');
    const sub = await runInProcess(
      [
        'subscription',
        'add',
        (JSON.parse((await runInProcess(['webhook', 'create', '--url', 'https://example.com/', '--json'], { env })).stdout) as { id: string }).id,
        'degree_days.available',
        '--response',
        'nonsense',
      ],
      { env },
    );
    expect(sub.stderr).toContain('"nonsense" is not a response type');
  });

  it('15. webhook list, piped, with more pages: said on stderr', async () => {
    const e = { ...env, WXHOOKS_CONFIG_DIR: tempDir() };
    const many = await startEmulator({ port: 0 });
    try {
      for (let i = 0; i < 25; i++)
        await fetch(`${many.url}/webhooks/v1`, { method: 'POST', headers: { authorization: `Bearer ${many.apiKey}` }, body: JSON.stringify({ url: `https://example.com/${i}` }) });
      const r = await runInProcess(['webhook', 'list'], { env: { ...e, WX_BASE_URL: many.url, WX_API_KEY: many.apiKey } });
      expect(r.code).toBe(0);
      expect(r.stdout.trim().split('\n')).toHaveLength(21); // a header and 20 rows
      expect(r.stderr).toContain('page 1 of 2 (25 webhooks)');
    } finally {
      await many.close();
    }
  });
});

describe('messages that say what happened', () => {
  it('16. a ping the service took but could not deliver is said so, not "refused"', async () => {
    const port = await freePort(); // nothing listens there
    const created = JSON.parse((await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'degree_days.available', '--json'], { env })).stdout) as {
      id: string;
      subscriptions: { id: string }[];
    };
    const r = await runInProcess(['ping', created.id, created.subscriptions[0]!.id], { env });
    expect(r.code).toBe(7);
    expect(r.stderr).toContain('took the ping but could not deliver it');
    expect(r.stderr).not.toContain('refused the ping');
  });

  it('17. webhook update --inactive says it is now inactive', async () => {
    const { id } = JSON.parse((await runCli(['webhook', 'create', '--url', 'https://example.com/', '--json'], { env })).stdout) as { id: string };
    const r = await runInProcess(['webhook', 'update', id, '--inactive'], { env });
    expect(r.stdout).toContain(`Updated webhook ${id}: now inactive`);
  });

  it('19. deliveries replay without a secret names deliveries replay, not listen', async () => {
    const dir = tempDir();
    const saved = { wxhooks_delivery: 1, received_at: '2026-11-23T00:00:00.000Z', method: 'POST', path: '/', headers: { 'trigger-id': 'trg_saved' }, body: '{"trigger_id":"trg_saved"}' };
    writeFileSync(join(dir, 'x.json'), JSON.stringify(saved));
    const r = await runInProcess(['deliveries', 'replay', 'x.json', '--dir', dir, '--to', 'http://127.0.0.1:1/'], { env, stdinTTY: true });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('wxhooks deliveries replay');
    expect(r.stderr).not.toContain('| wxhooks listen');
  });

  it('20. --forward-to localhost:3000 suggests http://localhost:3000', async () => {
    const r = await runInProcess(['listen', '--secret-env', 'S', '--forward-to', 'localhost:3000'], { env: { S: 'whsec_eA==' } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('did you mean http://localhost:3000?');
  });

  it('21. send says a failure once, on stderr', async () => {
    const app = await startServer((_req, res) => sendJson(res, 502, { error: 'down for maintenance' }));
    try {
      const r = await runInProcess(['send', '--to', app.url, '--secret-env', 'S'], { env: { S: 'whsec_eA==' } });
      expect(r.code).toBe(7);
      expect(r.stdout).toBe('');
      expect(r.stderr.split('down for maintenance')).toHaveLength(2);
    } finally {
      await app.close();
    }
  });
});

describe('small things', () => {
  it('22. a Trigger-Id may be given by a unique start of it; one that starts several lists them (exit 2)', async () => {
    const dir = tempDir();
    const secret = 'whsec_' + Buffer.alloc(32, 5).toString('base64');
    const port = await freePort();
    const run = startInProcess(['listen', '--port', String(port), '--secret-env', 'S', '--save-dir', dir, '--json'], { env: { S: secret } });
    await run.waitFor<{ event?: string }>((v) => typeof v === 'object' && v?.event === 'listening');
    for (const t of ['trg_00mwq3aaa', 'trg_00mwq3aab', 'trg_99zzz']) {
      const body = Buffer.from(JSON.stringify({ type: 'degree_days.available', trigger_id: t, subscription_id: '1', data: {} }));
      await fetch(`http://127.0.0.1:${port}/`, { method: 'POST', headers: signDelivery({ secret, body, triggerId: t }), body });
    }
    await run.stop();
    const one = await runInProcess(['deliveries', 'show', 'trg_99', '--dir', dir, '--json']);
    expect(one.code).toBe(0);
    expect(JSON.parse(one.stdout)).toMatchObject({ trigger_id: 'trg_99zzz' });
    const several = await runInProcess(['deliveries', 'show', 'trg_00mwq3', '--dir', dir]);
    expect(several.code).toBe(2);
    expect(several.stderr).toContain('trg_00mwq3aaa, trg_00mwq3aab');
  });

  it("25. help: a group lists its commands before the global options; listen's options come in groups; runs says it exits 0 for an incomplete run", async () => {
    const group = (await runInProcess(['webhook', '--help'])).stdout;
    expect(group.indexOf('Commands:')).toBeLessThan(group.indexOf('Global Options:'));
    const listen = (await runInProcess(['listen', '--help'])).stdout;
    for (const heading of ['Where it listens:', 'What it verifies with:', 'Processed once', 'The inspector page:']) expect(listen).toContain(heading);
    expect((await runInProcess(['runs', '--help'])).stdout).toMatch(/exits 0 whatever it finds, an incomplete run included/);
    expect((await runInProcess(['--help'])).stdout).toMatch(/Exit codes:.* 10 storage failed,.* 141 output closed/s);
  });

  it('26. every package installed supports this Node: npm ci says no EBADENGINE', () => {
    const require = createRequire(import.meta.url);
    const semver = require('semver') as { satisfies(v: string, range: string): boolean };
    const lock = JSON.parse(readFileSync(resolve(import.meta.dirname, '../package-lock.json'), 'utf8')) as { packages: Record<string, { engines?: { node?: string } | string[] }> };
    const unfit = Object.entries(lock.packages).filter(([, p]) => p.engines && !Array.isArray(p.engines) && p.engines.node && !semver.satisfies(process.versions.node, p.engines.node));
    expect(unfit.map(([name, p]) => `${name} ${(p.engines as { node: string }).node}`)).toEqual([]);
  });
});
