import { mkdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runCli, tempDir } from './helpers/cli.js';
import { sendJson, startServer, type TestServer } from './helpers/server.js';
import { startService, type FakeService } from './helpers/service.js';

describe.each(['live', 'documented'] as const)('webhooks against a service answering in the %s shape', (shape) => {
  let svc: FakeService;
  let dir: string;
  let receiver: TestServer;
  const cli = (args: string[], extra: { env?: Record<string, string>; stdin?: string } = {}) => runCli(args, { env: { ...svc.env, ...extra.env }, stdin: extra.stdin });

  beforeAll(async () => {
    receiver = await startServer((_q, res) => sendJson(res, 200, { ok: true }));
  });
  afterAll(() => receiver.close());
  beforeEach(async () => {
    dir = tempDir();
    svc = await startService(shape, dir);
    return () => svc.stop();
  });

  async function create(args: string[] = []) {
    const r = await cli(['webhook', 'create', '--url', `${receiver.url}/hooks`, '--json', ...args]);
    // a webhook without a subscription is created, with a warning that nothing will be delivered to it
    if (args.includes('--subscribe')) expect(r.stderr).toBe('');
    else expect(r.stderr).toContain('warning: this webhook has no subscription');
    expect(r.code).toBe(0);
    return JSON.parse(r.stdout) as { id: string; secret: string; subscriptions: { id: string; type: string }[] };
  }

  it('create: sends the map of subscriptions, stores the secret 0600 in a 0700 folder, shows it once', async () => {
    const r = await cli([
      'webhook',
      'create',
      '--url',
      'https://example.com/hooks',
      '--name',
      'prod',
      '--note',
      'paging',
      '--subscribe',
      'forecast_hour.available:model=wm-6;hours=0:00,12:00;response=gridded',
      '--subscribe',
      'degree_days.available',
    ]);
    expect(r.code).toBe(0);
    const req = svc.api()[0]!;
    expect(req.method).toBe('POST');
    expect(req.path).toBe('/webhooks/v1');
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.json).toEqual({
      url: 'https://example.com/hooks',
      name: 'prod',
      note: 'paging',
      subscriptions: {
        'forecast_hour.available': { filters: { model: 'wm-6', initialization_time_hours: ['0:00', '12:00'] }, response_options: { type: 'gridded' } },
        'degree_days.available': {},
      },
    });
    const secret = [...svc.state.webhooks.values()][0]!.secret;
    expect(r.stdout.split(secret).length - 1).toBe(1); // shown exactly once
    expect(r.stdout).toContain('Created webhook 1');
    const file = join(dir, 'secrets.json');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    const shown = await cli(['secret', 'show', '1']);
    expect(shown.stdout).toBe(`${secret}\n`);
    // never again: get, list, verbose
    for (const args of [
      ['webhook', 'get', '1'],
      ['webhook', 'list'],
      ['webhook', 'get', '1', '--json', '--verbose'],
      ['webhook', 'list', '--json'],
      ['secret', 'list', '--json'],
    ]) {
      const out = await cli(args);
      expect(out.code, args.join(' ')).toBe(0);
      expect(out.stdout + out.stderr, args.join(' ')).not.toContain(secret);
      expect(out.stdout + out.stderr, args.join(' ')).not.toContain(svc.env.WX_API_KEY);
    }
  });

  it('create --json: one document with the id, the secret and whether it was stored', async () => {
    const made = await create(['--subscribe', 'events.available:event_type=heatwave,coldwave']);
    expect(made.id).toBe('1');
    expect(made.secret).toMatch(/^whsec_/);
    expect((made as unknown as { secret_stored: boolean }).secret_stored).toBe(true);
    expect(made.subscriptions[0]).toMatchObject({ type: 'events.available' });
    expect(svc.api()[0]!.json).toMatchObject({ subscriptions: { 'events.available': { filters: { event_type: ['heatwave', 'coldwave'] } } } });
  });

  it('create --body FILE and --body -: flags override the file', async () => {
    const file = join(dir, 'body.json');
    writeFileSync(file, JSON.stringify({ url: 'https://old.example.com/', name: 'from-file', subscriptions: { 'degree_days.available': { note: 'dd' } } }));
    const a = await cli(['webhook', 'create', '--body', file, '--url', 'https://new.example.com/', '--json']);
    expect(a.code).toBe(0);
    expect(svc.api()[0]!.json).toEqual({ url: 'https://new.example.com/', name: 'from-file', subscriptions: { 'degree_days.available': { note: 'dd' } } });
    const b = await cli(['webhook', 'create', '--body', '-', '--json'], { stdin: JSON.stringify({ url: 'https://stdin.example.com/' }) });
    expect(b.code).toBe(0);
    expect(svc.api()[1]!.json).toEqual({ url: 'https://stdin.example.com/' });
  });

  it('create --no-save keeps nothing and warns', async () => {
    const r = await cli(['webhook', 'create', '--url', 'https://example.com/', '--no-save']);
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('whsec_');
    expect(r.stderr).toContain('not stored');
    const list = await cli(['secret', 'list', '--json']);
    expect(JSON.parse(list.stdout)).toEqual([]);
  });

  it('list: exact query, filters only when given, a table, and --all following pages', async () => {
    for (let i = 0; i < 5; i++) await create(['--subscribe', 'forecast_hour.available']);
    const before = svc.api().length;
    const table = await cli(['webhook', 'list']);
    expect(table.code).toBe(0);
    expect(table.stdout.split('\n')[0]).toBe('ID\tURL\tNAME\tACTIVE\tSUBSCRIPTIONS');
    expect(table.stdout.trim().split('\n')).toHaveLength(6);
    expect(svc.api()[before]!.url).toBe('/webhooks/v1');
    await cli(['webhook', 'list', '--active', 'true', '--url', `${receiver.url}/hooks`, '--type', 'forecast_hour.available', '--page', '2', '--page-size', '2']);
    expect(svc.api()[before + 1]!.query).toEqual({ page: '2', page_size: '2', active: 'true', url: `${receiver.url}/hooks`, subscription_type: 'forecast_hour.available' });
    const all = await cli(['webhook', 'list', '--all', '--page-size', '2', '--json']);
    const parsed = JSON.parse(all.stdout) as { webhooks: { id: string }[]; total: number };
    expect(parsed.webhooks.map((w) => w.id)).toEqual(['1', '2', '3', '4', '5']);
    expect(
      svc
        .api()
        .slice(before + 2)
        .map((r) => r.query.page),
    ).toEqual(['1', '2', '3']);
  });

  it('get: the webhook and its subscriptions; 404 exits 4 naming it', async () => {
    await create(['--subscribe', 'forecast_hour.available:model=wm-6', '--name', 'x']);
    const r = await cli(['webhook', 'get', '1', '--json']);
    const hook = JSON.parse(r.stdout) as Record<string, unknown>;
    expect(hook).toMatchObject({ id: '1', name: 'x', subscriptions: [{ type: 'forecast_hour.available', filters: { model: 'wm-6' } }] });
    expect(hook.secret).toBeUndefined();
    const missing = await cli(['webhook', 'get', '99']);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('webhook 99');
  });

  it('update: PATCH with only the fields given; clearing is explicit', async () => {
    await create(['--name', 'n', '--note', 'old']);
    const before = svc.api().length;
    expect((await cli(['webhook', 'update', '1', '--inactive', '--clear-note'])).code).toBe(0);
    expect(svc.api()[before]).toMatchObject({ method: 'PATCH', path: '/webhooks/v1/1', json: { note: null, active: false } });
    const r = await cli(['webhook', 'update', '1', '--url', 'https://moved.example.com/', '--json']);
    expect(svc.api()[before + 1]!.json).toEqual({ url: 'https://moved.example.com/' });
    expect(JSON.parse(r.stdout)).toMatchObject({ url: 'https://moved.example.com/', name: 'n', note: null, active: false });
    const nothing = await cli(['webhook', 'update', '1']);
    expect(nothing.code).toBe(2);
    expect(svc.api().length).toBe(before + 2);
  });

  it('delete: needs --yes without a terminal; then DELETE, and the stored secret is forgotten', async () => {
    await create();
    const before = svc.api().length;
    const refused = await cli(['webhook', 'delete', '1']);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain('--yes');
    expect(svc.api().length).toBe(before);
    const r = await cli(['webhook', 'delete', '1', '--yes']);
    expect(r.code).toBe(0);
    expect(svc.api()[before]).toMatchObject({ method: 'DELETE', path: '/webhooks/v1/1' });
    expect(r.stdout).toContain('forgot its stored secret');
    expect((await cli(['secret', 'show', '1'])).code).toBe(4);
  });

  it('subscription add, update, list, remove send what the appendix says', async () => {
    await create();
    const before = svc.api().length;
    const add = await cli([
      'subscription',
      'add',
      '1',
      'forecast_hour.available',
      '--model',
      'wm-6',
      '--hours',
      '0:00,12:00',
      '--response',
      'interpolated_point_forecast',
      '--response-option',
      'coordinates=37.77,-122.42',
      '--response-option',
      'include_distribution=false',
      '--note',
      'n1',
      '--json',
    ]);
    expect(add.code).toBe(0);
    expect(svc.api()[before]).toMatchObject({
      method: 'PATCH',
      path: '/webhooks/v1/1/subscriptions',
      json: {
        subscription_type: 'forecast_hour.available',
        note: 'n1',
        filters: { model: 'wm-6', initialization_time_hours: ['0:00', '12:00'] },
        response_options: { type: 'interpolated_point_forecast', options: { coordinates: '37.77,-122.42', include_distribution: false } },
      },
    });
    const sub = JSON.parse(add.stdout) as { id: string };
    expect(sub.id).toBe('1');

    const dup = await cli(['subscription', 'add', '1', 'forecast_hour.available']);
    expect(dup.code).toBe(5);
    expect(dup.stderr).toContain('already has a forecast_hour.available subscription');

    await cli(['subscription', 'update', '1', sub.id, '--clear-filters']);
    expect(svc.api()[before + 2]).toMatchObject({ method: 'PATCH', path: `/webhooks/v1/1/subscriptions/${sub.id}` });
    expect(svc.api()[before + 2]!.json).toEqual({ filters: {} });
    await cli(['subscription', 'update', '1', sub.id, '--no-response', '--clear-note']);
    expect(svc.api()[before + 3]!.json).toEqual({ note: null, response_options: null });
    await cli(['subscription', 'update', '1', sub.id, '--hours', '6:00']);
    expect(svc.api()[before + 4]!.json).toEqual({ filters: { initialization_time_hours: ['6:00'] } });

    const list = await cli(['subscription', 'list', '1']);
    expect(list.stdout).toContain('forecast_hour.available');
    expect(list.stdout).toContain('hours=6:00');

    const rm = await cli(['subscription', 'remove', '1', sub.id, '--yes']);
    expect(rm.code).toBe(0);
    expect(svc.api()[before + 6]).toMatchObject({ method: 'DELETE', path: `/webhooks/v1/1/subscriptions/${sub.id}` });
    const gone = await cli(['subscription', 'update', '1', sub.id, '--note', 'x']);
    expect(gone.code).toBe(4);
  });

  it('ping: accepted exits 0; a receiver answering 500 exits 7 with the reason, one attempt only', async () => {
    const good = await create(['--subscribe', 'forecast_hour.available']);
    const ok = await cli(['ping', good.id, good.subscriptions[0]!.id]);
    expect(ok.code).toBe(0);
    expect(ok.stdout).toContain('accepted');
    const failing = await startServer((_q, res) => sendJson(res, 500, { error: 'handler crashed' }));
    try {
      const bad = await cli(['webhook', 'create', '--url', failing.url, '--subscribe', 'degree_days.available', '--json']);
      const hook = JSON.parse(bad.stdout) as { id: string; subscriptions: { id: string }[] };
      const before = svc.api().length;
      const r = await cli(['ping', hook.id, hook.subscriptions[0]!.id]);
      expect(r.code).toBe(7);
      expect(r.stderr).toContain('answered 500');
      expect(r.stderr).toContain('handler crashed');
      expect(svc.api().length).toBe(before + 1);
      expect(failing.requests.length).toBe(1);
    } finally {
      await failing.close();
    }
  });
});

describe('every operation: method, path, query and body on the wire', () => {
  it.each([
    [['webhook', 'get', '1'], 'GET', '/webhooks/v1/1', {}, undefined],
    [['webhook', 'list'], 'GET', '/webhooks/v1', {}, undefined],
    [['webhook', 'list', '--page', '3', '--page-size', '50', '--active', 'false'], 'GET', '/webhooks/v1', { page: '3', page_size: '50', active: 'false' }, undefined],
    [['webhook', 'update', '1', '--name', 'n', '--clear-note'], 'PATCH', '/webhooks/v1/1', {}, { name: 'n', note: null }],
    [['subscription', 'list', '1'], 'GET', '/webhooks/v1/1', {}, undefined],
    [['subscription', 'add', '1', 'degree_days.available', '--note', 'dd'], 'PATCH', '/webhooks/v1/1/subscriptions', {}, { subscription_type: 'degree_days.available', note: 'dd' }],
    [['subscription', 'update', '1', '1', '--response', 'gridded'], 'PATCH', '/webhooks/v1/1/subscriptions/1', {}, { response_options: { type: 'gridded' } }],
    [['ping', '1', '1'], 'POST', '/webhooks/v1/1/subscriptions/1/ping', {}, undefined],
    [['subscription', 'remove', '1', '1', '--yes'], 'DELETE', '/webhooks/v1/1/subscriptions/1', {}, undefined],
    [['webhook', 'delete', '1', '--yes'], 'DELETE', '/webhooks/v1/1', {}, undefined],
  ])('%j → %s %s', async (args, method, path, query, body) => {
    const receiver = await startServer((_q, res) => sendJson(res, 200, {}));
    const svc = await startService('live', tempDir());
    try {
      const made = await runCli(['webhook', 'create', '--url', receiver.url, '--subscribe', 'forecast_hour.available', '--json'], { env: svc.env });
      expect(made.code).toBe(0);
      const before = svc.requests.length;
      const r = await runCli(args, { env: svc.env });
      expect(r.stderr).not.toContain('error');
      expect(r.code).toBe(0);
      expect(svc.requests).toHaveLength(before + 1);
      const req = svc.requests[before]!;
      expect([req.method, req.path, req.query, req.json]).toEqual([method, path, query, body]);
    } finally {
      await svc.stop();
      await receiver.close();
    }
  });

  it('an answer that is not a webhook is a clear error (exit 6), not a crash', async () => {
    const odd = await startServer((_q, res) => sendJson(res, 200, ['not', 'a', 'webhook']));
    try {
      const r = await runCli(['webhook', 'get', '1'], { env: { WX_BASE_URL: odd.url, WX_API_KEY: 'k_12345' } });
      expect(r.code).toBe(6);
      expect(r.stderr).toContain('not a webhook');
      expect(r.stderr).not.toMatch(/\n\s+at /);
    } finally {
      await odd.close();
    }
  });
});

describe('unknown subscription types', () => {
  let svc: FakeService;
  beforeAll(async () => {
    svc = await startService('live', tempDir());
  });
  afterAll(() => svc.stop());

  it('an unknown type is sent anyway, with a warning (the service may know more types)', async () => {
    const r = await runCli(['subscription', 'add', '1', 'lightning.available'], { env: svc.env });
    expect(r.stderr).toContain('warning: "lightning.available" is not a subscription type wxhooks knows');
    expect(svc.requests.at(-1)!.json).toEqual({ subscription_type: 'lightning.available' });
  });
});

describe('the secret is never lost', () => {
  it('20 parallel creates leave 20 secrets in the store', async () => {
    const dir = tempDir();
    const svc = await startService('live', dir);
    try {
      const results = await Promise.all(Array.from({ length: 20 }, (_, i) => runCli(['webhook', 'create', '--url', `https://example.com/${i}`, '--json'], { env: svc.env, timeoutMs: 60_000 })));
      expect(results.map((r) => r.code)).toEqual(Array(20).fill(0));
      const stored = JSON.parse(readFileSync(join(dir, 'secrets.json'), 'utf8')) as { secrets: Record<string, Record<string, { secret: string }>> };
      const entries = stored.secrets[svc.url]!;
      expect(Object.keys(entries)).toHaveLength(20);
      for (const hook of svc.state.webhooks.values()) expect(entries[hook.id]!.secret).toBe(hook.secret);
    } finally {
      await svc.stop();
    }
  }, 90_000);

  it('a store made unwritable after the create: exit 8, the secret on stderr, and how to store it', async () => {
    const dir = tempDir();
    const svc = await startService('live', dir);
    svc.before = (req) => {
      // the store breaks while the service is creating the webhook
      if (req.method === 'POST') mkdirSync(join(dir, 'secrets.json'));
      return false;
    };
    try {
      const r = await runCli(['webhook', 'create', '--url', 'https://example.com/'], { env: svc.env });
      expect(r.code).toBe(8);
      const secret = [...svc.state.webhooks.values()][0]!.secret;
      expect(r.stderr).toContain(secret);
      expect(r.stderr).toContain('secret set 1');
      expect(r.stdout).not.toContain(secret);
    } finally {
      await svc.stop();
    }
  });

  it('a store that cannot be written stops the create before any request (exit 2), unless --no-save', async () => {
    const dir = tempDir();
    writeFileSync(join(dir, 'file'), 'x');
    const svc = await startService('live', join(dir, 'file', 'store'));
    try {
      const r = await runCli(['webhook', 'create', '--url', 'https://example.com/'], { env: svc.env });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain('--no-save');
      expect(svc.requests.length).toBe(0);
      const anyway = await runCli(['webhook', 'create', '--url', 'https://example.com/', '--no-save'], { env: svc.env });
      expect(anyway.code).toBe(0);
    } finally {
      await svc.stop();
    }
  });

  it('a damaged secret store stops the create before any request (exit 2), and is left as it was', async () => {
    const dir = tempDir();
    const svc = await startService('live', dir);
    writeFileSync(join(dir, 'secrets.json'), '{"version": 1, "secrets": {');
    try {
      const r = await runCli(['webhook', 'create', '--url', 'https://example.com/'], { env: svc.env });
      expect(r.code).toBe(2);
      expect(r.stderr).toContain(`The secret store ${join(dir, 'secrets.json')} is damaged`);
      expect(svc.requests.length).toBe(0);
      const list = await runCli(['secret', 'list'], { env: svc.env });
      expect(list.code).toBe(2);
      expect(list.stderr).toContain('is damaged');
      expect(readFileSync(join(dir, 'secrets.json'), 'utf8')).toBe('{"version": 1, "secrets": {');
    } finally {
      await svc.stop();
    }
  });

  it('a create that times out is not retried, and says to look before trying again', async () => {
    const dir = tempDir();
    const svc = await startService('live', dir);
    svc.before = () => true; // never answers
    try {
      const r = await runCli(['webhook', 'create', '--url', 'https://example.com/', '--timeout', '500ms'], { env: svc.env });
      expect(r.code).toBe(6);
      expect(svc.requests.length).toBe(1);
      expect(r.stderr).toContain('webhook list --url');
    } finally {
      await svc.stop();
    }
  });

  it('secret set reads stdin; an argument is refused; remove forgets it', async () => {
    const dir = tempDir();
    const env = { WX_BASE_URL: 'http://127.0.0.1:1', WXHOOKS_CONFIG_DIR: dir };
    expect((await runCli(['secret', 'set', '7', 'whsec_inline'], { env })).code).toBe(2);
    const set = await runCli(['secret', 'set', '7'], { env, stdin: 'whsec_from_stdin\n' });
    expect(set.code).toBe(0);
    expect(set.stdout).not.toContain('whsec_from_stdin');
    expect((await runCli(['secret', 'show', '7'], { env })).stdout).toBe('whsec_from_stdin\n');
    expect((await runCli(['secret', 'set', '8'], { env, stdin: '' })).code).toBe(2);
    // not text: bytes that are not UTF-8, or a control character; nothing is stored
    for (const stdin of [Buffer.from([0xff, 0xfe, 0x41]), Buffer.from('whsec_a\u0007b')]) {
      const bad = await runCli(['secret', 'set', '9'], { env, stdin });
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('not UTF-8 text; nothing was stored');
    }
    expect((await runCli(['secret', 'show', '9'], { env })).code).toBe(4);
    expect((await runCli(['secret', 'remove', '7'], { env })).code).toBe(0);
    expect((await runCli(['secret', 'remove', '7'], { env })).code).toBe(4);
  });
});
