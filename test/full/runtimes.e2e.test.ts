import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { buildSync } from 'esbuild';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { freePort } from '../../scripts/harness.js';
import { signDelivery } from '../../src/signing/index.js';
import { tempDir } from '../helpers/cli.js';
import { post } from '../helpers/http.js';

// The handler library in each runtime, for real: the examples docs/library.md shows (examples/), unchanged, run by
// Node (Express, Fastify), Deno (Deno.serve), Bun (Bun.serve), Hono on Deno and on Bun, and workerd (a Worker),
// each on 127.0.0.1, sent deliveries signed by signDelivery. A runtime that is missing fails the test:
// the deno, bun and workerd npm packages (devDependencies) bring them.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const bin = (name: string) => {
  const path = join(ROOT, 'node_modules', '.bin', name);
  if (!existsSync(path)) throw new Error(`${name} is not installed (node_modules/.bin/${name}): npm ci installs it, from the ${name} package`);
  return path;
};
const SECRET = 'whsec_' + Buffer.alloc(32, 11).toString('base64');
const OLD = 'whsec_' + Buffer.alloc(32, 12).toString('base64');

interface Runtime {
  name: string;
  /** The command, its arguments and folder, for a port. */
  start(port: number): { command: string; args: string[]; cwd: string };
}

const example = (file: string) => join(ROOT, 'examples', file);
const runtimes: Runtime[] = [
  { name: 'Node, Express 5 (examples/express.js)', start: () => ({ command: process.execPath, args: [example('express.js')], cwd: ROOT }) },
  { name: 'Node, Fastify 5 (examples/fastify.js)', start: () => ({ command: process.execPath, args: [example('fastify.js')], cwd: ROOT }) },
  { name: 'Deno, Deno.serve (examples/deno.js)', start: () => ({ command: bin('deno'), args: ['run', '--allow-env', '--allow-net=127.0.0.1', '--allow-read', example('deno.js')], cwd: ROOT }) },
  { name: 'Bun, Bun.serve (examples/bun.js)', start: () => ({ command: bin('bun'), args: ['run', example('bun.js')], cwd: ROOT }) },
  {
    name: 'Hono on Deno (examples/hono.js)',
    start: (port) => ({ command: bin('deno'), args: ['serve', '--host', '127.0.0.1', '--port', String(port), '--allow-env', '--allow-net=127.0.0.1', '--allow-read', example('hono.js')], cwd: ROOT }),
  },
  { name: 'Hono on Bun (examples/hono.js)', start: () => ({ command: bin('bun'), args: ['run', example('hono.js')], cwd: ROOT }) },
  {
    name: 'workerd, a Worker (examples/worker.js)',
    start: (port) => {
      // the Worker's modules, as wrangler would upload them: the example, wxhooks/web's one file, and the
      // @opentelemetry/api it imports (a dependency of wxhooks: wrangler bundles it from node_modules; workerd
      // names a bare import by the importing module's folder)
      const dir = tempDir('wxhooks-workerd-');
      copyFileSync(example('worker.js'), join(dir, 'worker.js'));
      copyFileSync(join(ROOT, 'dist', 'web.js'), join(dir, 'web.js'));
      buildSync({
        stdin: { contents: "export * from '@opentelemetry/api';", resolveDir: ROOT },
        bundle: true,
        format: 'esm',
        platform: 'neutral',
        conditions: ['module'],
        outfile: join(dir, 'otel-api.js'),
        logLevel: 'warning',
      });
      writeFileSync(
        join(dir, 'config.capnp'),
        `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .app) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const app :Workerd.Worker = (
  modules = [ (name = "worker.js", esModule = embed "worker.js"), (name = "wxhooks/web", esModule = embed "web.js"), (name = "wxhooks/@opentelemetry/api", esModule = embed "otel-api.js") ],
  compatibilityDate = "2025-09-01",
  bindings = [ (name = "WX_WEBHOOK_SECRET", text = "${SECRET}"), (name = "WX_WEBHOOK_SECRET_OLD", text = "${OLD}") ],
);
`,
      );
      return { command: bin('workerd'), args: ['serve', join(dir, 'config.capnp')], cwd: dir };
    },
  },
];

interface App {
  url: string;
  output: () => string;
  /** Resolves when the app's output holds `text` `times` times (what the handlers printed). */
  printed(text: string, times?: number): Promise<void>;
  child: ChildProcessWithoutNullStreams;
}

let running: App | undefined;
afterEach(async () => {
  if (!running) return;
  const exited = new Promise((r) => running!.child.once('exit', r));
  running.child.kill('SIGKILL');
  await exited;
  running = undefined;
});

async function startApp(rt: Runtime): Promise<App> {
  const port = await freePort();
  const { command, args, cwd } = rt.start(port);
  const child = spawn(command, args, {
    cwd,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, PORT: String(port), WX_WEBHOOK_SECRET: SECRET, WX_WEBHOOK_SECRET_OLD: OLD, NO_COLOR: '1', DENO_NO_UPDATE_CHECK: '1', DENO_NO_PROMPT: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let out = '';
  const waiters = new Set<() => void>();
  const take = (d: Buffer) => ((out += d.toString('utf8')), waiters.forEach((w) => w()));
  child.stdout.on('data', take);
  child.stderr.on('data', take);
  const exited = new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`${rt.name} exited (${code}): ${out}`))));
  exited.catch(() => undefined);
  const app: App = {
    url: `http://127.0.0.1:${port}/webhooks`,
    output: () => out,
    child,
    printed: (text, times = 1) =>
      Promise.race([
        exited,
        new Promise<void>((resolve) => {
          const check = () => out.split(text).length - 1 >= times && (waiters.delete(check), resolve());
          waiters.add(check);
          check();
        }),
      ]),
  };
  running = app;
  // ready when it answers at all (a GET of the webhook path: 404 or 405); a refused try is tried again
  // 10 ms later, so as not to spin beside a runtime that is starting (nothing here depends on the pause)
  for (;;) {
    const answered = await Promise.race([
      exited,
      fetch(app.url).then(
        () => true,
        () => false,
      ),
    ]);
    if (answered) return app;
    await new Promise((r) => setTimeout(r, 10));
  }
}

function delivery(trigger: string, o: { secret?: string; data?: Record<string, unknown> } = {}) {
  const body = JSON.stringify({
    type: 'forecast_hour.available',
    webhook_id: 7,
    subscription_id: 3,
    trigger_id: trigger,
    created_at: '2026-11-24T06:00:00Z',
    test: false,
    data: o.data ?? { model: 'wm-6', initialization_time: '2026-11-24T00:00:00Z', forecast_hour: 12 },
  });
  return { headers: signDelivery({ secret: o.secret ?? SECRET, body, triggerId: trigger }) as unknown as Record<string, string>, body };
}

describe.each(runtimes)('$name', (rt) => {
  it('answers 200 and runs the handler once for a delivery sent twice; 401 with the reason for a tampered one; accepts the second secret; 500 when the handler throws, and again on the retry; 400 for a body that is not a JSON object', async () => {
    const app = await startApp(rt);
    const d = delivery('trg_rt_once');
    expect(await post(app.url, d.headers, d.body)).toMatchObject({ status: 200, body: '{"ok":true}' });
    await app.printed('+12h ready (trg_rt_once)');
    expect(await post(app.url, d.headers, d.body)).toMatchObject({ status: 200, body: '{"ok":true,"duplicate":true}' });

    const tampered = await post(app.url, d.headers, d.body.replace('wm-6', 'wm-66'));
    expect(tampered.status).toBe(401);
    expect(JSON.parse(tampered.body)).toMatchObject({ reason: 'no_match', error: expect.stringContaining('No signature matched with these secrets') });

    const rotated = delivery('trg_rt_old_secret', { secret: OLD });
    expect((await post(app.url, rotated.headers, rotated.body)).status).toBe(200);
    await app.printed('(trg_rt_old_secret)');

    const broken = delivery('trg_rt_throws', { data: { model: 'wm-6', initialization_time: '2026-11-24T00:00:00Z' } });
    expect((await post(app.url, broken.headers, broken.body)).status).toBe(500);
    await app.printed('failed, the service will retry: 1 handler of forecast_hour.available (trg_rt_throws) failed: trg_rt_throws has no forecast_hour');
    expect((await post(app.url, broken.headers, broken.body)).status).toBe(500); // released: the retry runs it again
    await app.printed('(trg_rt_throws) failed', 2);

    const list = '[1,2]';
    expect((await post(app.url, signDelivery({ secret: SECRET, body: list, triggerId: 'trg_rt_list' }) as unknown as Record<string, string>, list)).status).toBe(400);

    // the duplicate ran nothing: one line for the delivery sent twice
    expect(app.output().split('(trg_rt_once)').length - 1).toBe(1);
  }, 60_000);
});

it("the library's page (docs/library.md) shows every handler example word for word, and the README the Express one", () => {
  const guide = readFileSync(join(ROOT, 'docs/library.md'), 'utf8');
  for (const file of ['express.js', 'fastify.js', 'hono.js', 'worker.js', 'deno.js', 'bun.js', 'consumer.js'])
    expect(guide, file).toContain(`\`\`\`js\n${readFileSync(example(file), 'utf8').trim()}\n\`\`\``);
  expect(readFileSync(join(ROOT, 'README.md'), 'utf8')).toContain(`\`\`\`js\n${readFileSync(example('express.js'), 'utf8').trim()}\n\`\`\``);
});
