import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../scripts/harness.js';
import { verifyDelivery } from '../src/index.js';
import { runCli, tempDir } from './helpers/cli.js';
import { startInProcess, type InProcessRun } from './helpers/context.js';
import { doc, ROOT, shBlockAfter, swapped, wxhooksCommands } from './helpers/guide.js';
import { startServer, type TestServer } from './helpers/server.js';

// The guides' shell blocks, their `wxhooks` lines run as written (in this process) against the emulator:
// only the fixed ports are swapped for free ones, `localhost:3000` for an app of the test's own (which
// verifies what it is sent, as yours would), and `./deliveries` for a temporary folder. The guides:
// docs/listen.md, docs/inspector.md, docs/emulator.md, docs/real-service.md, docs/configuration.md,
// docs/library.md (docs/postgres.md's needs PostgreSQL: test/full/guide-postgres.test.ts).

const stops: (() => Promise<unknown>)[] = [];
afterEach(async () => {
  for (const stop of stops.splice(0).reverse()) await stop();
});

/** The `wxhooks` lines of the guide's block after `after`. */
const lines = (file: string, after: string, env: Record<string, string> = {}) => wxhooksCommands(shBlockAfter(doc(file), after).body, env);

/** `--inspect` with no address binds 8789: given a free one instead. */
async function inspectFree(args: string[]): Promise<string[]> {
  const at = args.indexOf('--inspect');
  if (at < 0 || (args[at + 1] && !args[at + 1]!.startsWith('--'))) return args;
  return [...args.slice(0, at + 1), `127.0.0.1:${await freePort()}`, ...args.slice(at + 1)];
}

interface Scene {
  env: Record<string, string>;
  dir: string;
  /** The port `listen` takes (8787 in the guides). */
  listen: string;
  /** The app at localhost:3000: it records, and answers 200 only to what verifies with webhook 1's secret. */
  app: TestServer;
  saved: string;
  swaps: Record<string, string>;
}

/** Runs a guide's `wxhooks emulator …` line (on a free port), and gives the environment its `export` line sets. */
async function emulator(args: string[] = ['emulator']): Promise<Scene> {
  expect(args[0]).toBe('emulator');
  const dir = tempDir();
  const port = String(await freePort());
  const run = startInProcess([...args, '--port', port], { env: { WXHOOKS_CONFIG_DIR: dir } });
  stops.push(() => run.stop());
  const exported = await run.waitFor<string>((l) => typeof l === 'string' && l.trim().startsWith('export WX_BASE_URL='));
  const env: Record<string, string> = { WXHOOKS_CONFIG_DIR: dir };
  for (const [, k, v] of exported.matchAll(/(\w+)=(\S+)/g)) env[k!] = v!;
  let secret: string | undefined;
  const app = await startServer(async (req, res) => {
    secret ??= (await runCli(['secret', 'show', '1'], { env })).stdout.trim();
    const v = verifyDelivery({ secret, headers: req.headers, body: req.body });
    res.writeHead(v.ok ? 200 : 401, { 'content-type': 'application/json' }).end(JSON.stringify(v.ok ? { stored: v.triggerId } : { error: v.message }));
  });
  stops.push(() => app.close());
  const listen = String(await freePort());
  const saved = tempDir('wxhooks-saved-');
  return { env, dir, listen, app, saved, swaps: { '8787': listen, '8788': port, 'http://localhost:3000': app.url, 'http://127.0.0.1:3000': app.url, './deliveries': saved } };
}

async function ok(s: Scene, args: string[], stdin?: string) {
  const r = await runCli(swapped(args, s.swaps), { env: s.env, stdin });
  expect(r.code, `wxhooks ${args.join(' ')}\n${r.stderr}`).toBe(0);
  return r;
}

/** Starts a guide's `wxhooks listen …` line on the scene's port, and waits for it to be ready. */
async function listen(s: Scene, args: string[]): Promise<InProcessRun> {
  expect(args[0]).toBe('listen');
  const withPort = args.includes('--port') ? args : [...args, '--port', '8787'];
  const run = startInProcess(await inspectFree(swapped(withPort, s.swaps)), { env: s.env });
  stops.push(() => run.stop());
  await run.waitForStderr('Ready.');
  return run;
}

/** Resolves once `run` has printed `n` lines holding `text`. */
const printed = (run: InProcessRun, text: string, n: number) => run.waitFor<string>(() => run.lines().filter((l) => typeof l === 'string' && l.includes(text)).length >= n);

/** webhook 1, delivering to the scene's `listen` port, with these subscriptions. */
const webhook1 = (s: Scene, ...types: string[]) => ok(s, ['webhook', 'create', '--url', `http://127.0.0.1:${s.listen}/`, ...types.flatMap((t) => ['--subscribe', t])]);

/** A run other than the latest cycle's, so that each test counts its own. */
const run = (hoursAgo: number) => new Date(Math.floor(Date.now() / 21_600_000) * 21_600_000 - hoursAgo * 3_600_000).toISOString().replace('.000', '');

describe('docs/listen.md', () => {
  const file = 'docs/listen.md';

  it('its first block: the emulator, webhook 1, listen forwarding to your app, a short model run', async () => {
    const [emu, create, l, trigger, ...rest] = lines(file, '# Receive on your machine');
    expect(rest).toEqual([]);
    const s = await emulator(emu);
    expect((await ok(s, create!)).stdout).toContain('Created webhook 1');
    const running = await listen(s, l!);
    await ok(s, trigger!);
    await printed(running, '→ app 200', 4); // +0h, +6h, +12h and the run's initialization_time.available
    expect(s.app.requests.map((r) => (r.json as { type: string }).type).sort()).toEqual([
      'forecast_hour.available',
      'forecast_hour.available',
      'forecast_hour.available',
      'initialization_time.available',
    ]);
  });

  it('forwarding by type: forecast hours to /forecast, every other type to /other', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available', 'initialization_time.available');
    const [l, ...rest] = lines(file, '## Forwarding, by type');
    expect(rest).toEqual([]);
    const running = await listen(s, l!);
    await ok(s, ['trigger', 'run', '--hours', '0-6/6']);
    await printed(running, '→ app 200', 3);
    expect(s.app.requests.map((r) => `${r.path} ${(r.json as { type: string }).type}`).sort()).toEqual([
      '/forecast forecast_hour.available',
      '/forecast forecast_hour.available',
      '/other initialization_time.available',
    ]);
  });

  it('a gate: listen --until-run exits 0 once the run is complete; runs reads what it saved', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available', 'initialization_time.available');
    const [gate, runs, ...rest] = lines(file, '## A gate for a script or CI');
    expect(rest).toEqual([]);
    const running = await listen(s, gate!);
    await ok(s, ['trigger', 'run', '--hours', '0-12/6', '--init-time', run(0)]);
    expect(await running.done).toBe(0);
    const r = await ok(s, [...runs!, '--json']);
    expect(JSON.parse(r.stdout)).toMatchObject({ runs: [{ model: 'wm-6', initialization_time: run(0), missing: [], complete: true }] });
  });

  it('verify a saved delivery; send one to your app, and one it refuses (a stale timestamp: exit 7)', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available');
    await listen(s, ['listen', '--webhook', '1', '--save-dir', './deliveries', '--exit-after', '1']).then(async (l) => {
      await ok(s, ['trigger', 'forecast_hour.available', '--forecast-hour', '6']);
      expect(await l.done).toBe(0);
    });
    const [verify, send, stale, ...rest] = lines(file, '## Check one delivery, send one');
    expect(rest).toEqual([]);
    const [saved] = readdirSync(s.saved);
    expect((await ok(s, swapped(verify!, { './deliveries/2026-11-22T06-00-01-000Z-trg_00mwqxjw4m-1.json': join(s.saved, saved!) }))).stdout).toContain('standard');
    await ok(s, send!);
    expect(s.app.requests.at(-1)!.json).toMatchObject({ type: 'initialization_time.available' });
    const refused = await runCli(swapped(stale!, s.swaps), { env: s.env });
    expect(refused.code).toBe(7);
    expect(refused.stderr).toContain('401');
  });
});

describe('docs/inspector.md', () => {
  const file = 'docs/inspector.md';

  it('listen --inspect --save-dir: the printed link opens the page, whose API lists the model run', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available', 'initialization_time.available');
    const [l, trigger, ...rest] = lines(file, '# See every delivery');
    expect(rest).toEqual([]);
    const running = await listen(s, l!);
    await ok(s, trigger!);
    await printed(running, '→ app 200', 4);
    await running.waitForStderr('Inspector: ');
    const link = new URL(/Inspector: (\S+)/.exec(running.io.stderr.text)![1]!);
    const page = await fetch(link);
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('wxhooks inspector');
    const api = await fetch(new URL('/api/deliveries', link.origin), { headers: { 'x-wxhooks-token': link.searchParams.get('token')! } });
    const records = ((await api.json()) as { records: { trigger_id: string; outcome: string; type: string }[] }).records;
    expect(new Set(records.map((r) => `${r.trigger_id} ${r.outcome} ${r.type}`)).size).toBe(4); // +0h, +6h, +12h, the run's event: each accepted
    expect(records).toHaveLength(4); // each once (test/inspector-saved.test.ts)
    expect(readdirSync(s.saved)).toHaveLength(4);
  });

  it('deliveries list, show and replay over the saved folder', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available');
    const l = await listen(s, ['listen', '--webhook', '1', '--save-dir', './deliveries', '--exit-after', '1']);
    await ok(s, ['trigger', 'forecast_hour.available', '--forecast-hour', '6']);
    expect(await l.done).toBe(0);
    const trigger = (await ok(s, ['deliveries', 'list', '--dir', './deliveries', '--json'])).stdout.match(/trg_\w+/)![0];
    const [list, show, replay, ...rest] = lines(file, '## From a shell');
    expect(rest).toEqual([]);
    const s2 = { ...s, swaps: { ...s.swaps, trg_00mwq3: trigger.slice(0, 12) } };
    expect((await ok(s2, list!)).stdout).toContain(trigger);
    expect((await ok(s2, show!)).stdout).toContain(trigger);
    await ok(s2, replay!);
    expect(s.app.requests.at(-1)!.headers['x-wxhooks-replay']).toBe('1');
    expect(s.app.requests.at(-1)!.json).toMatchObject({ trigger_id: trigger });
  });
});

describe('docs/emulator.md', () => {
  it('its block: publish events and a run with holes, then list the attempts that failed (nothing listens on 8787)', async () => {
    const [emu, create, hour, event, runLine, deliveries, ...rest] = lines('docs/emulator.md', '# The local service');
    expect(rest).toEqual([]);
    const s = await emulator(emu);
    await ok(s, create!);
    expect((await ok(s, hour!)).stdout).toContain('forecast_hour.available');
    expect((await ok(s, event!)).stdout).toContain('events.available');
    await ok(s, runLine!);
    const failed = await ok(s, [...deliveries!, '--json']);
    const attempts = (JSON.parse(failed.stdout) as { deliveries: { webhook_id: string; outcome?: string; ok?: boolean }[] }).deliveries;
    expect(attempts.length).toBeGreaterThanOrEqual(2 + 8); // the hour, the event, and the run: 9 hours less the 2 skipped, one twice (its initialization_time.available has no subscription)
    expect(attempts.every((a) => String(a.webhook_id) === '1')).toBe(true);
  });
});

describe('docs/real-service.md', () => {
  const file = 'docs/real-service.md';

  it('webhooks and subscriptions: each line against a fresh emulator', async () => {
    const s = await emulator(['emulator', '--in-memory']);
    const commands = lines(file, '## Webhooks and subscriptions');
    expect(commands.map((c) => c.slice(0, 2).join(' '))).toEqual([
      'webhook create',
      'webhook list',
      'webhook get',
      'webhook update',
      'subscription add',
      'subscription update',
      'subscription update',
      'subscription list',
      'subscription remove',
      'webhook delete',
    ]);
    const out = [];
    for (const c of commands) out.push((await ok(s, c)).stdout);
    expect(out[0]).toContain('Created webhook 1');
    expect(out[2]).not.toContain('whsec_'); // get never shows the secret
    expect(out[4]).toContain('subscription 3');
    expect(out[7]).toMatch(/3\s+events\.available\s+event_type=heatwave,coldwave/);
  });

  it('doctor beside a running listen: every link works, and its pings reach your app marked test: true', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available', 'degree_days.available');
    const [l, doctor, ...rest] = lines(file, '## Which link is broken');
    expect(rest).toEqual([]);
    await listen(s, l!);
    const r = await ok(s, doctor!);
    expect(r.stdout).toContain('✓');
    const pings = s.app.requests.map((q) => q.json as { test: boolean; type: string });
    expect(pings.map((p) => p.type).sort()).toEqual(['degree_days.available', 'forecast_hour.available']);
    expect(pings.every((p) => p.test === true)).toBe(true);
  });
});

describe('docs/configuration.md', () => {
  it('secrets and settings: each line, with webhook 1 stored', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available');
    const secret = (await ok(s, ['secret', 'show', '1'])).stdout.trim();
    const commands = lines('docs/configuration.md', '## Secrets and settings');
    expect(commands.map((c) => c.slice(0, 2).join(' '))).toEqual([
      'secret list',
      'secret show',
      'secret set',
      'secret remove',
      'config set',
      'config get',
      'config list',
      'config path',
      'completion bash',
    ]);
    const out: string[] = [];
    for (const c of commands) out.push((await ok(s, c, c[1] === 'set' && c[0] === 'secret' ? `${secret}\n` : undefined)).stdout);
    expect(out[0]).toContain(s.env.WX_BASE_URL);
    expect(out[1]!.trim()).toBe(secret);
    expect(out[5]!.trim()).toBe('https://api.windbornesystems.com');
    expect(JSON.parse(out[6]!)).toMatchObject({ 'base-url': 'https://api.windbornesystems.com' });
    expect(out[7]!.trim()).toBe(s.dir);
    expect(out[8]).toContain('complete');
  });
});

describe('docs/library.md', () => {
  it('examples/express.js behind listen: the app prints the forecast hour', async () => {
    const s = await emulator();
    await webhook1(s, 'forecast_hour.available');
    const block = shBlockAfter(doc('docs/library.md'), 'Try it against the emulator').body;
    expect(block.split('\n')[0]).toBe('WX_WEBHOOK_SECRET=$(wxhooks secret show 1) PORT=3000 node examples/express.js &');
    const [show, l, trigger, ...rest] = wxhooksCommands(block);
    expect(rest).toEqual([]);
    const port = String(await freePort());
    const app = spawn(process.execPath, [join(ROOT, 'examples/express.js')], { cwd: ROOT, env: { PATH: process.env.PATH, WX_WEBHOOK_SECRET: (await ok(s, show!)).stdout.trim(), PORT: port } });
    stops.push(async () => {
      app.kill();
      await new Promise((r) => app.once('exit', r));
    });
    let said = '';
    const said6h = new Promise<void>((resolve) => app.stdout.setEncoding('utf8').on('data', (d: string) => (said += d).includes('+6h ready') && resolve()));
    // the app is ready when it answers; a refused try is tried again 10 ms later (nothing depends on the pause)
    while (
      !(await fetch(`http://127.0.0.1:${port}/health`).then(
        (r) => r.ok,
        () => false,
      ))
    )
      await new Promise((r) => setTimeout(r, 10));
    await listen({ ...s, swaps: { ...s.swaps, 'http://127.0.0.1:3000': `http://127.0.0.1:${port}` } }, l!);
    await ok(s, trigger!);
    await said6h;
    expect(said).toMatch(/forecast wm-6 \S+ \+6h ready \(trg_\w+\)/);
  });
});
