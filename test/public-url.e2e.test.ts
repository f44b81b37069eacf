import { createServer } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startCli, startCliInProcess, type Cli, type Running } from './helpers/process.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';
import { API_KEY, startService, type FakeService } from './helpers/service.js';

// `listen --public-url`, `--check` and `doctor`, against a stand-in for the live service (integer ids,
// signing_secret, subscriptions as a list) whose ping really POSTs a signed delivery to the webhook's URL,
// and against the emulator.

let svc: FakeService;
beforeAll(async () => {
  svc = await startService('live', tempDir());
});
afterAll(() => svc.stop());

const hooks = () => [...svc.state.webhooks.values()];
const exists = (id: unknown) => svc.state.webhooks.has(String(id));

interface Temp<P extends Cli = Cli> {
  proc: P;
  url: string;
  webhookId: string;
}

/** `listen --public-url` in this process; `spawned`: the built binary, where a signal or kill -9 is the point. */
async function listenPublic(extra?: string[], env?: Record<string, string>, publicUrl?: string): Promise<Temp>;
async function listenPublic(extra: string[], env: Record<string, string>, publicUrl: string | undefined, spawned: true): Promise<Temp<Running>>;
async function listenPublic(extra: string[] = [], env: Record<string, string> = {}, publicUrl?: string, spawned = false): Promise<Temp> {
  const port = await freePort();
  const args = ['listen', '--port', String(port), '--json', '--public-url', publicUrl ?? `http://127.0.0.1:${port}/`, ...extra];
  const proc = spawned ? startCli(args, { ...svc.env, ...env }) : startCliInProcess(args, { ...svc.env, ...env });
  const created = await proc.waitFor<{ event?: string; webhook_id: string }>((v) => v.event === 'webhook_created');
  await proc.waitFor<{ event?: string }>((v) => v.event === 'listening');
  return { proc, url: `http://127.0.0.1:${port}/`, webhookId: created.webhook_id };
}

/** The service delivers a test delivery of each subscription of the webhook (its ping). */
async function pingAll(id: string): Promise<void> {
  const hook = svc.state.webhooks.get(id)!;
  for (const sub of hook.subscriptions) {
    const res = await fetch(`${svc.url}/webhooks/v1/${id}/subscriptions/${sub.id}/ping`, { method: 'POST', headers: { authorization: `Bearer ${API_KEY}` } });
    expect(res.status).toBe(204);
  }
}

const lastLine = (proc: Cli) => JSON.parse(proc.lines.at(-1)!) as Record<string, unknown>;

describe('listen --public-url: a temporary webhook, verified with its own secret, deleted however listen exits', () => {
  it('creates it (name, temporary note, subscriptions), verifies its deliveries, never stores its secret', async () => {
    const t = await listenPublic(['--subscribe', 'forecast_hour.available', '--subscribe', 'degree_days.available:model=wm-6']);
    try {
      const hook = svc.state.webhooks.get(t.webhookId)!;
      expect(hook.url).toBe(t.url);
      expect(hook.name).toMatch(/^wxhooks listen on /);
      expect(hook.note).toMatch(new RegExp(`^temporary webhook of wxhooks listen: host=\\S+ pid=${t.proc.pid} started=`));
      expect(hook.subscriptions.map((s) => s.type).sort()).toEqual(['degree_days.available', 'forecast_hour.available']);
      await pingAll(t.webhookId);
      const accepted = await t.proc.waitFor<{ outcome?: string; test?: boolean }>((v) => v.outcome === 'accepted');
      expect(accepted.test).toBe(true);
      // marked in webhook list
      const list = await runCli(['webhook', 'list', '--json'], { env: svc.env });
      expect((JSON.parse(list.stdout) as { webhooks: { id: string; temporary?: { pid: number } }[] }).webhooks.find((w) => w.id === t.webhookId)?.temporary?.pid).toBe(t.proc.pid);
    } finally {
      await t.proc.stop('SIGINT');
    }
    expect(exists(t.webhookId)).toBe(false);
    expect(lastLine(t.proc)).toMatchObject({ event: 'webhook_deleted', webhook_id: t.webhookId });
    // the secret was kept in memory only
    expect(await runCli(['secret', 'list', '--json'], { env: svc.env }).then((r) => r.stdout)).toBe('[]\n');
  });

  it.each([
    ['SIGINT', 130, false],
    ['SIGTERM', 143, false],
    ['SIGHUP', 129, false],
    // the binary's own signal handling (run() in src/cli.ts): one smoke test of a real signal
    ['SIGTERM, sent to the built binary,', 143, true],
  ] as const)('%s: deleted, exit %i', async (signal, code, spawned) => {
    const t = spawned ? await listenPublic(['--subscribe', 'forecast_hour.available'], {}, undefined, true) : await listenPublic(['--subscribe', 'forecast_hour.available']);
    expect(await t.proc.stop(spawned ? 'SIGTERM' : (signal as NodeJS.Signals))).toBe(code);
    expect(exists(t.webhookId)).toBe(false);
    expect(lastLine(t.proc)).toMatchObject({ event: 'webhook_deleted' });
  });

  it('--exit-after, --until, and --within running out: deleted each time', async () => {
    const a = await listenPublic(['--subscribe', 'forecast_hour.available', '--exit-after', '1']);
    await pingAll(a.webhookId);
    expect(await a.proc.exited).toBe(0);
    expect(exists(a.webhookId)).toBe(false);
    const b = await listenPublic(['--subscribe', 'degree_days.available', '--until', 'degree_days.available']);
    await pingAll(b.webhookId);
    expect(await b.proc.exited).toBe(0);
    expect(exists(b.webhookId)).toBe(false);
    const c = await listenPublic(['--subscribe', 'degree_days.available', '--until', 'initialization_time.available', '--within', '1s']);
    expect(await c.proc.exited).toBe(9);
    expect(exists(c.webhookId)).toBe(false);
    expect(lastLine(c.proc)).toMatchObject({ event: 'webhook_deleted' });
  });

  it('a delete that fails prints the id and the command to run, and keeps the exit code', async () => {
    const t = await listenPublic(['--subscribe', 'forecast_hour.available']);
    svc.before = (req, res) => {
      if (req.method !== 'DELETE') return false;
      sendJson(res, 503, { detail: 'maintenance' });
      return true;
    };
    try {
      expect(await t.proc.stop('SIGINT')).toBe(130);
    } finally {
      svc.before = undefined;
    }
    expect(lastLine(t.proc)).toMatchObject({ event: 'webhook_not_deleted', webhook_id: t.webhookId, delete: `wxhooks webhook delete ${t.webhookId} --yes` });
    expect(exists(t.webhookId)).toBe(true);
    await runCli(['webhook', 'delete', t.webhookId, '--yes'], { env: svc.env });
  });

  it('killed -9, its webhook is left: the next listen lists it with the command to delete it, --clean deletes it; two listens clean up only their own', async () => {
    const dead = await listenPublic(['--subscribe', 'forecast_hour.available'], {}, undefined, true); // kill -9: the built binary
    dead.proc.child.kill('SIGKILL');
    await dead.proc.exited;
    expect(exists(dead.webhookId)).toBe(true);

    // two processes (the built binary): which listen holds a webhook is told by its process
    const a = await listenPublic(['--subscribe', 'forecast_hour.available'], {}, undefined, true);
    const leftover = await a.proc.waitFor<{ event?: string; webhook_id?: string; delete?: string }>((v) => v.event === 'leftover');
    expect(leftover).toMatchObject({ webhook_id: dead.webhookId, delete: `wxhooks webhook delete ${dead.webhookId} --yes` });
    expect(exists(dead.webhookId)).toBe(true); // listed, not deleted
    // a second listen at the same time: a's webhook is held by a running listen, so not a leftover
    const b = await listenPublic(['--subscribe', 'forecast_hour.available', '--clean'], {}, undefined, true);
    await b.proc.waitFor<{ event?: string }>((v) => v.event === 'leftover_deleted');
    expect(exists(dead.webhookId)).toBe(false);
    expect(exists(a.webhookId)).toBe(true);
    await b.proc.stop();
    expect(exists(b.webhookId)).toBe(false);
    expect(exists(a.webhookId)).toBe(true);
    await a.proc.stop();
    expect(exists(a.webhookId)).toBe(false);
  });

  it('bad input: not an absolute URL, or with --webhook / --secret-env, is exit 2 and creates nothing', async () => {
    const before = hooks().length;
    for (const args of [
      ['--public-url', 'example.com/hooks'],
      ['--public-url', 'https://example.com/', '--webhook', '7'],
      ['--public-url', 'https://example.com/', '--secret-env', 'S'],
      ['--subscribe', 'forecast_hour.available'],
    ]) {
      const r = await runCli(['listen', '--port', '0', ...args], { env: { ...svc.env, S: 'x' } });
      expect(r.code, args.join(' ')).toBe(2);
    }
    expect(hooks().length).toBe(before);
  });

  it('the service refusing the create: its message, exit 5, nothing left behind', async () => {
    const before = hooks().length;
    const r = await runCli(['listen', '--port', '0', '--public-url', 'https://example.com/', '--subscribe', 'no_such.type'], { env: svc.env });
    expect(r.code).toBe(5);
    expect(r.stderr).toContain('unknown subscription type');
    expect(hooks().length).toBe(before);
  });

  it('created, but the port is taken: the webhook is deleted before exit 2', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', r));
    const port = (busy.address() as { port: number }).port;
    const before = hooks().length;
    try {
      const r = await runCli(['listen', '--port', String(port), '--public-url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available'], { env: svc.env });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('already in use');
      expect(r.stderr).toMatch(/Deleted temporary webhook \d+/);
      expect(hooks().length).toBe(before);
    } finally {
      busy.close();
    }
  });
});

describe('listen --check: which link of the chain works', () => {
  it('success: every subscription verified', async () => {
    const t = await listenPublic(['--subscribe', 'forecast_hour.available', '--subscribe', 'degree_days.available', '--check']);
    try {
      const checks = [
        await t.proc.waitFor<Record<string, unknown>>((v) => v.event === 'check'),
        await t.proc.waitFor<Record<string, unknown>>((v) => v.event === 'check' && v.type === 'degree_days.available'),
      ];
      for (const c of checks) expect(c.result).toBe('verified');
    } finally {
      await t.proc.stop();
    }
  });

  it('a URL that leads elsewhere: the ping is accepted, nothing arrives here', async () => {
    const elsewhere = await startServer((_req, res) => sendJson(res, 200, { ok: true }));
    try {
      const port = await freePort();
      const proc = startCliInProcess(
        ['--timeout', '1s', 'listen', '--port', String(port), '--json', '--public-url', `${elsewhere.url}/`, '--subscribe', 'forecast_hour.available', '--check'],
        svc.env,
      );
      try {
        const check = await proc.waitFor<Record<string, unknown>>((v) => v.event === 'check');
        expect(check).toMatchObject({ result: 'not_arrived' });
        expect(String(check.hint)).toContain('does not lead here');
      } finally {
        await proc.stop();
      }
    } finally {
      await elsewhere.close();
    }
  });

  it('the wrong secret: a delivery arrives and does not verify, with the reason', async () => {
    const port = await freePort();
    const created = await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'forecast_hour.available', '--json', '--no-save'], { env: svc.env });
    const id = (JSON.parse(created.stdout) as { id: string }).id;
    const dir = tempDir();
    await runCli(['secret', 'set', id, '-'], { env: { ...svc.env, WXHOOKS_CONFIG_DIR: dir }, stdin: 'whsec_d3Jvbmd3cm9uZ3dyb25nd3Jvbmd3cm9uZ3dyb25nMTI=' });
    const proc = startCliInProcess(['listen', '--port', String(port), '--json', '--webhook', id, '--check'], { ...svc.env, WXHOOKS_CONFIG_DIR: dir });
    try {
      const check = await proc.waitFor<Record<string, unknown>>((v) => v.event === 'check');
      expect(check.result).toBe('not_verified');
      expect(String(check.detail)).toContain('No signature matched');
    } finally {
      await proc.stop();
    }
  });

  it('a refused ping: the service says why', async () => {
    svc.before = (req, res) => {
      if (!req.path.endsWith('/ping')) return false;
      sendJson(res, 422, { error: { code: 'ping_disabled', message: 'pings are disabled for this account' } });
      return true;
    };
    try {
      const t = await listenPublic(['--subscribe', 'forecast_hour.available', '--check']);
      try {
        const check = await t.proc.waitFor<Record<string, unknown>>((v) => v.event === 'check');
        expect(check).toMatchObject({ result: 'refused' });
        expect(String(check.detail)).toContain('pings are disabled for this account');
      } finally {
        await t.proc.stop();
      }
    } finally {
      svc.before = undefined;
    }
  });
});

describe('listen --public-url ngrok: the address of the tunnel to this port, from the agent API', () => {
  let agent: TestServer;
  let tunnels: unknown[] = [];
  beforeAll(async () => {
    agent = await startServer((req, res) => (req.path === '/api/tunnels' ? sendJson(res, 200, { tunnels, uri: '/api/tunnels' }) : sendJson(res, 404, {})));
  });
  afterAll(() => agent.close());

  it('uses the https tunnel that forwards to the port', async () => {
    const port = await freePort();
    tunnels = [
      { name: 'other', public_url: 'https://other.ngrok.app', proto: 'https', config: { addr: 'http://localhost:9999', inspect: true } },
      { name: 'plain', public_url: 'http://mine.ngrok.app', proto: 'http', config: { addr: `http://localhost:${port}`, inspect: true } },
      { name: 'mine', public_url: 'https://mine.ngrok.app', proto: 'https', config: { addr: `http://localhost:${port}`, inspect: true } },
    ];
    const proc = startCliInProcess(['listen', '--port', String(port), '--json', '--public-url', 'ngrok', '--path', '/hooks', '--subscribe', 'forecast_hour.available'], {
      ...svc.env,
      NGROK_API_URL: agent.url,
    });
    try {
      const created = await proc.waitFor<{ event?: string; url?: string }>((v) => v.event === 'webhook_created');
      expect(created.url).toBe('https://mine.ngrok.app/hooks');
    } finally {
      await proc.stop();
    }
  });

  it('no tunnel to the port, or no agent: exit 2 saying `ngrok http <port>`', async () => {
    tunnels = [{ public_url: 'https://other.ngrok.app', proto: 'https', config: { addr: 'localhost:9999' } }];
    const r = await runCli(['listen', '--port', '8791', '--public-url', 'ngrok'], { env: { ...svc.env, NGROK_API_URL: agent.url } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain('ngrok http 8791');
    const none = await runCli(['listen', '--port', '8791', '--public-url', 'ngrok'], { env: { ...svc.env, NGROK_API_URL: `http://127.0.0.1:${await freePort()}` } });
    expect(none.code).toBe(2);
    expect(none.stderr).toContain('is ngrok running?');
  });
});

describe('doctor: the chain, link by link', () => {
  const doctor = (args: string[], env: Record<string, string | undefined> = {}) => runCli(['doctor', '--json', '--timeout', '1s', ...args], { env: { ...svc.env, ...env } });
  const failed = (stdout: string) => (JSON.parse(stdout) as { checks: { name: string; ok: boolean; hint?: string }[] }).checks.filter((c) => !c.ok);

  it('without --webhook: credentials and the list of webhooks, with a hint', async () => {
    const r = await runCli(['doctor'], { env: svc.env });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/✓ credentials: accepted/);
    expect(r.stdout).toContain('wxhooks doctor --webhook');
  });

  it('✗ credentials', async () => {
    const r = await doctor([], { WX_API_KEY: 'wrong_key' });
    expect(r.code).toBe(7);
    expect(failed(r.stdout)[0]!.name).toBe('credentials');
  });

  it('✗ webhook: missing, inactive, no subscriptions', async () => {
    expect(failed((await doctor(['--webhook', '999999'])).stdout)[0]!.name).toBe('webhook');
    const inactive = JSON.parse((await runCli(['webhook', 'create', '--url', 'https://example.com/x', '--inactive', '--subscribe', 'degree_days.available', '--json'], { env: svc.env })).stdout) as {
      id: string;
    };
    const r = await doctor(['--webhook', inactive.id]);
    expect(r.code).toBe(7);
    expect(failed(r.stdout).map((c) => c.hint)).toContain(`wxhooks webhook update ${inactive.id} --active`);
    const bare = JSON.parse((await runCli(['webhook', 'create', '--url', 'https://example.com/y', '--json'], { env: svc.env })).stdout) as { id: string };
    expect(failed((await doctor(['--webhook', bare.id])).stdout).map((c) => c.name)).toContain('webhook');
  });

  it('✗ url: a loopback address the live service cannot reach; ✗ secret not stored; ✗ delivery not arriving', async () => {
    // the stand-in answers as the live service: it has no emulator routes
    svc.before = (req, res) => {
      if (!req.path.startsWith('/emulator/')) return false;
      sendJson(res, 404, { detail: 'Not Found' });
      return true;
    };
    const port = await freePort();
    const hook = JSON.parse((await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--subscribe', 'degree_days.available', '--json', '--no-save'], { env: svc.env })).stdout) as {
      id: string;
    };
    const r = await doctor(['--webhook', hook.id]);
    expect(r.code).toBe(7);
    expect(failed(r.stdout).map((c) => c.name)).toEqual(['url', 'secret']);
    // with a public URL it should point at, and that one leads elsewhere
    const elsewhere = await startServer((_req, res) => sendJson(res, 200, {}));
    try {
      const pub = JSON.parse((await runCli(['webhook', 'create', '--url', `${elsewhere.url}/`, '--subscribe', 'degree_days.available', '--json'], { env: svc.env })).stdout) as { id: string };
      const d = await doctor(['--webhook', pub.id, '--public-url', 'https://mine.example.dev', '--port', String(await freePort())]);
      const names = failed(d.stdout).map((c) => c.name);
      expect(names).toContain('url');
      expect(names).toContain('delivery: degree_days.available');
    } finally {
      svc.before = undefined;
      await elsewhere.close();
    }
  });

  it('✓ everything against the emulator (its local URL a note, not a failure); ✗ when the port is taken', async () => {
    const dir = tempDir();
    const emu = startCliInProcess(['emulator', '--port', '0', '--json'], { WXHOOKS_CONFIG_DIR: dir });
    const info = await emu.waitFor<{ base_url: string; api_key: string }>((v) => typeof v.base_url === 'string');
    const env = { WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key, WXHOOKS_CONFIG_DIR: dir };
    try {
      const port = await freePort();
      const hook = JSON.parse(
        (await runCli(['webhook', 'create', '--url', `http://127.0.0.1:${port}/doc`, '--subscribe', 'forecast_hour.available', '--subscribe', 'events.available', '--json'], { env })).stdout,
      ) as { id: string };
      const ok = await runCli(['doctor', '--webhook', hook.id], { env });
      expect(ok.code, ok.stdout + ok.stderr).toBe(0);
      expect(ok.stdout).toContain('note: fine for the emulator');
      expect(ok.stdout).toMatch(/✓ delivery: forecast_hour\.available: a test delivery arrived and verified/);
      const busy = createServer();
      await new Promise<void>((r) => busy.listen(port, '127.0.0.1', r));
      try {
        const taken = await runCli(['doctor', '--webhook', hook.id, '--json'], { env });
        expect(taken.code).toBe(7);
        expect(failed(taken.stdout)[0]!.hint).toContain('Is `wxhooks listen` running there?');
      } finally {
        busy.close();
      }
    } finally {
      await emu.stop();
    }
  });
});
