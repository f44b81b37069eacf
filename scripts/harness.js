// Small helpers the demo, the benchmarks and the tests share (plain JavaScript: the demo and the
// benchmarks run without a build step; the tests read the types in harness.d.ts).
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { createServer } from 'node:http';
import { join } from 'node:path';

/** A port on 127.0.0.1 that nothing listens on now: bound, then released. */
export async function freePort() {
  const s = createServer();
  await new Promise((r) => s.listen(0, '127.0.0.1', r));
  const { port } = s.address();
  await new Promise((r) => s.close(r));
  return port;
}

/** Calls `onLine` with each line a stream (a child's stdout) writes, without its newline. */
export function eachLine(stream, onLine) {
  let buffer = '';
  stream.setEncoding('utf8').on('data', (chunk) => {
    buffer += chunk;
    let nl;
    while ((nl = buffer.indexOf('\n')) !== -1) {
      const line = buffer.slice(0, nl);
      buffer = buffer.slice(nl + 1);
      onLine(line);
    }
  });
}

/**
 * The folder of the machine's PostgreSQL server binaries (initdb, postgres): PG_BIN, else
 * `pg_config --bindir`, else the newest /usr/lib/postgresql/<version>/bin (Debian's); undefined if none.
 */
export function pgBin(env = process.env, root = '/usr/lib/postgresql') {
  if (env.PG_BIN) return existsSync(join(env.PG_BIN, 'postgres')) ? env.PG_BIN : undefined;
  try {
    const dir = execFileSync('pg_config', ['--bindir'], { encoding: 'utf8', env, stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    if (existsSync(join(dir, 'postgres'))) return dir;
  } catch {
    // no pg_config: Debian's folders
  }
  const versions = existsSync(root) ? readdirSync(root).sort((a, b) => Number(b) - Number(a)) : [];
  return versions.map((v) => join(root, v, 'bin')).find((dir) => existsSync(join(dir, 'postgres')));
}

/** The Chromium executables the browser tests may start: CHROMIUM_PATH, else Debian's /usr/bin/chromium (those present). */
export function chromiumPaths(env = process.env, debian = '/usr/bin/chromium') {
  return [env.CHROMIUM_PATH, debian].filter((p) => p && existsSync(p));
}

/**
 * A throwaway PostgreSQL server for the tests and the benchmark: the machine's own server binaries
 * (PG_BIN, else `pg_config --bindir`, else /usr/lib/postgresql/<newest>/bin), in a new data folder,
 * on 127.0.0.1 and a free port; TCP connections need the password (`password`, random, also in
 * `url`), as a real server's do, so that the tests can check it is never shown. As root, it runs as the `postgres` user
 * (or `nobody`), since PostgreSQL refuses to run as root. `stop()` ends it and removes its folder;
 * `restart()` stops and starts the same server (for the tests of a database that goes away).
 */
export async function startPostgres() {
  const { execFileSync, spawn } = await import('node:child_process');
  const { chownSync, mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
  const { randomBytes } = await import('node:crypto');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const bin = pgBin();
  if (!bin) throw new Error('no PostgreSQL server binaries: install them (Debian: apt-get install postgresql), as .ci/run does, or set PG_BIN');
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-pg-'));
  const data = join(dir, 'data');
  let uid;
  let gid;
  if (process.getuid?.() === 0) {
    const passwd = execFileSync('getent', ['passwd', 'postgres'], { encoding: 'utf8' }).trim() || execFileSync('getent', ['passwd', 'nobody'], { encoding: 'utf8' }).trim();
    [uid, gid] = passwd.split(':').slice(2, 4).map(Number);
    chownSync(dir, uid, gid);
  }
  const as = { uid, gid, env: { ...process.env, LC_ALL: 'C', LANG: 'C' } };
  const password = `pw-${randomBytes(9).toString('hex')}`;
  const pwfile = join(dir, 'pw');
  writeFileSync(pwfile, password);
  if (uid !== undefined) chownSync(pwfile, uid, gid);
  execFileSync(join(bin, 'initdb'), ['-D', data, '-U', 'postgres', '--pwfile', pwfile, '--auth-local=trust', '--auth-host=scram-sha-256', '--no-sync', '-E', 'UTF8'], { ...as, stdio: 'ignore' });
  rmSync(pwfile);
  const port = await freePort();
  let server;
  const start = async () => {
    server = spawn(join(bin, 'postgres'), ['-D', data, '-p', String(port), '-h', '127.0.0.1', '-k', dir, '-c', 'fsync=off', '-c', 'max_connections=200'], { ...as, stdio: 'ignore' });
    // ready when it accepts a connection (pg_isready exits 0): an open port alone may still answer
    // "the database system is starting up" (57P03), which a loaded machine showed
    const { execFile } = await import('node:child_process');
    const ready = () => new Promise((resolve) => execFile(join(bin, 'pg_isready'), ['-h', '127.0.0.1', '-p', String(port), '-t', '5'], (err) => resolve(!err)));
    for (let i = 0; i < 600; i++) {
      if (await ready()) return;
      if (server.exitCode !== null) throw new Error('postgres exited at start');
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error('postgres did not start');
  };
  const halt = () => new Promise((resolve) => (server.exitCode !== null ? resolve() : (server.once('exit', resolve), server.kill('SIGINT'))));
  await start();
  return {
    url: `postgres://postgres:${password}@127.0.0.1:${port}/postgres`,
    password,
    port,
    /** The postmaster's process id (its backends are its children). */
    get pid() {
      return server.pid;
    },
    async restart(pauseMs = 0) {
      await halt();
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      await start();
    },
    stop: halt,
    start,
    async remove() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Chromium's flags for the tests and the benchmark: headless, nothing it would fetch or sync by itself. */
const BROWSER_ARGS = ['--headless=new', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'];

/** The first Chromium of chromiumPaths() that starts, by `start(executablePath)`; else an error that says why. */
async function firstChromium(start) {
  const tried = [];
  for (const executablePath of chromiumPaths()) {
    try {
      return await start(executablePath);
    } catch (err) {
      tried.push(err.message.split('\n')[0]);
    }
  }
  throw new Error(`no Chromium could be started (set CHROMIUM_PATH, or install Debian's chromium, as .ci/run does): ${tried.join('; ') || 'none found'}`);
}

/**
 * A headless Chromium, for the browser tests and the benchmark: CHROMIUM_PATH, else Debian's
 * /usr/bin/chromium (which .ci/run installs when it is missing). Never skipped: if none can start, it
 * throws and says why. playwright-core is loaded only here.
 */
export async function launchBrowser() {
  const { chromium } = await import('playwright-core');
  return firstChromium((executablePath) => chromium.launch({ executablePath, args: BROWSER_ARGS, headless: true }));
}

/**
 * The same Chromium as a server that other processes connect to (`chromium.connect(wsEndpoint())`): the
 * full test tier starts one per worker, once per run (test/full/global-setup.ts).
 */
export async function launchBrowserServer() {
  const { chromium } = await import('playwright-core');
  // no launch timeout of Playwright's (30 s): on a busy machine Chromium took longer; its readiness (the
  // DevTools endpoint it prints) is what is waited for, within 5 minutes
  return firstChromium((executablePath) => chromium.launchServer({ executablePath, args: BROWSER_ARGS, headless: true, timeout: 300_000 }));
}

/**
 * Run in the inspector page (`page.evaluate(clickToDetail)`): clicks the list's second row and resolves
 * with the milliseconds until the detail shows that delivery's verdict; 0 when there is no such row.
 * Shared by the inspector's test and the benchmark's `page` section.
 */
export async function clickToDetail() {
  const target = document.querySelectorAll('.row')[1];
  if (!target) return 0;
  const id = target.dataset.id;
  const detail = document.getElementById('detail');
  const started = performance.now();
  const shown = new Promise((resolve) => {
    const seen = new MutationObserver(() => {
      if (detail.dataset.id === id && detail.querySelector('.verdict')) seen.disconnect(), resolve();
    });
    seen.observe(detail, { childList: true, subtree: true, attributes: true });
  });
  target.click();
  await shown;
  return performance.now() - started;
}

/**
 * A broker's server binary: NATS_SERVER / REDIS_SERVER when set, else the one on the PATH. Never skipped:
 * a missing binary throws and names the Debian package that brings it (which .ci/run installs).
 */
async function brokerBinary(name, envVar, debianPackage) {
  const { execFileSync } = await import('node:child_process');
  if (process.env[envVar]) return process.env[envVar];
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim();
  } catch {
    throw new Error(`no ${name} on this machine: install it (Debian: apt-get install ${debianPackage}), as .ci/run does, or set ${envVar}`);
  }
}

/**
 * A broker server in a throwaway folder on 127.0.0.1 and a free port, started from `bin` with `args`;
 * ready when it has written `ready` (a regular expression) on stdout or stderr. `restart()` stops it
 * (SIGTERM: the orderly stop a deploy does, which writes what it holds) and starts the same server on the
 * same port and folder; `kill()` stops it with SIGKILL; `remove()` stops it and deletes its folder.
 */
async function startBroker(name, bin, args, ready, dir, port) {
  const { spawn } = await import('node:child_process');
  const { rmSync } = await import('node:fs');
  let server;
  const start = () =>
    new Promise((resolve, reject) => {
      server = spawn(bin, args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
      let said = '';
      let done = false;
      // a bound, not the wait: it is ready when it says so (seconds on a busy machine, not minutes)
      const timer = setTimeout(() => finish(new Error(`${name} did not start within 120 s: ${said.slice(-2000)}`)), 120_000);
      const finish = (err) => {
        if (done) return;
        done = true;
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      for (const stream of [server.stdout, server.stderr]) {
        stream.setEncoding('utf8').on('data', (d) => {
          if (done) return;
          said += d;
          if (ready.test(said)) finish();
        });
      }
      server.once('exit', (code) => finish(new Error(`${name} exited (${code}) at start: ${said.slice(-2000)}`)));
    });
  const halt = (signal = 'SIGTERM') => new Promise((resolve) => (server.exitCode !== null || server.signalCode !== null ? resolve() : (server.once('exit', () => resolve()), server.kill(signal))));
  // a test or benchmark that dies without remove() must not leave its broker running
  process.once('exit', () => server.exitCode === null && server.signalCode === null && server.kill('SIGKILL'));
  await start();
  return {
    port,
    get pid() {
      return server.pid;
    },
    async restart(pauseMs = 0) {
      await halt();
      if (pauseMs) await new Promise((r) => setTimeout(r, pauseMs));
      await start();
    },
    stop: () => halt(),
    kill: () => halt('SIGKILL'),
    start,
    async remove() {
      await halt();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/**
 * A throwaway NATS server with JetStream (its store in a new folder; `{ jetstream: false }` for one
 * without), on 127.0.0.1 and a free port, from the machine's `nats-server` (Debian's nats-server
 * package). Connections need a user and a password (`password` random, also in `url`), so that the tests
 * can check it is never shown.
 */
export async function startNats({ jetstream = true } = {}) {
  const { mkdtempSync } = await import('node:fs');
  const { randomBytes } = await import('node:crypto');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const bin = await brokerBinary('nats-server', 'NATS_SERVER', 'nats-server');
  const dir = mkdtempSync(join(process.env.WXHOOKS_TEST_TMP ?? tmpdir(), 'wxhooks-nats-'));
  const port = await freePort();
  const password = `pw-${randomBytes(9).toString('hex')}`;
  const args = ['-a', '127.0.0.1', '-p', String(port), ...(jetstream ? ['-js', '-sd', join(dir, 'js')] : []), '--user', 'wx', '--pass', password, '-n', `wxhooks-test-${port}`];
  const broker = await startBroker('nats-server', bin, args, /Server is ready/, dir, port);
  return Object.assign(broker, { url: `nats://wx:${password}@127.0.0.1:${port}`, password });
}

/**
 * A throwaway Redis server (its data in a new folder, the append-only file synced at every write so that
 * a restart keeps what it acknowledged), on 127.0.0.1 and a free port, from the machine's `redis-server`
 * (Debian's redis-server package). Connections need a password (`password`, random, also in `url`).
 */
export async function startRedis() {
  const { mkdtempSync } = await import('node:fs');
  const { randomBytes } = await import('node:crypto');
  const { tmpdir } = await import('node:os');
  const { join } = await import('node:path');
  const bin = await brokerBinary('redis-server', 'REDIS_SERVER', 'redis-server');
  const dir = mkdtempSync(join(process.env.WXHOOKS_TEST_TMP ?? tmpdir(), 'wxhooks-redis-'));
  const port = await freePort();
  const password = `pw-${randomBytes(9).toString('hex')}`;
  const args = [
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--dir',
    dir,
    '--requirepass',
    password,
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--save',
    '',
    '--daemonize',
    'no',
    '--logfile',
    '',
    '--protected-mode',
    'no',
  ];
  const broker = await startBroker('redis-server', bin, args, /Ready to accept connections/, dir, port);
  return Object.assign(broker, { url: `redis://:${password}@127.0.0.1:${port}`, password });
}
