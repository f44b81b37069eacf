import { readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { formatEvent } from '../src/output/listen.js';
import { Chalk } from 'chalk';
import { forwardRoute, routeFor, type ForwardRoutes } from '../src/receiver/routes.js';
import { attach } from '../src/mcp/attach.js';
import { runCli, tempDir } from './helpers/cli.js';
import { testContext } from './helpers/context.js';
import { post } from './helpers/http.js';
import { startCliInProcess, type Cli } from './helpers/process.js';
import { signed, TEST_SECRET } from './helpers/receiver.js';
import { startServer, type TestServer } from './helpers/server.js';

// `listen --forward-to TYPE=URL` (repeatable) and one URL without a type for every other type (#34.3):
// the flag's parser, then listen (in this process) against real apps on 127.0.0.1, the inspector's replay included.

const env = (dir: string) => ({ WX_SECRET: TEST_SECRET, WXHOOKS_CONFIG_DIR: dir });
let seq = 0;
const delivery = (type: string) => signed(`trg_route_${process.pid}_${++seq}`, { body: { type } });
const ok = (_req: unknown, res: import('node:http').ServerResponse) => void res.writeHead(200).end('ok');

/** The values given, through the flag's parser, as commander gives them. */
const parse = (...values: string[]): ForwardRoutes => values.reduce<ForwardRoutes | undefined>((prev, v) => forwardRoute(v, '--forward-to', prev), undefined)!;

describe('--forward-to: the parser', () => {
  it('TYPE=URL per type, a URL alone for every other type; a URL with "=" in its query is a URL', () => {
    const r = parse('forecast_hour.available=http://localhost:3000/forecast', 'http://localhost:3000/other?a=b', 'degree_days.available=http://localhost:3001/dd?x=1');
    expect(r).toEqual({ byType: { 'forecast_hour.available': 'http://localhost:3000/forecast', 'degree_days.available': 'http://localhost:3001/dd?x=1' }, other: 'http://localhost:3000/other?a=b' });
    expect(routeFor(r, 'forecast_hour.available')).toBe('http://localhost:3000/forecast');
    expect(routeFor(r, 'tropical_cyclones.available')).toBe('http://localhost:3000/other?a=b');
    expect(routeFor(r, undefined)).toBe('http://localhost:3000/other?a=b');
    // a type from a body that names a property of every object is no route
    expect(routeFor(parse('forecast_hour.available=http://a.test/'), 'constructor')).toBeUndefined();
  });

  it("the guide's example (docs/listen.md) routes one type, and every other type to the URL without a type", () => {
    const guide = readFileSync(resolve(import.meta.dirname, '../docs/listen.md'), 'utf8');
    const line = guide.split('\n').find((l) => l.startsWith('wxhooks listen') && l.includes('--forward-to forecast_hour.available='))!;
    const values = [...line.matchAll(/--forward-to (\S+)/g)].map((m) => m[1]!);
    expect(parse(...values)).toEqual({ byType: { 'forecast_hour.available': 'http://localhost:3000/forecast' }, other: 'http://localhost:3000/other' });
  });

  it.each([
    [
      ['forecast_hour.availble=http://localhost:3000/'],
      '--forward-to "forecast_hour.availble=http://localhost:3000/": no delivery has the type forecast_hour.availble (did you mean forecast_hour.available?)',
    ],
    [['nonsense=http://localhost:3000/'], 'no delivery has the type nonsense (known: initialization_time.available, forecast_hour.available'],
    [['=http://localhost:3000/'], 'the type before "=" is empty'],
    [
      ['degree_days.available=http://a.test/', 'degree_days.available=http://b.test/'],
      '--forward-to "degree_days.available=http://b.test/": degree_days.available is given twice (http://a.test/ and http://b.test/)',
    ],
    [['http://a.test/', 'http://b.test/'], '--forward-to takes one URL without a type (for every other type), and got two: http://a.test/ and http://b.test/'],
    [['degree_days.available=localhost:3000/dd'], '--forward-to "degree_days.available=localhost:3000/dd": the URL has no scheme: did you mean http://localhost:3000/dd?'],
    [['degree_days.available=ftp://a.test/'], 'the URL must be an http or https URL, not "ftp:"'],
    [['not a url'], '--forward-to is not an absolute URL: "not a url"'],
  ])('%j is refused', (values, says) => {
    expect(() => parse(...values)).toThrow(says);
  });

  it.each([
    [['--forward-to', 'forecast_hour.availble=http://127.0.0.1:9/'], 'did you mean forecast_hour.available?'],
    [['--forward-to', 'forecast_hour.available=http://127.0.0.1:9/', '--forward-to', 'forecast_hour.available=http://127.0.0.1:8/'], 'forecast_hour.available is given twice'],
    [['--forward-to', 'http://127.0.0.1:9/', '--forward-to', 'http://127.0.0.1:8/'], 'takes one URL without a type'],
    [['--forward-to', 'forecast_hour.available=nope'], '--forward-to "forecast_hour.available=nope": the URL is not an absolute URL'],
  ])('listen %j: exit 2, naming the value', async (args, says) => {
    const r = await runCli(['listen', '--port', '0', '--secret-env', 'WX_SECRET', ...args], { env: { WX_SECRET: TEST_SECRET } });
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(says);
    expect(r.stdout).toBe('');
  });
});

describe('listen with two routes and a default', () => {
  let forecast: TestServer;
  let days: TestServer;
  let other: TestServer;
  let l: Cli;
  let dir: string;
  let url: string;
  let inspector: URL;
  beforeAll(async () => {
    [forecast, days, other] = await Promise.all([startServer(ok), startServer(ok), startServer(ok)]);
    dir = tempDir();
    l = startCliInProcess(
      [
        'listen',
        '--port',
        '0',
        '--json',
        '--secret-env',
        'WX_SECRET',
        '--inspect',
        '127.0.0.1:0',
        '--forward-to',
        `forecast_hour.available=${forecast.url}/forecast`,
        '--forward-to',
        `${other.url}/other`,
        '--forward-to',
        `degree_days.available=${days.url}/days`,
      ],
      env(dir),
    );
    url = (await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'listening')).url;
    inspector = new URL((await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
  }, 30_000);
  afterAll(async () => {
    await l?.stop();
    await Promise.all([forecast, days, other].map((s) => s?.close()));
  });

  it('says where each type goes: the listening event and the record of the running listen', async () => {
    const ready = await l.waitFor<Record<string, unknown>>((v) => v.event === 'listening');
    const routes = { 'forecast_hour.available': `${forecast.url}/forecast`, 'degree_days.available': `${days.url}/days` };
    expect(ready).toMatchObject({ forward_to: `${other.url}/other`, forward_routes: routes });
    const record = JSON.parse(readFileSync(join(dir, 'running', `listen-${l.pid}.json`), 'utf8')) as Record<string, unknown>;
    expect(record).toMatchObject({ forward_to: `${other.url}/other`, forward_routes: routes });
    // wxhooks mcp reads the record: it replays, by type
    const attached = await attach(testContext({ env: { WXHOOKS_CONFIG_DIR: dir } }), { storeSchema: 'wxhooks' });
    try {
      expect(attached.about).toMatchObject({ replay_to: `${other.url}/other`, replay_routes: routes, listen: { forward_to: `${other.url}/other`, forward_routes: routes } });
      expect(attached.about.replay_unavailable).toBeUndefined();
    } finally {
      await attached.close();
    }
  });

  it('each type reaches its app, and the unrouted type the default', async () => {
    const sent: [string, TestServer, string][] = [
      ['forecast_hour.available', forecast, '/forecast'],
      ['degree_days.available', days, '/days'],
      ['tropical_cyclones.available', other, '/other'],
    ];
    for (const [type, app, path] of sent) {
      const d = delivery(type);
      expect((await post(url, d.headers, d.body)).status).toBe(200);
      const ev = await l.waitFor<Record<string, unknown>>((v) => v.type === type && v.outcome === 'accepted');
      expect(ev.forward).toMatchObject({ ok: true, status: 200 });
      const got = app.requests.at(-1)!;
      expect(got.path).toBe(path);
      expect(got.body).toBe(d.body.toString());
      expect(got.headers['webhook-signature']).toBe(d.headers['Webhook-Signature']);
    }
    expect([forecast, days, other].map((s) => s.requests.length)).toEqual([1, 1, 1]);
  });

  it("the inspector's replay goes to the URL the delivery's type routes to", async () => {
    const api = (path: string, method = 'GET') => fetch(new URL(path, inspector.origin), { method, headers: { 'x-wxhooks-token': inspector.searchParams.get('token')! } });
    const { records } = (await (await api('/api/deliveries')).json()) as { records: { id: number; type?: string }[] };
    const dd = records.find((r) => r.type === 'degree_days.available')!;
    const before = [forecast, days, other].map((s) => s.requests.length);
    const r = await api(`/api/deliveries/${dd.id}/replay`, 'POST');
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ ok: true, status: 200 });
    expect([forecast, days, other].map((s) => s.requests.length)).toEqual([before[0], before[1]! + 1, before[2]]);
    expect(days.requests.at(-1)).toMatchObject({ path: '/days', headers: { 'x-wxhooks-replay': '1' } });
    // and the commands to send it again name the same URL
    const commands = (await (await api(`/api/deliveries/${dd.id}/commands`)).json()) as { curl: string };
    expect(commands.curl).toContain(`'${days.url}/days'`);
  });
});

describe('listen with routes and no default', () => {
  it('an unrouted type is acknowledged, not forwarded, and reported; its replay is refused with the reason', async () => {
    const forecast = await startServer(ok);
    const dir = tempDir();
    const l = startCliInProcess(
      ['listen', '--port', '0', '--json', '--secret-env', 'WX_SECRET', '--inspect', '127.0.0.1:0', '--forward-to', `forecast_hour.available=${forecast.url}/forecast`],
      env(dir),
    );
    try {
      const ready = await l.waitFor<{ event?: string; url: string; forward_to: unknown }>((v) => v.event === 'listening');
      expect(ready.forward_to).toBeNull();
      const inspector = new URL((await l.waitFor<{ event?: string; url: string }>((v) => v.event === 'inspector')).url);
      const d = delivery('degree_days.available');
      expect((await post(ready.url, d.headers, d.body)).status).toBe(200);
      const ev = await l.waitFor<Record<string, unknown>>((v) => v.type === 'degree_days.available');
      expect(ev).toMatchObject({ outcome: 'accepted', status: 200, not_forwarded: 'no --forward-to for degree_days.available' });
      expect(ev.forward).toBeUndefined();
      // processed: the service's retry is a duplicate
      const retry = signed(JSON.parse(d.body.toString()).trigger_id, { body: { type: 'degree_days.available' } });
      expect((await post(ready.url, retry.headers, retry.body)).status).toBe(200);
      await l.waitFor<Record<string, unknown>>((v) => v.type === 'degree_days.available' && v.outcome === 'duplicate');
      // the routed type still goes to its app
      const f = delivery('forecast_hour.available');
      expect((await post(ready.url, f.headers, f.body)).status).toBe(200);
      await l.waitFor<Record<string, unknown>>((v) => v.type === 'forecast_hour.available' && v.outcome === 'accepted');
      expect(forecast.requests.map((r) => r.path)).toEqual(['/forecast']);

      const token = { 'x-wxhooks-token': inspector.searchParams.get('token')! };
      const { records } = (await (await fetch(new URL('/api/deliveries', inspector.origin), { headers: token })).json()) as { records: { id: number; type?: string }[] };
      const id = records.find((r) => r.type === 'degree_days.available')!.id;
      const replay = await fetch(new URL(`/api/deliveries/${id}/replay`, inspector.origin), { method: 'POST', headers: token });
      expect(replay.status).toBe(409);
      expect(await replay.json()).toEqual({ error: 'no --forward-to for degree_days.available: nowhere to replay it to' });
      expect(forecast.requests).toHaveLength(1);
      // wxhooks mcp takes a listen that routes only by type as one that replays, to the type's URL
      const attached = await attach(testContext({ env: { WXHOOKS_CONFIG_DIR: dir } }), { storeSchema: 'wxhooks' });
      try {
        expect(attached.about).toMatchObject({ replay_to: null, replay_routes: { 'forecast_hour.available': `${forecast.url}/forecast` } });
        expect(attached.about.replay_unavailable).toBeUndefined();
        const fid = records.find((r) => r.type === 'forecast_hour.available')!.id;
        expect((await attached.replay(fid)).result).toMatchObject({ ok: true, status: 200 });
        expect(forecast.requests.map((r) => [r.path, r.headers['x-wxhooks-replay']])).toEqual([
          ['/forecast', undefined],
          ['/forecast', '1'],
        ]);
      } finally {
        await attached.close();
      }
    } finally {
      await l.stop();
      await forecast.close();
    }
  });

  it('the ready line lists the routes, and the delivery line says it was not forwarded', async () => {
    const forecast = await startServer(ok);
    const port = await freePort();
    const l = startCliInProcess(
      ['listen', '--port', String(port), '--exit-after', '1', '--secret-env', 'WX_SECRET', '--forward-to', `forecast_hour.available=${forecast.url}/forecast`],
      env(tempDir()),
    );
    try {
      // ready once it listens: the stderr says so
      await expect.poll(() => l.stderr(), { timeout: 15_000 }).toContain('Ctrl-C to stop');
      expect(l.stderr()).toContain(`Forwarding verified deliveries by type:\n  forecast_hour.available → ${forecast.url}/forecast\n  every other type: not forwarded`);
      const d = delivery('degree_days.available');
      expect((await post(`http://127.0.0.1:${port}/`, d.headers, d.body)).status).toBe(200);
      expect(await l.exited).toBe(0);
      expect(l.lines.join('\n')).toContain('degree_days.available');
      expect(l.lines.join('\n')).toContain('→ not forwarded: no --forward-to for degree_days.available');
    } finally {
      await l.stop();
      await forecast.close();
    }
  });
});

describe("listen's line for a delivery not forwarded", () => {
  it('says why', () => {
    const style = new Chalk({ level: 0 });
    const text = formatEvent({ time: '2026-11-21T06:04:00.000Z', outcome: 'accepted', status: 200, type: 'degree_days.available', not_forwarded: 'no --forward-to for degree_days.available' }, style);
    expect(text).toContain('→ not forwarded: no --forward-to for degree_days.available');
  });
});
