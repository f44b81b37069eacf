// `npm run bench -- relay`: `listen --relay` (#35) against `listen` receiving the same deliveries directly,
// in the same run: the drain rate of a backlog of 10,000 (the relay's `relay serve`, file store, filled
// while listen is off; then `listen --relay` started, timed from its channel being open to its last
// report), against `listen --port` taking 10,000 from bench/load.js (16 connections); and the latency of a
// live delivery, the sender's POST to the app's receipt, through the relay and directly, one at a time,
// in turns.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from 'undici';
import { signDelivery } from '../dist/index.js';
import { generateSecret } from '../dist/signing/sign.js';
import { eachLine, freePort } from '../scripts/harness.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/wxhooks.js');

/** A child running the CLI, its stdout read line by line; `waitFor` resolves at the first line that matches. */
function startCli(args, env) {
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['pipe', 'pipe', 'pipe'] });
  const lines = [];
  const waiters = new Set();
  let err = '';
  child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
  eachLine(child.stdout, (line) => {
    lines.push(line);
    for (const w of waiters) w(line);
  });
  return {
    child,
    lines,
    stderr: () => err,
    waitFor: (test) =>
      new Promise((resolve, reject) => {
        for (const line of lines) {
          try {
            const v = JSON.parse(line);
            if (test(v)) return resolve(v);
          } catch {
            // not JSON
          }
        }
        const w = (line) => {
          let v;
          try {
            v = JSON.parse(line);
          } catch {
            return;
          }
          if (test(v)) {
            waiters.delete(w);
            resolve(v);
          }
        };
        waiters.add(w);
        child.once('exit', (code) => reject(new Error(`${args.join(' ')} exited ${code}: ${err}`)));
      }),
  };
}

const stop = (child) => new Promise((resolve) => (child.exitCode !== null ? resolve() : (child.once('exit', resolve), child.kill('SIGINT'))));

/** bench/load.js in its own process, run asynchronously: the listens' output pipes are read meanwhile (a full pipe would stall them). */
/** CPU time (user + system) a process has used so far, in ms (from /proc). */
function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
  } catch {
    return NaN;
  }
}

function load(port, secret, count, clients, tag, path) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [join(ROOT, 'bench/load.js'), String(port), secret, String(count), String(clients), '0', '--tag', tag, ...(path ? ['--path', path] : [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (d) => (out += d));
    child.stderr.setEncoding('utf8').on('data', (d) => (err += d));
    child.on('exit', (code) => {
      if (code !== 0) return reject(new Error(`bench/load.js failed: ${err}`));
      const result = JSON.parse(out);
      if (result.failures) return reject(new Error(`${result.failures} of ${count} requests were not answered 200: ${JSON.stringify(result.statuses)}`));
      resolve(result);
    });
  });
}

async function waitHealthy(url) {
  for (let i = 0; i < 400; i++) {
    const ok = await request(`${url}/health`).then(
      async (r) => (await r.body.dump(), r.statusCode === 200),
      () => false,
    );
    if (ok) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the relay did not start');
}

export async function relay({ row, log, median, pct, QUICK, atLeast }) {
  const dir = mkdtempSync(join(tmpdir(), 'wxhooks-bench-relay-'));
  const token = randomBytes(24).toString('hex');
  const secret = generateSecret();
  const env = { ...process.env, WXHOOKS_CONFIG_DIR: join(dir, 'cfg'), WX_BASE_URL: 'http://127.0.0.1:9', WXHOOKS_RELAY_TOKEN: token, BENCH_SECRET: secret };
  for (const k of Object.keys(env)) if (/_proxy$/i.test(k) || k === 'WX_API_KEY' || k === 'WB_API_KEY') delete env[k];
  const set = spawnSync(process.execPath, [BIN, 'secret', 'set', '1'], { env, input: secret, encoding: 'utf8' });
  if (set.status !== 0) throw new Error(`secret set: ${set.stderr}`);
  const port = await freePort();
  const relayProc = startCli(['relay', 'serve', '--port', String(port), '--dir', join(dir, 'relay')], env);
  const relayUrl = `http://127.0.0.1:${port}`;
  const N = QUICK ? 2000 : 10000;
  const rounds = QUICK ? 1 : 3;
  const runs = [];
  try {
    await waitHealthy(relayUrl);
    // the lasting channel of webhook 1, opened once (it gives the relay the secret)
    const opener = startCli(['listen', '--relay', relayUrl, '--webhook', '1', '--json'], env);
    const { channel } = await opener.waitFor((v) => v.event === 'listening');
    await stop(opener.child);
    log(`relay: channel ${channel}`);

    for (let round = 0; round < rounds; round++) {
      // directly: listen on a port of its own, 16 connections
      const directPort = await freePort();
      const direct = startCli(['listen', '--port', String(directPort), '--secret-env', 'BENCH_SECRET', '--json'], env);
      await direct.waitFor((v) => v.event === 'listening');
      const d = await load(directPort, secret, N, 16, `direct_${process.pid}_${round}`);
      await stop(direct.child);

      // through the relay: the backlog made while listen is off, then drained
      const fill = await load(port, secret, N, 16, `relay_${process.pid}_${round}`, `/in/${channel}`);
      const drain = startCli(['listen', '--relay', relayUrl, '--webhook', '1', '--json'], env);
      const spawned = performance.now();
      let t0 = 0;
      let seen = 0;
      const relayCpu = cpuMs(relayProc.child.pid);
      // one waiter for both: lines of one chunk are handed over together
      await drain.waitFor((v) => {
        if (v.event === 'relay_connected') t0 = performance.now();
        return v.outcome !== undefined && ++seen === N;
      });
      const t1 = performance.now();
      const cpu = { relay: ((cpuMs(relayProc.child.pid) - relayCpu) * 1000) / N, listen: (cpuMs(drain.child.pid) * 1000) / N };
      await stop(drain.child);
      const relayRps = N / ((t1 - t0) / 1000);
      runs.push({ direct: d.rps, relay: relayRps, fill: fill.rps, startMs: t0 - spawned, cpu });
      log(
        `relay round ${round + 1}: direct ${d.rps.toFixed(0)}/s, drained ${relayRps.toFixed(0)}/s (CPU a delivery: relay ${cpu.relay.toFixed(0)} µs, listen ${cpu.listen.toFixed(0)} µs with its start; the relay took the backlog at ${fill.rps.toFixed(0)}/s)`,
      );
    }
    const ratios = runs.map((r) => r.relay / r.direct);
    row(
      'relay',
      `drain of a ${N.toLocaleString('en')} backlog by listen --relay (deliveries/s)`,
      median(runs.map((r) => r.relay)).toFixed(0),
      `${median(runs.map((r) => r.direct)).toFixed(0)} (listen direct, 16 conn.)`,
      median(ratios),
      atLeast(0.5),
    );
    row('relay', 'the relay taking the backlog in (relay serve, file store, 16 conn.)', `${median(runs.map((r) => r.fill)).toFixed(0)}/s`, '', undefined, undefined);

    // live latency: the sender's POST to the app's receipt, one at a time, direct and through the relay in turns
    const arrived = new Map();
    const app = createServer((req, res) => {
      const t = performance.now();
      req.resume();
      req.on('end', () => {
        arrived.get(req.headers['trigger-id'])?.(t);
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
      });
    });
    await new Promise((r) => app.listen(0, '127.0.0.1', r));
    const appUrl = `http://127.0.0.1:${app.address().port}/hooks`;
    const directPort = await freePort();
    const direct = startCli(['listen', '--port', String(directPort), '--secret-env', 'BENCH_SECRET', '--json', '--forward-to', appUrl], env);
    const relayed = startCli(['listen', '--relay', relayUrl, '--webhook', '1', '--json', '--forward-to', appUrl], env);
    try {
      await direct.waitFor((v) => v.event === 'listening');
      await relayed.waitFor((v) => v.event === 'listening');
      const n = QUICK ? 100 : 400;
      const times = { direct: [], relay: [] };
      const one = async (kind, i) => {
        const trigger = `trg_lat_${kind}_${process.pid}_${i}`;
        const body = Buffer.from(
          JSON.stringify({ type: 'forecast_hour.available', webhook_id: '1', subscription_id: '1', trigger_id: trigger, test: false, data: { model: 'wm-6', forecast_hour: i % 48 } }),
        );
        const headers = { 'content-type': 'application/json', ...signDelivery({ secret, body, triggerId: trigger }) };
        const got = new Promise((resolve) => arrived.set(trigger, resolve));
        const t = performance.now();
        const res = await request(kind === 'direct' ? `http://127.0.0.1:${directPort}/` : `${relayUrl}/in/${channel}`, { method: 'POST', headers, body });
        await res.body.dump();
        if (res.statusCode !== 200) throw new Error(`${kind}: answered ${res.statusCode}`);
        const at = await got;
        arrived.delete(trigger);
        // warm-up: the first 20 of each are not counted
        if (i >= 20) times[kind].push(at - t);
      };
      for (let i = 0; i < n; i++) {
        await one('direct', i);
        await one('relay', i);
      }
      const ms = (x) => `${x.toFixed(2)} ms`;
      const [d50, r50, d99, r99] = [median(times.direct), median(times.relay), pct(times.direct, 99), pct(times.relay, 99)];
      row('relay', 'live delivery, sender to app: median (added by the relay)', `${ms(r50)} (+${ms(r50 - d50)})`, `${ms(d50)} (listen direct)`, r50 / d50, undefined);
      row('relay', 'live delivery, sender to app: p99 (added by the relay)', `${ms(r99)} (+${ms(r99 - d99)})`, `${ms(d99)} (listen direct)`, r99 / d99, undefined);
    } finally {
      await stop(direct.child);
      await stop(relayed.child);
      app.close();
    }
  } finally {
    await stop(relayProc.child);
    rmSync(dir, { recursive: true, force: true });
  }
}
