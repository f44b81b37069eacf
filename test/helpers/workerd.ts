import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '../../scripts/harness.js';
import { tempDir } from './cli.js';

// The relay's Worker, for real: the built bundle (dist/relay-worker/index.js) in workerd (the runtime of
// Cloudflare Workers, from the workerd npm package), with its Durable Object's SQLite on disk, configured
// from relay/wrangler.toml as `wrangler deploy` would (its compatibility date, its vars), the token as a
// binding as a Worker secret is. workerd takes a second or so to start: a test file shares one.

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

export interface WorkerdRelay {
  url: string;
  port: number;
  pid: () => number;
  /** The Durable Object's folder: its SQLite files. */
  storage: string;
  /** What workerd printed (the relay's log lines, its errors). */
  output: () => string;
  /** Stops it (SIGKILL by default: a crash), keeping its storage. */
  stop(signal?: NodeJS.Signals): Promise<void>;
  /** Starts it again on the same port, over the same storage. */
  start(): Promise<void>;
  /** The Durable Object's SQLite file (once it has been created). */
  database(): string;
}

export interface WorkerdRelayOptions {
  token?: string;
  /** The Worker's one file (default: dist/relay-worker/index.js, as npm run build makes it). */
  bundle?: string;
  /** Vars, over relay/wrangler.toml's. */
  vars?: Record<string, string>;
}

/** relay/wrangler.toml's compatibility date and vars (a flat reading: the file is ours, and simple). */
function wranglerConfig(): { date: string; vars: Record<string, string> } {
  const toml = readFileSync(join(ROOT, 'relay', 'wrangler.toml'), 'utf8');
  const date = /^compatibility_date = "([^"]+)"/m.exec(toml)?.[1];
  if (!date) throw new Error('relay/wrangler.toml has no compatibility_date');
  const vars: Record<string, string> = {};
  const section = toml.split(/^\[vars\]$/m)[1] ?? '';
  for (const m of section.matchAll(/^([A-Z_]+) = "([^"]*)"$/gm)) vars[m[1]!] = m[2]!;
  return { date, vars };
}

export async function startWorkerdRelay(options: WorkerdRelayOptions = {}): Promise<WorkerdRelay> {
  const bin = join(ROOT, 'node_modules', '.bin', 'workerd');
  if (!existsSync(bin)) throw new Error('workerd is not installed (node_modules/.bin/workerd): npm ci installs it, from the workerd package');
  const bundle = options.bundle ?? join(ROOT, 'dist', 'relay-worker', 'index.js');
  if (!existsSync(bundle)) throw new Error(`${bundle} is missing: npm run build makes it`);
  const dir = tempDir('wxhooks-workerd-relay-');
  const storage = join(dir, 'do');
  mkdirSync(storage);
  copyFileSync(bundle, join(dir, 'index.js'));
  const port = await freePort();
  const { date, vars } = wranglerConfig();
  const bindings = Object.entries({ ...vars, ...options.vars, ...(options.token !== undefined ? { WXHOOKS_RELAY_TOKEN: options.token } : {}) })
    .map(([name, value]) => `(name = ${JSON.stringify(name)}, text = ${JSON.stringify(value)})`)
    .join(', ');
  writeFileSync(
    join(dir, 'config.capnp'),
    `using Workerd = import "/workerd/workerd.capnp";
const config :Workerd.Config = (
  services = [ (name = "main", worker = .relay), (name = "disk", disk = (path = ${JSON.stringify(storage)}, writable = true)) ],
  sockets = [ (name = "http", address = "127.0.0.1:${port}", http = (), service = "main") ],
);
const relay :Workerd.Worker = (
  modules = [ (name = "index.js", esModule = embed "index.js") ],
  compatibilityDate = "${date}",
  durableObjectNamespaces = [ (className = "RelayObject", uniqueKey = "wxhooks-relay", enableSql = true) ],
  durableObjectStorage = (localDisk = "disk"),
  bindings = [ (name = "RELAY", durableObjectNamespace = "RelayObject"), ${bindings} ],
);
`,
  );

  let child: ChildProcessWithoutNullStreams | undefined;
  let out = '';
  const url = `http://127.0.0.1:${port}`;
  const start = async () => {
    const c = spawn(bin, ['serve', join(dir, 'config.capnp'), '--verbose'], { cwd: dir, stdio: ['pipe', 'pipe', 'pipe'] });
    child = c;
    c.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    c.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<never>((_, reject) => c.once('exit', (code) => reject(new Error(`workerd exited (${code}): ${out}`))));
    exited.catch(() => undefined);
    // ready when it answers (refused tries are tried again 20 ms later, beside a runtime that is starting)
    for (;;) {
      const ok = await Promise.race([
        exited,
        fetch(`${url}/health`).then(
          (r) => r.ok,
          () => false,
        ),
      ]);
      if (ok) return;
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  await start();
  return {
    url,
    port,
    pid: () => child!.pid!,
    storage,
    output: () => out,
    async stop(signal = 'SIGKILL') {
      const c = child;
      if (!c || c.exitCode !== null || c.signalCode !== null) return;
      const exited = new Promise((r) => c.once('exit', r));
      c.kill(signal);
      await exited;
    },
    start,
    database() {
      const folder = join(storage, 'wxhooks-relay');
      const file = readdirSync(folder).find((f) => f.endsWith('.sqlite') && f !== 'metadata.sqlite');
      if (!file) throw new Error(`no Durable Object database in ${folder}`);
      return join(folder, file);
    },
  };
}
