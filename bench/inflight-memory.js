// What `listen` holds under `--max-inflight` (issue #32.6): N signed deliveries of SIZE at once, forwarded
// and saved, against the built binary; prints the peak resident memory growth against the flag. Not a test:
//   node bench/inflight-memory.js [--n 300] [--size 1MiB] [--max-inflight 256MiB] [--no-save] [--no-forward]
//                                 [--hold] [--inspect] [--postgres] [--node-options '--expose-gc ...'] [--env K=V]...
// --hold: the app answers nothing until every request is at the app or told 503 (what listen admitted is
// then all held at once); else it answers at once. --postgres: a throwaway PostgreSQL store, with a history.
// Each --env is given to listen (MALLOC_ARENA_MAX=2...).
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { Agent, createServer, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { signDelivery } from '../dist/index.js';
import { eachLine, startPostgres } from '../scripts/harness.js';

const args = process.argv.slice(2);
const flag = (name, fallback) => {
  const i = args.indexOf(`--${name}`);
  return i === -1 ? fallback : args[i + 1];
};
const has = (name) => args.includes(`--${name}`);
const bytes = (text) => {
  const m = /^(\d+(?:\.\d+)?)\s*(B|KiB|MiB|GiB)?$/i.exec(text);
  return Math.round(Number(m[1]) * { b: 1, kib: 1024, mib: 1024 ** 2, gib: 1024 ** 3 }[(m[2] ?? 'b').toLowerCase()]);
};
const N = Number(flag('n', '300'));
const SIZE = bytes(flag('size', '1MiB'));
const MAX = flag('max-inflight', undefined);
const env = Object.fromEntries(args.flatMap((a, i) => (args[i - 1] === '--env' ? [a.split('=')] : [])));

const SECRET = 'whsec_' + Buffer.alloc(32, 9).toString('base64');
const mib = (n) => (n / 1024 / 1024).toFixed(0);
function memoryOf(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field) => Number(new RegExp(`${field}:\\s+(\\d+)`).exec(status)[1]);
  return { rss: kb('VmRSS') * 1024, peak: kb('VmHWM') * 1024 };
}

/** A forecast delivery of about `size` bytes (a gridded response: numbers, as the service sends). */
function delivery(n) {
  const trigger = `trg_mem_${process.pid}_${n}`;
  const row = Array.from({ length: 200 }, (_, j) => ((n * 7 + j * 13) % 4000) / 100);
  const rowText = JSON.stringify(row).length + 1;
  const values = Array.from({ length: Math.max(1, Math.floor((SIZE - 300) / rowText)) }, () => row);
  const body = Buffer.from(
    JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: trigger, data: { model: 'wm-6', forecast_hour: 0, response: { type: 'gridded', values } } }),
  );
  return { body, headers: { 'content-type': 'application/json', ...signDelivery({ secret: SECRET, body, triggerId: trigger }) } };
}

let arrived = 0;
let refused = 0;
let released = !has('hold');
const waiting = [];
const release = () => {
  if (released || arrived + refused < N) return;
  released = true;
  waiting.splice(0).forEach((a) => a());
};
const app = createServer((req, res) => {
  req.resume();
  req.on('end', () => {
    arrived++;
    const answer = () => res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
    if (released) answer();
    else waiting.push(answer), release();
  });
});
await new Promise((r) => app.listen(0, '127.0.0.1', r));

const dir = mkdtempSync(join(tmpdir(), 'wxhooks-mem-'));
const flags = ['listen', '--port', '0', '--json', '--secret-env', 'S'];
if (MAX) flags.push('--max-inflight', MAX);
if (!has('no-save')) flags.push('--save-dir', join(dir, 'saved'));
if (!has('no-forward')) flags.push('--forward-to', `http://127.0.0.1:${app.address().port}/hooks`);
if (has('inspect')) flags.push('--inspect', '127.0.0.1:0');
const db = has('postgres') ? await startPostgres() : undefined;
if (db) flags.push('--store', db.url, '--history', '500');
const child = spawn(process.execPath, [...(flag('node-options') ?? '').split(' ').filter(Boolean), new URL('../bin/wxhooks.js', import.meta.url).pathname, ...flags], {
  env: { ...process.env, WXHOOKS_CONFIG_DIR: dir, S: SECRET, ...env },
  stdio: ['ignore', 'pipe', 'inherit'],
});
const url = await new Promise((resolve) => eachLine(child.stdout, (l) => l.includes('"listening"') && resolve(JSON.parse(l).url)));
const port = Number(new URL(url).port);

const list = Array.from({ length: N }, (_, n) => delivery(n));
const before = memoryOf(child.pid).rss;
const agent = new Agent({ keepAlive: true, maxSockets: N });
const statuses = await Promise.all(
  list.map(
    (d) =>
      new Promise((resolve) => {
        const req = request({ host: '127.0.0.1', port, path: '/', method: 'POST', agent, headers: d.headers }, (res) => {
          res.resume();
          res.on('close', () => {
            if (res.statusCode === 503) refused++, release();
            resolve(res.statusCode);
          });
        });
        req.on('error', () => resolve(0));
        req.end(d.body);
      }),
  ),
);
const after = memoryOf(child.pid);
agent.destroy();
const count = (s) => statuses.filter((x) => x === s).length;
const max = MAX ? bytes(MAX) : 256 * 1024 * 1024;
console.log(
  JSON.stringify({
    n: N,
    size_mib: +(list[0].body.length / 1024 / 1024).toFixed(2),
    max_inflight_mib: +mib(max),
    save: !has('no-save'),
    forward: !has('no-forward'),
    hold: has('hold'),
    postgres: Boolean(db),
    inspect: has('inspect'),
    env,
    ok: count(200),
    refused_503: count(503),
    other: Object.fromEntries([...new Set(statuses)].filter((x) => x !== 200 && x !== 503).map((x) => [x, count(x)])),
    rss_before_mib: +mib(before),
    peak_mib: +mib(after.peak),
    growth_mib: +mib(after.peak - before),
    growth_over_flag: +((after.peak - before) / max).toFixed(2),
  }),
);
child.kill('SIGINT');
await new Promise((r) => child.on('exit', r));
app.close();
await db?.remove();
rmSync(dir, { recursive: true, force: true });
