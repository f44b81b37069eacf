// The quick start, end to end and offline: an emulator, a receiver (`listen`) in front of a
// small app, a webhook with two subscriptions, and a short model run. Nothing is left running.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eachLine, freePort } from './harness.js';

const BIN = new URL('../bin/wxhooks.js', import.meta.url).pathname;
const dir = mkdtempSync(join(tmpdir(), 'wxhooks-demo-'));
const env = { ...process.env, WXHOOKS_CONFIG_DIR: dir, NO_COLOR: process.env.NO_COLOR ?? '' };
for (const k of ['WX_BASE_URL', 'WX_API_KEY', 'WX_CLIENT_ID', 'HTTP_PROXY', 'HTTPS_PROXY', 'http_proxy', 'https_proxy']) delete env[k];
const children = [];
const say = (text) => process.stdout.write(`\n\x1b[1m${text}\x1b[0m\n`);
const show = (args) => process.stdout.write(`$ wxhooks ${args.map((a) => (/[\s;']/.test(a) ? `'${a}'` : a)).join(' ')}\n`);

// Asynchronous, so that the demo's own app keeps answering while a command runs.
async function run(args) {
  show(args);
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  child.exited = new Promise((resolve) => child.on('close', resolve));
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d) => {
    out += d;
    process.stdout.write(d);
  });
  child.stderr.setEncoding('utf8').on('data', (d) => process.stderr.write(d));
  const code = await child.exited;
  if (code !== 0) throw new Error(`wxhooks ${args.join(' ')} exited ${code}`);
  return out;
}

function start(args, onLine) {
  show([...args, '&']);
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  eachLine(child.stdout, onLine);
  child.stderrText = '';
  child.stderr.setEncoding('utf8').on('data', (d) => {
    child.stderrText += d;
    process.stderr.write(d);
  });
  child.exited = new Promise((resolve) => child.on('close', resolve));
  return child;
}

async function main() {
  say('1. A local copy of the service');
  let info;
  const emulator = start(['emulator', '--port', '0', '--json', '--retry-delays', '1s,2s,4s'], (line) => {
    info ??= JSON.parse(line);
  });
  while (!info) {
    if (emulator.exitCode !== null) throw new Error('the emulator did not start');
    await new Promise((r) => setTimeout(r, 50));
  }
  env.WX_BASE_URL = info.base_url;
  env.WX_API_KEY = info.api_key;
  console.log(`emulator on ${info.base_url}; this demo's settings and secrets live in ${dir}`);
  await run(['auth', 'status']);

  say('2. Your app: it fails the first delivery it gets, then accepts the rest');
  let calls = 0;
  const app = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      calls++;
      if (calls === 1) res.writeHead(500).end('database not ready');
      else res.writeHead(200).end('stored');
    });
  });
  await new Promise((r) => app.listen(0, '127.0.0.1', r));
  const appUrl = `http://127.0.0.1:${app.address().port}/webhooks`;
  console.log(`app on ${appUrl}`);

  say('3. A webhook with two subscriptions, pointing at a local receiver');
  const port = await freePort();
  const created = JSON.parse(
    await run([
      'webhook', 'create', '--url', `http://127.0.0.1:${port}/`, '--name', 'demo',
      '--subscribe', 'forecast_hour.available:model=wm-6;response=gridded',
      '--subscribe', 'initialization_time.available', '--json',
    ]),
  );
  console.log(`(the secret above is stored: \`wxhooks secret show ${created.id}\` shows it again)`);

  say('4. The receiver: verifies each delivery, skips duplicates, forwards to your app');
  const listen = start(['listen', '--port', String(port), '--webhook', created.id, '--forward-to', appUrl, '--exit-after', '4'], (line) => {
    console.log(`  listen │ ${line}`);
  });
  // listen says "Ready." on stderr once it is listening
  for (let i = 0; i < 200 && !listen.stderrText.includes('Ready.'); i++) {
    if (listen.exitCode !== null) throw new Error('listen did not start');
    await new Promise((r) => setTimeout(r, 25));
  }

  say('5. A short model run: forecast hours 0, 6 and 12, then the run complete');
  await run(['trigger', 'run', '--model', 'wm-6', '--hours', '0-12/6', '--interval', '300ms']);

  say('6. Waiting for the retry of the delivery your app refused…');
  const code = await Promise.race([listen.exited, new Promise((r) => setTimeout(() => r('timeout'), 20_000))]);
  if (code !== 0) throw new Error(`listen did not finish as expected (${code})`);

  say('7. What the emulator sent, attempt by attempt');
  const res = await fetch(`${info.base_url}/emulator/v1/deliveries`, { headers: { authorization: `Bearer ${info.api_key}` } });
  for (const d of (await res.json()).deliveries) {
    console.log(`  ${d.type.padEnd(30)} sub ${d.subscription_id} attempt ${d.attempt}: ${d.outcome} (${d.status ?? d.error})`);
  }
  await new Promise((r) => app.close(r));

  say('8. A run with a hole: hours out of order, one twice, one never; listen waits for the whole run');
  const saved = join(dir, 'deliveries');
  const gate = start(['listen', '--port', String(port), '--webhook', created.id, '--save-dir', saved, '--until-run', 'wm-6@2026-11-22T00:00:00Z', '--expect-hours', '0-24/6', '--within', '4s'], (line) => {
    console.log(`  listen │ ${line}`);
  });
  for (let i = 0; i < 200 && !gate.stderrText.includes('Ready.'); i++) await new Promise((r) => setTimeout(r, 25));
  await run(['trigger', 'run', '--model', 'wm-6', '--init-time', '2026-11-22T00:00:00Z', '--hours', '0-24/6', '--skip-hours', '18', '--repeat-hours', '6', '--shuffle']);
  const gateCode = await gate.exited;
  if (gateCode !== 9) throw new Error(`listen --until-run should have said the run is incomplete (exit 9), not ${gateCode}`);
  console.log('(exit 9: the run is not complete, and listen said which hour is missing)');
  await run(['runs', '--dir', saved, '--expect-hours', '0-24/6']);

  console.log('\nDone: every delivery verified, the refused one retried and accepted, nothing processed twice, the missing hour named.');
}

// However the demo ends (done, failed, Ctrl-C, SIGTERM, or its output closed: `npm run demo | head`), its
// children are ended and its folder, which holds a webhook secret, is removed; then it exits.
let ending;
function end(code, why) {
  ending ??= (async () => {
    if (why) process.stderr.write(`demo: ${why}; cleaning up\n`);
    for (const c of children) if (c.exitCode === null) c.kill('SIGTERM');
    await Promise.all(children.map((c) => c.exited));
    rmSync(dir, { recursive: true, force: true });
    process.exit(code);
  })();
  return ending;
}
process.on('SIGINT', () => void end(130, 'interrupted'));
process.on('SIGTERM', () => void end(143, 'terminated'));
process.on('SIGHUP', () => void end(129, 'hung up'));
process.stdout.on('error', (err) => void end(err.code === 'EPIPE' ? 141 : 1, `its output was closed (${err.code ?? err.message})`));

try {
  await main();
  await end(0);
} catch (err) {
  console.error(`demo failed: ${err.message}`);
  await end(1);
}
