// `npm run bench`: every figure a median over repeated runs, beside a floor measured in the same run.
// Not a test: it prints a table (and with --write, BENCHMARKS.md). Loopback only; every loop is bounded.
import { spawn, spawnSync } from 'node:child_process';
import { createServer } from 'node:http';
import { closeSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, totalmem, tmpdir, release } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { Webhook } from 'standardwebhooks';
import { signDelivery, verifyDelivery } from '../dist/index.js';
import { generateSecret } from '../dist/signing/sign.js';
import { clickToDetail, eachLine, freePort, launchBrowser, startPostgres } from '../scripts/harness.js';
import { sinks } from './sinks.js';
import { relay } from './relay.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/wxhooks.js');
const QUICK = process.argv.includes('--quick');
const rows = [];
const dirs = [];
/** A temporary folder, removed when the run ends. */
const benchDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-bench-'));
  dirs.push(dir);
  return dir;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const ms = (n) => `${n.toFixed(n < 10 ? 2 : 1)} ms`;
const log = (t) => process.stderr.write(`${t}\n`);
const cleanEnv = (extra = {}) => {
  const env = { ...process.env, ...extra };
  for (const k of Object.keys(env)) if (/_proxy$/i.test(k)) delete env[k];
  return env;
};

function row(area, measure, value, floor, ratio, target) {
  rows.push({ area, measure, value, floor, ratio: ratio === undefined ? '' : `${ratio.toFixed(2)}×`, target: target ?? '', ok: target ? (target.check(ratio) ? 'yes' : 'NO') : '' });
}
const within = (limit) => ({ text: `≤ ${limit}×`, check: (r) => r <= limit });
const atLeast = (limit) => ({ text: `≥ ${limit}×`, check: (r) => r >= limit });

function spawnOnce(args, env) {
  const t = process.hrtime.bigint();
  const r = spawnSync(process.execPath, args, { stdio: ['ignore', 'ignore', 'pipe'], env });
  if (r.status !== 0) throw new Error(`${args.join(' ')} exited ${r.status}: ${r.stderr}`);
  return Number(process.hrtime.bigint() - t) / 1e6;
}

/**
 * Runs each command n times, interleaved (floor, a, b, floor, a, b, ...), so that a change in the
 * machine's load touches all of them alike; returns the median time of each.
 */
function interleaved(commands, n, env) {
  const times = commands.map(() => []);
  for (let i = 0; i < n; i++) commands.forEach((args, k) => times[k].push(spawnOnce(args, env)));
  return times.map(median);
}

/** Starts a long-running child and resolves with its first stdout line. */
function startChild(args, env) {
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
  return new Promise((resolve, reject) => {
    // every line is read (so the child never blocks on a full pipe); the first one is its ready line
    let first;
    eachLine(child.stdout, (line) => {
      if (first !== undefined) return;
      first = line;
      resolve({ child, first });
    });
    child.on('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code} before it was ready`)));
  });
}
/** Starts `listen` with what it prints going to a file (as a person's log would take it), not to the load generator. */
async function startListen(env, dir, flags = [], bin = BIN) {
  const port = await freePort();
  const out = openSync(join(dir, `listen-${port}.out`), 'w');
  const errFile = join(dir, `listen-${port}.err`);
  const err = openSync(errFile, 'w');
  const args = [bin, 'listen', '--port', String(port), ...flags, '--secret-env', 'BENCH_SECRET'];
  const child = spawn(process.execPath, args, { env, stdio: ['ignore', out, err] });
  closeSync(out);
  closeSync(err);
  for (let i = 0; i < 200; i++) {
    const up = await request(`http://127.0.0.1:${port}/ready-check`).then(
      async (r) => (await r.body.dump(), true),
      () => false,
    );
    if (up) return { child, url: `http://127.0.0.1:${port}/`, errFile };
    if (child.exitCode !== null) break;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`listen did not start: ${readFileSync(errFile, 'utf8')}`);
}

const stop = (child) => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', resolve), child.kill('SIGTERM'))));

// ---------------------------------------------------------------- what a refused request costs
/**
 * `listen`'s CPU per refused request (a wrong signature) against its CPU per verified delivery, 35 KB
 * bodies, in the same process, in turns: an anonymous sender's request must cost no more than one of the
 * service's (the re-serialisation diagnosis of a failure, which cost 6× a verification, is rationed to a
 * few a minute).
 */
async function refused() {
  const secret = generateSecret();
  const other = generateSecret();
  const dir = benchDir();
  const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir);
  const n = QUICK ? 500 : 2000;
  const { Pool } = await import('undici');
  const pool = new Pool(l.url, { connections: 8 });
  /** Sends the requests 8 at a time; the CPU `listen` spent per request, in µs. */
  const send = async (list, expected) => {
    const before = cpuMs(l.child.pid);
    let next = 0;
    await Promise.all(
      Array.from({ length: 8 }, async () => {
        while (next < list.length) {
          const d = list[next++];
          const res = await pool.request({ path: '/', method: 'POST', headers: d.headers, body: d.body });
          await res.body.dump();
          if (res.statusCode !== expected) throw new Error(`expected ${expected}, got ${res.statusCode}`);
        }
      }),
    );
    return ((cpuMs(l.child.pid) - before) * 1000) / list.length;
  };
  const forged = (count) => deliveries(other, count, 35_000);
  try {
    log(`refused: ${n} verified and ${n} refused 35 KB requests a round, in turn`);
    await send(deliveries(secret, n, 35_000), 200);
    await send(forged(n), 401);
    const ratios = [];
    const good = [];
    const bad = [];
    for (let round = 0; round < (QUICK ? 3 : 7); round++) {
      const g = await send(deliveries(secret, n, 35_000), 200);
      const b = await send(forged(n), 401);
      good.push(g);
      bad.push(b);
      ratios.push(b / g);
      log(`  round ${round + 1}: refused ${b.toFixed(0)} µs, verified ${g.toFixed(0)} µs: ${(b / g).toFixed(2)}×`);
    }
    row(
      'listen',
      'CPU per refused request (a wrong signature, 35 KB), against CPU per verified delivery (35 KB), same process',
      `${median(bad).toFixed(0)} µs`,
      `${median(good).toFixed(0)} µs`,
      median(ratios),
      within(1.0),
    );
  } finally {
    await pool.close();
    await stop(l.child);
  }
}

// ---------------------------------------------------------------- start-up
async function startup() {
  const n = QUICK ? 9 : 31;
  log(`start-up: ${n} interleaved runs each`);
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: benchDir() });
  const commands = [
    ['`wxhooks --version`', ['--version']],
    ['`wxhooks --help`', ['--help']],
    ['`wxhooks webhook --help`', ['webhook', '--help']],
  ];
  const [floor, ...ours] = interleaved([['-e', '0'], ...commands.map(([, args]) => [BIN, ...args])], n, env);
  row('start-up', '`node -e 0` (the floor)', ms(floor), '', undefined);
  commands.forEach(([name], i) => row('start-up', name, ms(ours[i]), ms(floor), ours[i] / floor, within(1.3)));
  const { child, first } = await startChild([BIN, 'emulator', '--port', '0', '--json'], env);
  try {
    const info = JSON.parse(first);
    const authEnv = { ...env, WX_BASE_URL: info.base_url, WX_API_KEY: info.api_key };
    const [bare, auth] = interleaved(
      [
        [join(ROOT, 'bench/bare-auth.js'), info.base_url, info.api_key],
        [BIN, 'auth', 'status'],
      ],
      n,
      authEnv,
    );
    row('start-up', '`wxhooks auth status` against a local emulator', ms(auth), `${ms(bare)} (bare script, same request)`, auth / bare, within(1.5));
  } finally {
    await stop(child);
  }
}

// ---------------------------------------------------------------- listen throughput
function deliveries(secret, count, size = 0) {
  const ts = Math.floor(Date.now() / 1000);
  const pad = size ? 'x'.repeat(size) : '';
  return Array.from({ length: count }, (_, i) => {
    const trigger = `trg_bench_${process.pid}_${Date.now()}_${i}`;
    const body = Buffer.from(
      JSON.stringify({
        type: 'forecast_hour.available',
        webhook_id: '1',
        subscription_id: '1',
        trigger_id: trigger,
        test: false,
        data: { model: 'wm-6', initialization_time: '2026-11-21T00:00:00Z', forecast_hour: i % 48, pad },
      }),
    );
    return { body, headers: { 'content-type': 'application/json', ...signDelivery({ secret, body, triggerId: trigger, timestamp: ts }) } };
  });
}

/** A process's resident memory now, in MiB (from /proc). */
function rssMiB(pid) {
  return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))[1]) / 1024;
}

/** CPU time (user + system) a process has used so far, in ms; undefined where /proc is not there. */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks of 10 ms
  } catch {
    return undefined;
  }
}

/** CPU time of a process and its children (a PostgreSQL server and its backends), in ms. */
function treeCpuMs(pid) {
  let total = cpuMs(pid) ?? 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const fields = readFileSync(`/proc/${entry}/stat`, 'utf8').split(') ')[1].split(' ');
      if (Number(fields[1]) === pid) total += ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
    } catch {
      // gone meanwhile
    }
  }
  return total;
}

/**
 * Runs bench/load.js (its own process, so the load costs the server's process nothing) against a server:
 * `count` deliveries on `concurrency` connections, with no warm-up of its own (the caller warms up).
 * `alsoPid`: another process whose CPU (with its children's) is counted per delivery too, in `alsoUs`.
 */
function load(pid, port, secret, count, concurrency, alsoPid, loadFlags = []) {
  const before = cpuMs(pid);
  const alsoBefore = alsoPid && treeCpuMs(alsoPid);
  const r = spawnSync(process.execPath, [join(ROOT, 'bench/load.js'), String(port), secret, String(count), String(concurrency), '0', ...loadFlags], { encoding: 'utf8' });
  const after = cpuMs(pid);
  const alsoAfter = alsoPid && treeCpuMs(alsoPid);
  if (r.status !== 0) throw new Error(`bench/load.js failed: ${r.stderr}`);
  const result = JSON.parse(r.stdout);
  if (result.failures) throw new Error(`${result.failures} of ${count} requests were not answered 200`);
  if (before !== undefined && after !== undefined) result.cpuUs = ((after - before) * 1000) / count;
  if (alsoPid) result.alsoUs = ((alsoAfter - alsoBefore) * 1000) / count;
  return result;
}

/**
 * `listen` and the floor, measured in two ways.
 *
 * - Steady state (the targets): a receiver runs for hours, so what counts is its throughput once V8 has
 *   compiled its code. All the servers run side by side, each warmed up, and take the load in turn in
 *   short runs (a cycle: each server in turn, at 1 client, then at 50), so that each ratio compares runs
 *   a second apart. This machine's speed drifts by ±30% over seconds (the same server, measured in
 *   back-to-back runs of 10,000, gave 17,000-31,000/s); servers measured minutes apart, as separate
 *   rounds, would measure that drift more than the servers.
 * - Cold: each server's first deliveries after it starts, while V8 is still compiling (the bare server
 *   reaches its steady throughput after about 6,000 deliveries, `listen`, having more code, after
 *   15,000-20,000).
 *
 * Each `listen` runs in a folder of its own, so it starts with an empty processed-pairs file; by the end
 * of its round it holds some 100,000 pairs.
 */
async function listenThroughput() {
  const secret = generateSecret();
  // Six rounds of fresh processes: two processes of the same build, warmed alike and measured in the same
  // cycles, differ by up to 10% in CPU per delivery for as long as they run (V8 compiles each one's code
  // a little differently: `listen --inspect` 57.6 and 64.1 µs, 58.2 and 68.4 µs, in two runs of four
  // servers), so a ratio over three rounds measured the luck of three pairs of processes as much as the
  // code.
  const rounds = QUICK ? 1 : 6;
  const cycles = QUICK ? 3 : 12;
  const COLD = QUICK ? 2000 : 10000;
  const WARM = 20000; // `listen` reaches its steady speed 15,000-20,000 deliveries after it starts: a quick run warms up as fully
  const ONE = 1000;
  const MANY = 5000;
  const listen = (flags, bin) => async () => {
    const dir = benchDir();
    const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, flags, bin);
    return { child: l.child, port: new URL(l.url).port };
  };
  // BENCH_COMPARE=DIR adds the `listen` of another checkout (built), run as the default one is: to measure what a change cost
  const compare = process.env.BENCH_COMPARE ? { before: listen([], join(process.env.BENCH_COMPARE, 'bin/wxhooks.js')) } : {};
  // `listen --inspect`, with a reader of the page's event stream attached (every event sent to it)
  const inspect = async () => {
    const inspectPort = await freePort();
    const dir = benchDir();
    const started = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, ['--inspect', `127.0.0.1:${inspectPort}`]);
    const l = { child: started.child, port: new URL(started.url).port };
    // the page's link, with its token, as listen printed it
    let link;
    for (let i = 0; i < 200 && !link; i++) {
      link = /Inspector: (\S+)/.exec(readFileSync(started.errFile, 'utf8'))?.[1];
      if (!link) await new Promise((r) => setTimeout(r, 25));
    }
    const reader = await startChild([join(ROOT, 'bench/sse-reader.js'), link], cleanEnv());
    l.child.on('exit', () => reader.child.kill('SIGTERM'));
    return l;
  };
  const starts = {
    text: listen([]),
    // `listen` again, sent bodies that name no forecast (--no-forecast): what the forecast's own pairs cost
    plain: listen([]),
    json: listen(['--json']),
    // --metrics: its port served (not scraped during the load: a scrape costs the scrape, not the deliveries)
    metrics: listen(['--metrics', '0']),
    fsync: listen(['--fsync']),
    inspect,
    ...compare,
    bare: async () => {
      const b = await startChild([join(ROOT, 'bench/bare-receiver.js'), secret], cleanEnv());
      return { child: b.child, port: b.first.trim() };
    },
  };
  const names = Object.keys(starts);
  log(
    `listen: ${rounds} rounds of listen, listen --json and the floor, each started afresh: its first ${COLD} deliveries at 50 clients, ` +
      `${WARM} more to warm up, then ${cycles} cycles of ${ONE} at 1 client and ${MANY} at 50, the three in turn`,
  );
  const results = Object.fromEntries(names.map((n) => [n, { cold: [], one: [], many: [] }]));
  const rss = { warm: [], end: [] };
  let turn = 0;
  for (let r = 0; r < rounds; r++) {
    const servers = {};
    try {
      for (const name of names) servers[name] = await starts[name]();
      const at = (name, count, concurrency) => load(servers[name].child.pid, servers[name].port, secret, count, concurrency, undefined, name === 'plain' ? ['--no-forecast'] : []);
      // the order turns each time, so none of the three always follows the same one
      const inTurn = () => names.map((_, k) => names[(turn + k) % names.length]);
      for (const name of inTurn()) results[name].cold.push(at(name, COLD, 50));
      for (const name of names) at(name, WARM, 50);
      rss.warm.push(rssMiB(servers.inspect.child.pid));
      for (let c = 0; c < cycles; c++, turn++) {
        for (const name of inTurn()) {
          results[name].one.push(at(name, ONE, 1));
          results[name].many.push(at(name, MANY, 50));
        }
      }
      rss.end.push(rssMiB(servers.inspect.child.pid));
      const mine = (name) => results[name].many.slice(-cycles);
      log(`round ${r + 1}: listen --inspect at 50 clients, ${median(mine('inspect').map((o, i) => o.rps / mine('text')[i].rps)).toFixed(2)}× listen`);
    } finally {
      for (const server of Object.values(servers)) await stop(server.child);
    }
  }
  const m = (xs, k) => median(xs.map((x) => x[k]));
  const delivered = COLD + WARM + cycles * (ONE + MANY);
  row(
    'listen',
    `resident memory of \`listen --inspect\` (--history 500) after ${delivered} deliveries`,
    `${median(rss.end).toFixed(0)} MiB`,
    `${median(rss.warm).toFixed(0)} MiB (after ${COLD + WARM})`,
    median(rss.end) / median(rss.warm),
    within(1.25),
  );
  // per cycle (or round, for cold), then the median
  const ratio = (name, phase, k) => median(results[name][phase].map((o, i) => o[k] / results.bare[phase][i][k]));
  const floor = (phase) => `${Math.round(m(results.bare[phase], 'rps'))}/s (bare node:http + HMAC)`;
  for (const [phase, clients] of [
    ['one', '1 client'],
    ['many', '50 clients'],
  ]) {
    const x = (name) => results[name][phase];
    row('listen', `deliveries/s, ${clients}: \`listen\` (verify + dedupe file + a line each)`, `${Math.round(m(x('text'), 'rps'))}/s`, floor(phase), ratio('text', phase, 'rps'), atLeast(0.8));
    row('listen', `deliveries/s, ${clients}: \`listen --json\``, `${Math.round(m(x('json'), 'rps'))}/s`, floor(phase), ratio('json', phase, 'rps'));
    row(
      'listen',
      `deliveries/s, ${clients}: \`listen --fsync\` (each batch synced to the disk before its answers)`,
      `${Math.round(m(x('fsync'), 'rps'))}/s`,
      floor(phase),
      ratio('fsync', phase, 'rps'),
    );
    if (phase === 'many') {
      const vsListen = median(x('inspect').map((o, i) => o.rps / x('text')[i].rps));
      row(
        'listen',
        `deliveries/s, ${clients}: \`listen --inspect\`, the page's event stream read, against \`listen\``,
        `${Math.round(m(x('inspect'), 'rps'))}/s`,
        `${Math.round(m(x('text'), 'rps'))}/s (\`listen\`, same cycles)`,
        vsListen,
        atLeast(0.9),
      );
    }
    if (phase === 'many') {
      const vsListen = median(x('metrics').map((o, i) => o.rps / x('text')[i].rps));
      row(
        'listen',
        `deliveries/s, ${clients}: \`listen --metrics\` (every step timed), against \`listen\``,
        `${Math.round(m(x('metrics'), 'rps'))}/s`,
        `${Math.round(m(x('text'), 'rps'))}/s (\`listen\`, same cycles)`,
        vsListen,
        atLeast(0.95),
      );
    }
    if (results.before)
      row('listen', `deliveries/s, ${clients}: \`listen\` of ${process.env.BENCH_COMPARE} (BENCH_COMPARE)`, `${Math.round(m(x('before'), 'rps'))}/s`, floor(phase), ratio('before', phase, 'rps'));
    if (phase === 'many' && x('text')[0].cpuUs !== undefined) {
      for (const name of ['text', 'plain', 'json', 'fsync', 'inspect', 'metrics', ...(results.before ? ['before'] : [])]) {
        const label = {
          text: '`listen`',
          plain: "`listen`, deliveries that name no forecast (the delivery's pair alone, no catch-up's)",
          json: '`listen --json`',
          fsync: '`listen --fsync`',
          inspect: '`listen --inspect` (stream read)',
          metrics: '`listen --metrics`',
          before: `\`listen\` of ${process.env.BENCH_COMPARE}`,
        }[name];
        // the bar a receiver that keeps each delivery's pair can hold against a floor that keeps none: its
        // CPU with the delivery's pair alone (the forecast's pairs are the catch-up's price: DECISIONS.md)
        const bar = name === 'plain' ? within(1.15) : undefined;
        row('listen', `server CPU per delivery, ${clients}: ${label}`, `${m(x(name), 'cpuUs').toFixed(0)} µs`, `${m(x('bare'), 'cpuUs').toFixed(0)} µs`, ratio(name, phase, 'cpuUs'), bar);
      }
    }
    row('listen', `p50 latency, ${clients}: \`listen\``, ms(m(x('text'), 'p50')), ms(m(x('bare'), 'p50')), ratio('text', phase, 'p50'));
    const p99 = m(x('text'), 'p99');
    row('listen', `p99 latency, ${clients}: \`listen\``, ms(p99), ms(m(x('bare'), 'p99')), ratio('text', phase, 'p99'), phase === 'many' ? { text: '< 10 ms', check: () => p99 < 10 } : undefined);
    row('listen', `p99 latency, ${clients}: \`listen --fsync\``, ms(m(x('fsync'), 'p99')), ms(m(x('bare'), 'p99')), ratio('fsync', phase, 'p99'));
  }
  for (const name of ['text', 'json']) {
    const label = name === 'json' ? '`listen --json`' : '`listen`';
    row('listen', `deliveries/s, its first ${COLD} after start, 50 clients: ${label}`, `${Math.round(m(results[name].cold, 'rps'))}/s`, floor('cold'), ratio(name, 'cold', 'rps'));
  }
  row('listen', `p99 latency, its first ${COLD} after start, 50 clients: \`listen\``, ms(m(results.text.cold, 'p99')), ms(m(results.bare.cold, 'p99')), ratio('text', 'cold', 'p99'));
}

// ---------------------------------------------------------------- the Node middleware's span, with the API and no SDK
/**
 * The Node middleware of this build (a span per delivery through @opentelemetry/api, no SDK registered:
 * a no-op span) against the same server of the build before the spans, BENCH_BASE (a built checkout of
 * that commit: `git archive <commit> | tar -x -C DIR`, node_modules linked, `npm run build`). Both run
 * side by side and take the load in turn, as listen's servers do; the ratio is the server's CPU per
 * delivery. Without BENCH_BASE the row says so.
 */
async function middleware() {
  const base = process.env.BENCH_BASE;
  if (!base) {
    row('middleware', 'server CPU per delivery, 50 clients: the Node middleware, API and no SDK', 'skipped: set BENCH_BASE to a built checkout of the commit before', '', undefined);
    return;
  }
  const secret = generateSecret();
  const rounds = QUICK ? 1 : 4;
  const cycles = QUICK ? 4 : 12;
  const MANY = 5000;
  const start = async (dist) => {
    const s = await startChild([join(ROOT, 'bench/middleware-server.js'), dist, secret], cleanEnv());
    return { child: s.child, port: s.first.trim() };
  };
  const builds = { now: join(ROOT, 'dist/index.js'), before: join(base, 'dist/index.js') };
  const results = { now: [], before: [] };
  log(`middleware: ${rounds} rounds of this build's and BENCH_BASE's middleware, each warmed up, then ${cycles} cycles of ${MANY} at 50 clients, in turn`);
  for (let r = 0; r < rounds; r++) {
    const servers = {};
    try {
      for (const [name, dist] of Object.entries(builds)) servers[name] = await start(dist);
      for (const name of Object.keys(builds)) load(servers[name].child.pid, servers[name].port, secret, 20000, 50);
      for (let c = 0; c < cycles; c++) {
        const order = (r + c) % 2 ? ['now', 'before'] : ['before', 'now'];
        for (const name of order) results[name].push(load(servers[name].child.pid, servers[name].port, secret, MANY, 50));
      }
    } finally {
      for (const server of Object.values(servers)) await stop(server.child);
    }
  }
  const cpu = (name) => median(results[name].map((x) => x.cpuUs));
  const ratio = median(results.now.map((x, i) => x.cpuUs / results.before[i].cpuUs));
  row(
    'middleware',
    'server CPU per delivery, 50 clients: the Node middleware, a span per delivery (API, no SDK)',
    `${cpu('now').toFixed(1)} µs`,
    `${cpu('before').toFixed(1)} µs (BENCH_BASE, no span)`,
    ratio,
    { text: '≤ 1.02', check: () => ratio <= 1.02 },
  );
  row(
    'middleware',
    'deliveries/s, 50 clients: the Node middleware, a span per delivery (API, no SDK)',
    `${Math.round(median(results.now.map((x) => x.rps)))}/s`,
    `${Math.round(median(results.before.map((x) => x.rps)))}/s (BENCH_BASE)`,
    median(results.now.map((x, i) => x.rps / results.before[i].rps)),
  );
}

// ---------------------------------------------------------------- the Node middleware against @octokit/webhooks'
/**
 * The Node middleware of this build (exactly-once on: a MemoryStore claims and completes each delivery's
 * pair) against @octokit/webhooks' `createNodeMiddleware` (a devDependency, for this only), each on a bare
 * node:http server of its own (bench/octokit-server.js), each with one handler that does nothing, each
 * answering 200 once it ran. The same bodies, each with its own delivery id, signed the way each verifies
 * (ours: the service's Webhook-Signature; octokit: GitHub's X-Hub-Signature-256). Fresh processes each round
 * (two processes of one build differ by up to 10% for as long as they run), warmed up, then in turn in the
 * same cycles, the order swapped each cycle. The figure is the server's own CPU per delivery
 * (process.cpuUsage, read over `GET /cpu` before and after each load), per cycle ratio, then the median.
 */
async function octokit() {
  const secret = generateSecret();
  const rounds = QUICK ? 2 : 6;
  const cycles = QUICK ? 4 : 10;
  const WARM = 20000;
  const MANY = 5000;
  const ONE = 1000;
  // wxhooks twice: deliveries of a forecast hour, as the service sends (the delivery's pair and the forecast's,
  // src/delivery/forecast.ts), and the same bodies naming no forecast (the delivery's pair alone): what
  // catching up exactly once costs each delivery
  const names = ['wxhooks', 'wxhooks-plain', 'octokit'];
  const kind = (name) => (name === 'octokit' ? 'octokit' : 'wxhooks');
  const cpuUs = async (port) => {
    const res = await request(`http://127.0.0.1:${port}/cpu`);
    return (await res.body.json()).us;
  };
  /** `count` deliveries on `clients` connections: their rate, latencies, and the server's CPU per delivery in µs. */
  const at = async (name, server, count, clients) => {
    const before = await cpuUs(server.port);
    const args = [join(ROOT, 'bench/load.js'), server.port, secret, String(count), String(clients), '0', ...({ octokit: ['--github'], 'wxhooks-plain': ['--no-forecast'] }[name] ?? [])];
    const r = spawnSync(process.execPath, args, { encoding: 'utf8' });
    const after = await cpuUs(server.port);
    if (r.status !== 0) throw new Error(`bench/load.js failed: ${r.stderr}`);
    const result = JSON.parse(r.stdout);
    if (result.failures) throw new Error(`${name}: ${result.failures} of ${count} requests were not answered 200 (${JSON.stringify(result.statuses)})`);
    return { ...result, cpuUs: (after - before) / count };
  };
  const results = Object.fromEntries(names.map((n) => [n, { one: [], many: [] }]));
  log(`octokit: ${rounds} rounds of wxhooks' Node middleware (MemoryStore) and @octokit/webhooks', ${WARM} each to warm up, then ${cycles} cycles of ${ONE} at 1 client and ${MANY} at 50, in turn`);
  for (let r = 0; r < rounds; r++) {
    const servers = {};
    try {
      for (const name of names) {
        const s = await startChild([join(ROOT, 'bench/octokit-server.js'), kind(name), join(ROOT, 'dist/index.js'), secret], cleanEnv());
        servers[name] = { child: s.child, port: s.first.trim() };
      }
      for (const name of names) await at(name, servers[name], WARM, 50);
      for (let c = 0; c < cycles; c++) {
        for (const name of (r + c) % 2 ? [...names].reverse() : names) {
          results[name].one.push(await at(name, servers[name], ONE, 1));
          results[name].many.push(await at(name, servers[name], MANY, 50));
        }
      }
      const mine = (name) => results[name].many.slice(-cycles);
      log(`  round ${r + 1}: CPU per delivery at 50 clients, ${median(mine('wxhooks').map((o, i) => o.cpuUs / mine('octokit')[i].cpuUs)).toFixed(2)}× octokit's`);
    } finally {
      for (const server of Object.values(servers)) await stop(server.child);
    }
  }
  const m = (name, phase, k) => median(results[name][phase].map((x) => x[k]));
  const ratio = (phase, k, name = 'wxhooks') => median(results[name][phase].map((x, i) => x[k] / results.octokit[phase][i][k]));
  for (const [phase, clients] of [
    ['many', '50 clients'],
    ['one', '1 client'],
  ]) {
    const cpu = ratio(phase, 'cpuUs');
    row(
      'middleware',
      `server CPU per delivery, ${clients}: the Node middleware, exactly-once on (MemoryStore), against @octokit/webhooks'`,
      `${m('wxhooks', phase, 'cpuUs').toFixed(1)} µs`,
      `${m('octokit', phase, 'cpuUs').toFixed(1)} µs (octokit, same cycles)`,
      cpu,
      within(1.0),
    );
    row(
      'middleware',
      `server CPU per delivery, ${clients}: the same, deliveries that name no forecast (the delivery's pair alone, no catch-up's), against @octokit/webhooks'`,
      `${m('wxhooks-plain', phase, 'cpuUs').toFixed(1)} µs`,
      `${m('octokit', phase, 'cpuUs').toFixed(1)} µs (octokit, same cycles)`,
      ratio(phase, 'cpuUs', 'wxhooks-plain'),
      within(1.2),
    );
    row(
      'middleware',
      `deliveries/s, ${clients}: the Node middleware against @octokit/webhooks'`,
      `${Math.round(m('wxhooks', phase, 'rps'))}/s`,
      `${Math.round(m('octokit', phase, 'rps'))}/s (octokit)`,
      ratio(phase, 'rps'),
    );
  }
}

// ---------------------------------------------------------------- verification alone
function verification() {
  const secret = generateSecret();
  const wh = new Webhook(secret);
  for (const [label, size, iterations] of [
    ['1 KB', 1024, QUICK ? 2000 : 20000],
    ['1 MB', 1024 * 1024, QUICK ? 20 : 100],
  ]) {
    log(`verify: ${label} × ${iterations}`);
    const [d] = deliveries(secret, 1, size - 200);
    const text = d.body.toString('utf8');
    const lower = Object.fromEntries(Object.entries(d.headers).map(([k, v]) => [k.toLowerCase(), v]));
    const swHeaders = { 'webhook-id': lower['trigger-id'], 'webhook-timestamp': lower['webhook-timestamp'], 'webhook-signature': lower['webhook-signature'] };
    const time = (fn) => {
      const rounds = [];
      for (let r = 0; r < 5; r++) {
        const t = process.hrtime.bigint();
        for (let i = 0; i < iterations; i++) fn();
        rounds.push(Number(process.hrtime.bigint() - t) / 1e6 / iterations);
      }
      return median(rounds);
    };
    const ours = time(() => {
      if (!verifyDelivery({ secret, headers: lower, body: d.body, scheme: 'standard' }).ok) throw new Error('ours did not verify');
    });
    const theirs = time(() => wh.verify(text, swHeaders));
    const fmt = (x) => (x < 0.1 ? `${(x * 1000).toFixed(1)} µs` : ms(x));
    row('verify', `one ${label} delivery (verifyDelivery)`, fmt(ours), `${fmt(theirs)} (standardwebhooks)`, ours / theirs, within(1.0));
  }
}

// ---------------------------------------------------------------- the handler library: wxhooks/web against the Node entry
async function handlerLibrary() {
  const { Webhooks: NodeWebhooks } = await import('../dist/index.js');
  const { Webhooks: WebWebhooks } = await import('../dist/web.js');
  const secret = generateSecret();
  for (const [label, size, iterations] of [
    ['1 KB', 1024, QUICK ? 2000 : 20000],
    ['1 MB', 1024 * 1024, QUICK ? 20 : 100],
  ]) {
    log(`handler: verifications of ${label} × ${iterations}, each entry`);
    const [d] = deliveries(secret, 1, size - 200);
    const headers = Object.fromEntries(Object.entries(d.headers).map(([k, v]) => [k.toLowerCase(), v]));
    const body = new Uint8Array(d.body);
    const node = new NodeWebhooks({ secret });
    const web = new WebWebhooks({ secret });
    // verify() alone: what differs between the entries is the crypto (the rules are one module)
    const time = async (hooks) => {
      const rounds = [];
      for (let r = 0; r < 5; r++) {
        const t = process.hrtime.bigint();
        for (let i = 0; i < iterations; i++) if (!(await hooks.verify({ headers, body })).ok) throw new Error('did not verify');
        rounds.push(iterations / (Number(process.hrtime.bigint() - t) / 1e9));
      }
      return median(rounds);
    };
    await time(web); // warm both before measuring
    await time(node);
    const w = await time(web);
    const n = await time(node);
    const per = (x) => `${Math.round(x)}/s`;
    row('handler', `verifications a second, ${label}: \`wxhooks/web\` (Web Crypto)`, per(w), `${per(n)} (the Node entry)`, w / n);
  }
  const { buildSync } = await import('esbuild');
  const { gzipSync } = await import('node:zlib');
  const gzipped = (o) =>
    gzipSync(buildSync({ entryPoints: [join(ROOT, 'dist', 'web.js')], bundle: true, minify: true, format: 'esm', write: false, ...o }).outputFiles[0].contents, { level: 9 }).length;
  // the bar is held to wxhooks' own code: @opentelemetry/api is the app's (one copy, the one its SDK
  // registered with), so it is left out, and what an app without OpenTelemetry of its own pays for it is
  // the second row (its ES module build, as esbuild for the browser, Vite, Rollup and webpack resolve it).
  // 6 KB until the delivery core (#33), 10.2 KB before the one door function, 13.9 KB with it, a replay's
  // mark, the forecast's identity and the library's span, 13.2 KB with DEFAULTS a namespace; DECISIONS.md
  // ("Two entries, one set of rules") says where the bytes are
  const own = gzipped({ platform: 'neutral', external: ['@opentelemetry/api'] });
  row('handler', '`wxhooks/web`, minified and gzipped (its own code)', `${(own / 1024).toFixed(1)} KB`, '8 KB', own / 8192, within(1.0));
  const withApi = gzipped({ platform: 'browser' });
  row(
    'handler',
    '`wxhooks/web` with `@opentelemetry/api` bundled (an app with no OpenTelemetry of its own)',
    `${(withApi / 1024).toFixed(1)} KB`,
    `${(own / 1024).toFixed(1)} KB (its own code)`,
    withApi / own,
  );
}

// ---------------------------------------------------------------- the inspector page, in a real Chromium
/**
 * What the page costs a person (issue #28's targets, in milliseconds a person feels, so absolute): the
 * time from a click to the delivery's detail while `listen --inspect` takes 1,000 deliveries a second
 * (its floor: the same clicks on an idle `listen`), and the time a 400 × 400 gridded response takes to
 * draw (its floor: the emulator's 3 × 4 grid). Measured in the page (performance.now), 25 clicks each.
 */
async function page() {
  const secret = generateSecret();
  const dir = benchDir();
  const env = cleanEnv({ BENCH_SECRET: secret, WXHOOKS_CONFIG_DIR: dir });
  const inspectPort = await freePort();
  const l = await startListen(env, dir, ['--json', '--inspect', `127.0.0.1:${inspectPort}`]);
  const browser = await launchBrowser();
  try {
    const outFile = readdirSync(dir).find((f) => f.startsWith('listen-') && f.endsWith('.out'));
    let link;
    for (let i = 0; i < 200 && !link; i++) {
      link = readFileSync(join(dir, outFile), 'utf8')
        .split('\n')
        .map((line) => {
          try {
            return JSON.parse(line);
          } catch {
            return {};
          }
        })
        .find((e) => e.event === 'inspector')?.url;
      if (!link) await new Promise((r) => setTimeout(r, 25));
    }
    const tab = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    await tab.goto(link);
    await tab.locator('.state.live').waitFor();
    const send = (trigger, data) => {
      const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: trigger, test: false, data }));
      return request(l.url, { method: 'POST', headers: { 'content-type': 'application/json', ...signDelivery({ secret, body, triggerId: trigger }) }, body }).then(
        async (r) => (await r.body.dump(), r.statusCode),
      );
    };
    // one click, timed in the page: from the click to the delivery's verdict on show
    const click = () => tab.evaluate(clickToDetail);
    const clicks = QUICK ? 10 : 25;
    log(`page: ${clicks} clicks on an idle listen, then ${clicks} at 1,000 deliveries a second`);
    await Promise.all(Array.from({ length: 50 }, (_, i) => send(`trg_page_idle_${i}`, { model: 'wm-6', forecast_hour: i % 48 })));
    await tab.locator('.row', { hasText: 'trg_page_idle_49' }).first().waitFor();
    const idle = [];
    for (let i = 0; i < clicks; i++) idle.push(await click());
    const busy = [];
    const sent = [];
    for (let tick = 0; busy.length < clicks; tick++) {
      const started = Date.now();
      for (let i = 0; i < 100; i++) sent.push(send(`trg_page_flood_${tick}_${i}`, { model: 'flood', forecast_hour: i % 48 }));
      if (tick >= 5) busy.push(await click());
      await new Promise((r) => setTimeout(r, Math.max(0, started + 100 - Date.now())));
    }
    if ((await Promise.all(sent)).some((status) => status !== 200)) throw new Error('a delivery was not answered 200');
    if ([...idle, ...busy].includes(0)) throw new Error('a click found no row to open');
    const p95 = pct(busy, 95);
    row('page', `click to the delivery's detail, p95, at 1,000 deliveries/s (median ${ms(median(busy))})`, ms(p95), `${ms(pct(idle, 95))} (idle)`, p95 / pct(idle, 95), {
      text: '≤ 100 ms',
      check: () => p95 <= 100,
    });

    log('page: a 4 × 4 grid and a 400 × 400 grid drawn, 5 times each');
    const grid = (n) => {
      const values = Array.from({ length: n }, (_, i) => Array.from({ length: n }, (_, j) => 250 + ((i * 7 + j * 3) % 500)));
      return {
        model: 'wm-6',
        forecast_hour: 1,
        response: { type: 'gridded', variable: 'temperature_2m', units: 'K', latitudes: values.map((_, i) => 60 - i * 0.1), longitudes: values[0].map((_, j) => j * 0.1), values },
      };
    };
    const drawn = async (trigger) => {
      await tab.locator('.row', { hasText: trigger }).first().click();
      const chart = tab.locator(`#detail[data-id] [data-chart="gridded"]`);
      await tab.waitForFunction((t) => document.getElementById('detail')?.textContent?.includes(t) && document.querySelector('[data-chart="gridded"][data-ms]'), trigger);
      return Number(await chart.getAttribute('data-ms'));
    };
    await tab.locator('#list').evaluate((list) => (list.scrollTop = 0));
    const small = [];
    const large = [];
    for (let i = 0; i < 5; i++) {
      await send(`trg_grid_small_${i}`, grid(4));
      await send(`trg_grid_large_${i}`, grid(400));
      await tab
        .locator('.row', { hasText: `trg_grid_large_${i}` })
        .first()
        .waitFor();
      small.push(await drawn(`trg_grid_small_${i}`));
      large.push(await drawn(`trg_grid_large_${i}`));
    }
    const big = median(large);
    row('page', 'a 400 × 400 gridded response drawn (downsampled), median of 5', ms(big), `${ms(median(small))} (4 × 4)`, big / Math.max(median(small), 0.1), {
      text: '≤ 200 ms',
      check: () => big <= 200,
    });
  } finally {
    await browser.close();
    await stop(l.child);
  }
}

// ---------------------------------------------------------------- memory
async function memory() {
  log('memory: one 20 MB delivery through listen');
  const secret = generateSecret();
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: benchDir(), BENCH_SECRET: secret });
  const size = 20 * 1024 * 1024;
  const values = [];
  let approx = 0;
  while (approx < size - 200) {
    const v = (270 + ((values.length * 7919) % 3000) / 100).toFixed(2);
    values.push(Number(v));
    approx += v.length + 1;
  }
  const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: 'trg_mem', data: { response: { type: 'gridded', values } } }));
  const headers = { 'content-type': 'application/json', ...signDelivery({ secret, body, triggerId: 'trg_mem' }) };
  const l = await startChild([BIN, 'listen', '--port', '0', '--json', '--secret-env', 'BENCH_SECRET'], env);
  try {
    const url = JSON.parse(l.first).url;
    const status = () => readFileSync(`/proc/${l.child.pid}/status`, 'utf8');
    const kb = (text, field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(text)[1]);
    await new Promise((r) => setTimeout(r, 300));
    const before = kb(status(), 'VmRSS');
    const res = await request(url, { method: 'POST', headers, body });
    await res.body.dump();
    if (res.statusCode !== 200) throw new Error(`the 20 MB delivery was answered ${res.statusCode}`);
    const peak = kb(status(), 'VmHWM');
    const grew = (peak - before) * 1024;
    row(
      'memory',
      `listen, one ${(body.length / 1048576).toFixed(1)} MiB delivery: peak RSS growth`,
      `${(grew / 1048576).toFixed(1)} MiB`,
      `${(body.length / 1048576).toFixed(1)} MiB (its size)`,
      grew / body.length,
      within(3),
    );
  } finally {
    await stop(l.child);
  }
}

// ---------------------------------------------------------------- emulator fan-out
async function fanout() {
  const n = 200;
  const repeats = QUICK ? 1 : 5;
  log(`fan-out: one event to ${n} webhooks, ${repeats} rounds`);
  const env = cleanEnv({ WXHOOKS_CONFIG_DIR: benchDir() });
  let arrivals = 0;
  let onArrival = () => undefined;
  const servers = await Promise.all(
    Array.from({ length: n }, async () => {
      const s = createServer((req, res) => {
        req.resume();
        req.on('end', () => {
          res.writeHead(200).end();
          arrivals++;
          onArrival();
        });
      });
      await new Promise((r) => s.listen(0, '127.0.0.1', r));
      return s;
    }),
  );
  const { child, first } = await startChild([BIN, 'emulator', '--port', '0', '--json'], env);
  try {
    const info = JSON.parse(first);
    const auth = { authorization: `Bearer ${info.api_key}`, 'content-type': 'application/json' };
    const secrets = [];
    for (const s of servers) {
      const res = await request(`${info.base_url}/webhooks/v1`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ url: `http://127.0.0.1:${s.address().port}/`, subscriptions: { 'forecast_hour.available': {} } }),
      });
      secrets.push((await res.body.json()).secret);
    }
    const wait = () => new Promise((resolve) => (onArrival = () => arrivals >= n && resolve()));
    const ours = [];
    const floor = [];
    for (let r = 0; r < repeats; r++) {
      arrivals = 0;
      let done = wait();
      let t = process.hrtime.bigint();
      const res = await request(`${info.base_url}/emulator/v1/events`, { method: 'POST', headers: auth, body: JSON.stringify({ type: 'forecast_hour.available', forecast_hour: r }) });
      await res.body.dump();
      await done;
      ours.push(Number(process.hrtime.bigint() - t) / 1e6);
      // the floor: the same 200 signed POSTs sent straight from here
      arrivals = 0;
      done = wait();
      t = process.hrtime.bigint();
      await Promise.all(
        servers.map(async (s, i) => {
          const body = Buffer.from(JSON.stringify({ type: 'forecast_hour.available', trigger_id: `trg_f${r}` }));
          const x = await request(`http://127.0.0.1:${s.address().port}/`, { method: 'POST', headers: signDelivery({ secret: secrets[i], body, triggerId: `trg_f${r}` }), body });
          await x.body.dump();
        }),
      );
      await done;
      floor.push(Number(process.hrtime.bigint() - t) / 1e6);
    }
    const o = median(ours);
    const f = median(floor);
    row('emulator', `one event to ${n} webhooks, all delivered`, ms(o), `${ms(f)} (the same POSTs sent directly)`, o / f, { text: '< 2000 ms', check: () => o < 2000 });
  } finally {
    await stop(child);
    await Promise.all(servers.map((s) => new Promise((r) => s.close(r))));
  }
}

// ---------------------------------------------------------------- the shared PostgreSQL store
/**
 * `listen --store postgres://` against `listen` on its file, side by side and in turn (as above), on a
 * throwaway server of the machine's own binaries (fsync off, as the file store's default does not sync
 * either). Then what batching saves: transactions per delivery at 1 client and at 50. Then three
 * instances on one database, two load generators sending the same deliveries to two of them at once.
 */
async function sharedStore() {
  let db;
  try {
    db = await startPostgres();
  } catch (err) {
    log(`store: skipped: ${err.message}`);
    row('store', 'PostgreSQL store', 'skipped: no PostgreSQL server binaries (install them, or set PG_BIN)', '', undefined);
    return;
  }
  const { default: pg } = await import('pg');
  const admin = new pg.Client({ connectionString: db.url });
  await admin.connect();
  const secret = generateSecret();
  const cycles = QUICK ? 3 : 10;
  const WARM = QUICK ? 5000 : 20000;
  const MANY = 5000;
  const ONE = 500;
  log(`store: listen with its file and with PostgreSQL, ${WARM} each to warm up, then ${cycles} cycles of ${ONE} at 1 client and ${MANY} at 50`);
  const servers = {};
  try {
    for (const [name, flags] of [
      ['file', []],
      ['pg', ['--store', db.url, '--store-schema', 'bench_one']],
    ]) {
      const dir = benchDir();
      const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, flags);
      servers[name] = { child: l.child, port: new URL(l.url).port };
    }
    const at = (name, count, clients) => load(servers[name].child.pid, servers[name].port, secret, count, clients, name === 'pg' ? db.pid : undefined);
    for (const name of ['file', 'pg']) at(name, WARM, 50);
    const results = { file: { one: [], many: [] }, pg: { one: [], many: [] } };
    for (let c = 0; c < cycles; c++) {
      for (const name of c % 2 ? ['pg', 'file'] : ['file', 'pg']) {
        results[name].one.push(at(name, ONE, 1));
        results[name].many.push(at(name, MANY, 50));
      }
    }
    // Transactions committed per delivery: the server's own count, around a listen of its own (its
    // backends report their counts when they exit), less what a listen that takes no delivery commits.
    await stop(servers.pg.child);
    const commits = async () => {
      await new Promise((r) => setTimeout(r, 300));
      return Number((await admin.query('SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()')).rows[0].xact_commit);
    };
    const around = async (count, clients) => {
      const before = await commits();
      const dir = benchDir();
      const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, ['--store', db.url, '--store-schema', 'bench_one']);
      if (count) load(l.child.pid, new URL(l.url).port, secret, count, clients);
      await stop(l.child);
      return (await commits()) - before - 1; // less this session's own query
    };
    const idle = await around(0, 1);
    const perDelivery = { one: ((await around(ONE, 1)) - idle) / ONE, many: ((await around(MANY, 50)) - idle) / MANY };
    const m = (xs, k) => median(xs.map((x) => x[k]));
    const ratio = (phase, k) => median(results.pg[phase].map((o, i) => o[k] / results.file[phase][i][k]));
    for (const [phase, clients] of [
      ['many', '50 clients'],
      ['one', '1 client'],
    ]) {
      row(
        'store',
        `deliveries/s, ${clients}: \`listen --store postgres://\` against \`listen\` (its file)`,
        `${Math.round(m(results.pg[phase], 'rps'))}/s`,
        `${Math.round(m(results.file[phase], 'rps'))}/s (file, same cycles)`,
        ratio(phase, 'rps'),
        phase === 'many' ? atLeast(0.5) : undefined,
      );
      row('store', `p99 latency, ${clients}: \`listen --store postgres://\``, ms(m(results.pg[phase], 'p99')), ms(m(results.file[phase], 'p99')), ratio(phase, 'p99'));
      row(
        'store',
        `CPU per delivery, ${clients}: \`listen --store postgres://\` / the PostgreSQL server`,
        `${m(results.pg[phase], 'cpuUs').toFixed(0)} µs / ${m(results.pg[phase], 'alsoUs').toFixed(0)} µs`,
        `${m(results.file[phase], 'cpuUs').toFixed(0)} µs (\`listen\`, file)`,
        ratio(phase, 'cpuUs'),
      );
      row(
        'store',
        `PostgreSQL transactions committed per delivery, ${clients} (claims and completions batched per turn)`,
        perDelivery[phase].toFixed(2),
        '2 (a claim and a completion each, unbatched)',
        perDelivery[phase] / 2,
      );
    }
  } finally {
    for (const server of Object.values(servers)) await stop(server.child);
  }

  // three instances, each delivery sent to two of them at the same moment
  const N = QUICK ? 5000 : 20000;
  log(`store: three instances on one database, ${N} deliveries each sent to two of them at once`);
  const three = [];
  try {
    for (let i = 0; i < 3; i++) {
      const dir = benchDir();
      const l = await startListen(cleanEnv({ WXHOOKS_CONFIG_DIR: dir, BENCH_SECRET: secret }), dir, ['--json', '--store', db.url, '--store-schema', 'bench_three']);
      three.push({ child: l.child, port: new URL(l.url).port, dir });
    }
    const ports = three.map((t) => t.port).join(',');
    // warm up each instance (deliveries of their own)
    for (const t of three) load(t.child.pid, t.port, secret, QUICK ? 3000 : 10000, 50);
    const generator = (offset) =>
      new Promise((resolve, reject) => {
        const child = spawn(process.execPath, [join(ROOT, 'bench/load.js'), ports, secret, String(N), '24', '0', '--tag', `three_${process.pid}`, '--offset', String(offset), '--retry-409'], {
          stdio: ['ignore', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (d) => (out += d));
        child.on('exit', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`bench/load.js exited ${code}`))));
      });
    const t0 = process.hrtime.bigint();
    const [a, b] = await Promise.all([generator(0), generator(1)]);
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    for (const t of three) await stop(t.child);
    if (a.failures || b.failures) {
      const odd = three.flatMap((t) =>
        readFileSync(join(t.dir, `listen-${t.port}.out`), 'utf8')
          .split('\n')
          .filter((l) => l && !/"outcome":"(accepted|duplicate|in_progress)"/.test(l)),
      );
      log(`store: ${a.failures + b.failures} answered neither 200 nor 409 (${JSON.stringify([a.statuses, b.statuses])}):\n${odd.slice(0, 20).join('\n')}`);
    }
    const lines = three.flatMap((t) =>
      readFileSync(join(t.dir, `listen-${t.port}.out`), 'utf8')
        .split('\n')
        .filter((l) => l.includes(`three_${process.pid}`)),
    );
    const accepted = lines.filter((l) => l.includes('"outcome":"accepted"')).length;
    const storeFailed = lines.filter((l) => l.includes('"outcome":"store_failed"')).length;
    const { rows: done } = await admin.query(`SELECT count(*)::int AS n FROM bench_three.pairs WHERE state = 'done' AND trigger_id LIKE $1`, [`trg_bench_three_${process.pid}_%`]);
    row(
      'store',
      `three \`listen --store postgres://\` on one database, ${N} deliveries each sent to two of them at once (${a.retries + b.retries} answered 409 or 503 and sent again)`,
      `${Math.round(N / seconds)} deliveries/s (${Math.round((2 * N) / seconds)} requests/s)`,
      `${accepted - N} processed twice; ${done[0].n} of ${N} pairs done; ${storeFailed} answered 503${a.failures + b.failures ? `; ${a.failures + b.failures} answered otherwise (see the log)` : ''}`,
      undefined,
      { text: '0 twice, all done', check: () => accepted === N && done[0].n === N },
    );
  } finally {
    for (const t of three) await stop(t.child);
    await admin.end();
    await db.remove();
  }
}

function table() {
  const head = '| Area | Measure | wxhooks | Floor (same run) | Ratio | Target | Met |\n|---|---|---|---|---|---|---|';
  return [head, ...rows.map((r) => `| ${r.area} | ${r.measure} | ${r.value} | ${r.floor} | ${r.ratio} | ${r.target?.text ?? ''} | ${r.ok} |`)].join('\n');
}

const started = Date.now();
const SECTIONS = {
  startup,
  listen: listenThroughput,
  refused,
  store: sharedStore,
  verify: verification,
  handler: handlerLibrary,
  middleware,
  octokit,
  page,
  memory,
  fanout,
  sinks: () => sinks({ row, log, median, QUICK, atLeast, listenAt: { startListen, load, stop, benchDir, cleanEnv, generateSecret } }),
  relay: () => relay({ row, log, median, pct, QUICK, atLeast }),
};
const only = process.argv.slice(2).filter((a) => !a.startsWith('--'));
for (const name of only) if (!(name in SECTIONS)) throw new Error(`unknown section ${name}; known: ${Object.keys(SECTIONS).join(', ')}`);
try {
  for (const [name, run] of Object.entries(SECTIONS)) {
    if (only.length && !only.includes(name)) continue;
    // a section that fails is said in the table, and the others' figures are still printed
    await Promise.resolve()
      .then(run)
      .catch((err) => {
        log(`${name}: failed: ${err.stack ?? err}`);
        row(name, 'the section failed', String(err.message ?? err).slice(0, 120), '', undefined, { text: 'runs', check: () => false });
      });
  }
} finally {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
}
const out = table();
process.stdout.write(`${out}\n`);
const cpu = cpus();
const machine = `${cpu.length} × ${cpu[0]?.model ?? 'unknown CPU'}, ${(totalmem() / 2 ** 30).toFixed(0)} GiB, Linux ${release()}, Node ${process.versions.node}`;
log(`machine: ${machine}; took ${((Date.now() - started) / 1000).toFixed(0)} s`);
if (process.argv.includes('--write')) {
  const doc = readFileSync(join(ROOT, 'BENCHMARKS.md'), 'utf8');
  const marker = /<!-- bench:start -->[\s\S]*<!-- bench:end -->/;
  const block = `<!-- bench:start -->\nMeasured ${new Date().toISOString().slice(0, 10)} on ${machine}.\n\n${out}\n<!-- bench:end -->`;
  writeFileSync(join(ROOT, 'BENCHMARKS.md'), marker.test(doc) ? doc.replace(marker, block) : `${doc}\n${block}\n`);
  log('BENCHMARKS.md updated');
}
