// The quick start, end to end and offline: an emulator, a receiver (`listen`) in front of a
// small app, a webhook with two subscriptions, and a short model run. Nothing is left running.
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
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

// Asynchronous, so that the demo's own app keeps answering while a command runs. A command whose output
// the demo reads (`capture`) writes to a pipe; the others write to the demo's own stdout, so that on a
// terminal they show as they would there (tables aligned, not tab-separated).
async function run(args, { capture = false } = {}) {
  show(args);
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', capture ? 'pipe' : 'inherit', 'pipe'] });
  children.push(child);
  child.exited = new Promise((resolve) => child.on('close', resolve));
  let out = '';
  child.stdout?.setEncoding('utf8').on('data', (d) => {
    out += d;
    process.stdout.write(d);
  });
  child.stderr.setEncoding('utf8').on('data', (d) => process.stderr.write(d));
  const code = await child.exited;
  if (code !== 0) throw new Error(`wxhooks ${args.join(' ')} exited ${code}`);
  return out;
}

/** A long-running command (listen, the emulator): its lines go to `onLine`, and `until` waits for one that matches. */
function start(args, onLine) {
  show([...args, '&']);
  const child = spawn(process.execPath, [BIN, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.push(child);
  const seen = [];
  const waiting = new Set();
  eachLine(child.stdout, (line) => {
    seen.push(line);
    onLine(line);
    for (const w of waiting) w();
  });
  child.stderrText = '';
  child.stderr.setEncoding('utf8').on('data', (d) => {
    child.stderrText += d;
    process.stderr.write(d);
    for (const w of waiting) w();
  });
  child.exited = new Promise((resolve) => child.on('close', resolve));
  /** Resolves once `count` lines (stdout) have matched `match`, or stderr says `match` (a string); rejects if the command ends first. */
  child.until = (match, count = 1) =>
    new Promise((resolve, reject) => {
      const look = () => {
        const found = typeof match === 'string' ? child.stderrText.includes(match) : seen.filter((l) => match.test(l)).length >= count;
        if (found) {
          waiting.delete(look);
          resolve();
        } else if (child.exitCode !== null) {
          waiting.delete(look);
          reject(new Error(`wxhooks ${args[0]} ended (${child.exitCode}) before what the demo waits for`));
        }
      };
      waiting.add(look);
      child.on('close', look);
      look();
    });
  return child;
}

/** A report line of listen's: a request answered (✓ accepted, ✗ refused or failed, ↺ duplicate). */
const ANSWERED = /^\d\d:\d\d:\d\d [✓✗↺]/;
const ACCEPTED = /^\d\d:\d\d:\d\d ✓ 200/;

async function main() {
  say('1. A local copy of the service');
  let info;
  const emulator = start(['emulator', '--port', '0', '--json', '--retry-delays', '1s,2s,4s'], (line) => {
    info ??= JSON.parse(line);
  });
  await emulator.until(/base_url/);
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
    await run(
      [
        'webhook',
        'create',
        '--url',
        `http://127.0.0.1:${port}/`,
        '--name',
        'demo',
        '--subscribe',
        'forecast_hour.available:model=wm-6;response=gridded',
        '--subscribe',
        'initialization_time.available',
        '--json',
      ],
      { capture: true },
    ),
  );
  console.log(`(the secret above is stored: \`wxhooks secret show ${created.id}\` shows it again)`);

  say('4. The receiver: verifies each delivery, skips duplicates, forwards to your app');
  const received = join(dir, 'received');
  const listen = start(['listen', '--port', String(port), '--webhook', created.id, '--forward-to', appUrl, '--save-dir', received], (line) => {
    console.log(`  listen │ ${line}`);
  });
  await listen.until('Ctrl-C to stop.');

  say('5. A short model run: forecast hours 0, 6 and 12, then the run complete');
  await run(['trigger', 'run', '--model', 'wm-6', '--hours', '0-12/6', '--interval', '300ms']);
  await listen.until(ANSWERED, 4); // each delivery's line, before the next step's title

  say('6. Waiting for the retry of the delivery your app refused…');
  await listen.until(ACCEPTED, 4);

  say('7. The same delivery again (the service retries when an answer is lost): listen skips it');
  const again = readdirSync(received).sort()[0];
  await run(['send', join(received, again), '--to', `http://127.0.0.1:${port}/`, '--webhook', created.id]);
  await listen.until(/duplicate, skipped/);
  listen.kill('SIGINT');
  const code = await listen.exited;
  if (code !== 130) throw new Error(`listen did not stop as asked (${code})`);
  await new Promise((r) => app.close(r));

  say('8. What the emulator sent, attempt by attempt');
  await run(['emulator', 'deliveries']);

  say('9. A run with a hole: hours out of order, one twice, one never; listen waits for the whole run');
  const saved = join(dir, 'deliveries');
  const gate = start(
    ['listen', '--port', String(port), '--webhook', created.id, '--save-dir', saved, '--until-run', 'wm-6@2026-11-22T00:00:00Z', '--expect-hours', '0-24/6', '--within', '4s'],
    (line) => {
      console.log(`  listen │ ${line}`);
    },
  );
  await gate.until('Ctrl-C to stop.');
  await run(['trigger', 'run', '--model', 'wm-6', '--init-time', '2026-11-22T00:00:00Z', '--hours', '0-24/6', '--skip-hours', '18', '--repeat-hours', '6', '--shuffle']);
  const gateCode = await gate.exited;
  if (gateCode !== 9) throw new Error(`listen --until-run should have said the run is incomplete (exit 9), not ${gateCode}`);
  console.log('(exit 9, as intended: the run is not complete, and listen said which hour is missing)');
  await run(['runs', '--dir', saved, '--expect-hours', '0-24/6']);

  console.log('\nDone: every delivery verified, the refused one retried and accepted, the one sent again skipped, the missing hour named.');
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
